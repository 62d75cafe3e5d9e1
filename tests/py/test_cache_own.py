"""ssdfeed.cache(dataset): a user's own dataset, wrapped with one line, under
an unchanged torch DataLoader (issue 29's held-out check, PyTorch part)."""

import json
import os
import pickle
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from PIL import Image  # noqa: E402

import cache_own_data as data  # noqa: E402
import ssdfeed  # noqa: E402
from ssdfeed import SkippedItemsError  # noqa: E402
from test_items_codec import same  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def counter(tmp_path, monkeypatch):
    d = tmp_path / "counter"
    d.mkdir()
    monkeypatch.setenv("CACHE_OWN_COUNTER", str(d))
    return d


def uncounted(fn):
    """fn() without counting (the reference values of a check)."""
    old = os.environ.pop("CACHE_OWN_COUNTER", None)
    try:
        return fn()
    finally:
        if old is not None:
            os.environ["CACHE_OWN_COUNTER"] = old


def job_env(counter_dir, **extra):
    env = dict(os.environ, CACHE_OWN_COUNTER=str(counter_dir))
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


JOB = """
import sys, ssdfeed, cache_own_data as d
cached = ssdfeed.cache(d.MixedDataset(), cache=sys.argv[1])
order = range(len(cached)) if sys.argv[2] == "forward" else range(len(cached) - 1, -1, -1)
for i in order:
    cached[i]
"""


def _terminal_sigint():
    """SIGINT as a terminal's shell gives it. A job started in the background
    by a non-interactive shell (CI scripts, `cmd &`) inherits SIGINT ignored,
    and Python then installs no KeyboardInterrupt handler: Ctrl-C could not
    reach the warm-up at all, which is not what this test is about."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_blocked(tmp_path, job):
    """Until the job's blocking item has announced itself (a condition, polled)."""
    while not (tmp_path / "blocked").exists():
        assert job.poll() is None, "the job ended before its blocking item"
        time.sleep(0.05)


def run_job(root, counter_dir, order="forward", **extra):
    return subprocess.Popen([sys.executable, "-c", JOB, str(root), order],
                            env=job_env(counter_dir, **extra), cwd=HERE)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_with_workers_and_shuffle_two_epochs(tmp_path, counter, context):
    ds = data.MixedDataset()
    cached = ssdfeed.cache(ds, cache=tmp_path / "c")  # the one-line change
    for epoch in range(2):
        g1, g2 = torch.Generator().manual_seed(epoch), torch.Generator().manual_seed(epoch)
        mine = torch.utils.data.DataLoader(cached, batch_size=None, shuffle=True, num_workers=2,
                                           multiprocessing_context=context, generator=g1)
        ref = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True, generator=g2)
        got = list(mine)
        want = uncounted(lambda: list(ref))
        assert len(got) == len(ds)
        for a, b in zip(want, got):
            same(a, b)
    assert data.counts(counter) == {i: 1 for i in range(len(ds))}
    for i in range(len(ds)):  # cached[i] is dataset[i], types included, without a DataLoader
        same(uncounted(lambda: ds[i]), cached[i])
    assert data.counts(counter) == {i: 1 for i in range(len(ds))}


def test_default_collate_batches_equal_the_uncached_ones(tmp_path, counter):
    ds = data.ArrayDataset()
    cached = ssdfeed.cache(ds, cache=tmp_path / "c")
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    got = list(torch.utils.data.DataLoader(cached, batch_size=5, shuffle=True, num_workers=2,
                                           generator=g1))
    want = uncounted(lambda: list(torch.utils.data.DataLoader(ds, batch_size=5, shuffle=True,
                                                              generator=g2)))
    for (xa, ya), (xb, yb) in zip(want, got):
        assert torch.equal(xa, xb) and torch.equal(ya, yb) and ya.dtype == yb.dtype


def test_two_concurrent_jobs_share_the_fill(tmp_path, counter):
    root = tmp_path / "c"
    jobs = [run_job(root, counter, "forward"), run_job(root, counter, "backward")]
    assert [j.wait(timeout=300) for j in jobs] == [0, 0]
    # Each item computed once in all: the jobs waited for each other's claims.
    assert data.counts(counter) == {i: 1 for i in range(data.N)}
    cached = ssdfeed.cache(data.MixedDataset(), cache=root)
    for i in range(data.N):
        same(uncounted(lambda: data.MixedDataset()[i]), cached[i])


def test_killed_job_leaves_only_the_rest_to_compute(tmp_path):
    root = tmp_path / "c"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    job = run_job(root, first, CACHE_OWN_BLOCK_AT=15)
    wait_blocked(tmp_path, job)  # item 15 announced itself; it never returns
    job.send_signal(signal.SIGKILL)
    job.wait()
    cached = ssdfeed.cache(data.MixedDataset(), cache=root)
    stored = cached.present()
    assert 0 < stored <= 15
    assert run_job(root, second).wait(timeout=300) == 0
    # The second job computed exactly what the killed one had not stored.
    assert sum(data.counts(second).values()) == data.N - stored
    assert cached.present() == data.N


def test_changed_getitem_code_gives_new_values(tmp_path):
    mod = tmp_path / "userdata.py"
    src = ("class Squares:\n    def __len__(self):\n        return 6\n\n"
           "    def __getitem__(self, i):\n        return i * i\n")
    script = ("import sys, ssdfeed, userdata\n"
              "c = ssdfeed.cache(userdata.Squares(), cache=sys.argv[1])\n"
              "print([c[i] for i in range(len(c))])\n")

    def run():
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "c")], cwd=tmp_path,
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    mod.write_text(src)
    assert run() == [0, 1, 4, 9, 16, 25]
    mod.write_text(src.replace("return i * i", "return i * i + 1"))
    assert run() == [1, 2, 5, 10, 17, 26]  # not the cached squares
    mod.write_text(src.replace("return 6", "return 6  # a comment"))
    assert run() == [0, 1, 4, 9, 16, 25]


def test_changed_transform_or_setting_changes_the_default_identity():
    class Folder:
        def __init__(self, root, transform):
            self.root, self.transform = root, transform

        def __len__(self):
            return 3

        def __getitem__(self, i):
            return self.transform(i)

    def double(x):
        return 2 * x

    def triple(x):
        return 3 * x

    ids = {ssdfeed.cache(Folder(r, t), cache=False)._identity
           for r, t in [("a", double), ("b", double), ("a", triple)]}
    assert len(ids) == 3
    assert (ssdfeed.cache(Folder("a", double), cache=False)._identity
            == ssdfeed.cache(Folder("a", double), cache=False)._identity)


def test_a_key_names_the_data(tmp_path, counter):
    a = ssdfeed.cache(data.ArrayDataset(), key="v1", cache=tmp_path / "c")
    a[0]
    b = ssdfeed.cache(data.ArrayDataset(), key="v1", cache=tmp_path / "c")
    b[0]
    ssdfeed.cache(data.ArrayDataset(), key="v2", cache=tmp_path / "c")[0]
    assert data.counts(counter) == {0: 2}
    assert a._uri == "python:v1"


def test_pil_images_from_an_image_folder_round_trip(tmp_path):
    folder = tmp_path / "imgs" / "cat"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for k, mode in enumerate(["RGB", "L", "P", "RGBA"]):
        img = Image.fromarray(rng.integers(0, 256, (20 + k, 30, 3), dtype=np.uint8)).convert(mode)
        img.save(folder / f"{k}.png")
    Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(folder / "x.jpg")

    class ImageFolder:  # what torchvision's ImageFolder returns without transforms
        def __init__(self, root):
            self.files = sorted(str(p) for p in (tmp_path / "imgs").rglob("*.*"))

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            with open(self.files[i], "rb") as f:
                img = Image.open(f)
                img.load()
            return img, 0

    ds = ImageFolder(tmp_path / "imgs")
    cached = ssdfeed.cache(ds, cache=tmp_path / "c")
    for _ in range(2):  # computed, then read from the cache
        for i in range(len(ds)):
            (a, la), (b, lb) = ds[i], cached[i]
            assert isinstance(b, Image.Image) and la == lb
            assert (a.mode, a.size, a.tobytes(), a.getpalette()) == (b.mode, b.size, b.tobytes(),
                                                                     b.getpalette())


def test_unsupported_type_is_named(tmp_path):
    cached = ssdfeed.cache(data.SetDataset(), cache=tmp_path / "c")
    with pytest.raises(TypeError, match=r'item\[1\]\["boxes"\]: set'):
        cached[2]
    skipping = ssdfeed.cache(data.SetDataset(), cache=tmp_path / "c", on_error="skip")
    with pytest.raises(TypeError, match=r'item\[1\]\["boxes"\]: set'):
        skipping[2]  # a programming error, not a bad item: never skipped


def test_getitem_error_propagates_with_its_index(tmp_path, counter):
    cached = ssdfeed.cache(data.FailingDataset(), cache=tmp_path / "c")
    with pytest.raises(ValueError, match="corrupt file for 3") as e:
        cached[3]
    assert "item 3" in str(e.value) + " ".join(getattr(e.value, "__notes__", []))
    same(cached[2], np.array([2]))


def test_on_error_skip_serves_the_next_good_item_and_names_the_bad(tmp_path, counter, capfd):
    cached = ssdfeed.cache(data.FailingDataset(bad=(3, 4, 7)), cache=tmp_path / "c",
                           on_error="skip")
    same(cached[3], np.array([5]))
    same(cached[7], np.array([0]))  # wraps around
    assert set(cached.skipped) == {3, 4, 7}
    assert "corrupt file for 3" in cached.skipped[3]
    err = capfd.readouterr().err
    assert "skipped item 3" in err and "corrupt file for 4" in err
    # Under an unchanged DataLoader an epoch runs through.
    got = [int(x) for x in torch.utils.data.DataLoader(cached, batch_size=None)]
    assert got == [0, 1, 2, 5, 5, 5, 6, 0]


def test_every_item_failing_under_skip_is_an_error(tmp_path):
    cached = ssdfeed.cache(data.FailingDataset(n=2, bad=(0, 1)), cache=tmp_path / "c",
                           on_error="skip")
    with pytest.raises(SkippedItemsError, match="every item"):
        cached[0]


def test_pickles_without_its_open_entry(tmp_path, counter):
    cached = ssdfeed.cache(data.ArrayDataset(), cache=tmp_path / "c")
    cached[1]
    clone = pickle.loads(pickle.dumps(cached))
    same(clone[1], cached[1])
    assert data.counts(counter) == {1: 1}


def test_cache_false_is_a_passthrough(counter):
    ds = data.ArrayDataset()
    cached = ssdfeed.cache(ds, cache=False)
    same(cached[4], uncounted(lambda: ds[4]))
    assert len(cached) == len(ds)


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(TypeError, match="map-style"):
        ssdfeed.cache(iter([1]))
    with pytest.raises(ValueError, match="on_error"):
        ssdfeed.cache([1], on_error="ignore")
    with pytest.raises(ValueError, match="capacity"):
        ssdfeed.cache([1], cache_capacity=0)
    cached = ssdfeed.cache([1, 2], cache=tmp_path / "c", key="list")
    with pytest.raises(IndexError, match="out of range"):
        cached[2]
    assert cached[-1] == 2


def cli(*args, **kw):
    return subprocess.run(["ssdfeed", *map(str, args)], capture_output=True, text=True, **kw)


def test_cache_ls_verify_rm_see_the_entry(tmp_path, counter):
    root = tmp_path / "c"
    cached = ssdfeed.cache(data.MixedDataset(), cache=root)
    cached.warm(workers=1, progress=False)
    ls = cli("cache", "ls", "--cache", root, "--json")
    assert ls.returncode == 0, ls.stderr
    assert "python:cache_own_data.MixedDataset" in ls.stdout
    [entry] = json.loads(ls.stdout)
    assert entry["source"] == "python:cache_own_data.MixedDataset"
    assert entry["samples_present"] == entry["samples_total"] == data.N
    name = entry["entry"]
    cached.close()  # rm refuses an entry in use
    v = cli("cache", "verify", "--cache", root)
    assert v.returncode == 0, v.stderr
    r = cli("cache", "rm", "--cache", root, name)
    assert r.returncode == 0, r.stderr
    assert ssdfeed.cache(data.MixedDataset(), cache=root).present() == 0


def test_warm_with_two_processes_then_nothing_left(tmp_path, counter):
    root = tmp_path / "c"
    cached = ssdfeed.cache(data.MixedDataset(), cache=root)
    r = cached.warm(workers=2, progress=False)
    assert r["computed"] == data.N and r["present"] == data.N
    assert data.counts(counter) == {i: 1 for i in range(data.N)}
    assert cached.warm(workers=2, progress=False)["computed"] == 0
    list(torch.utils.data.DataLoader(cached, batch_size=None, num_workers=2))
    assert sum(data.counts(counter).values()) == data.N


def test_warm_ctrl_c_keeps_what_was_stored_and_resumes(tmp_path):
    root, first, second = tmp_path / "c", tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    script = ("import sys, ssdfeed, cache_own_data as d\n"
              "ssdfeed.cache(d.MixedDataset(), cache=sys.argv[1]).warm(workers=2)\n")
    job = subprocess.Popen([sys.executable, "-c", script, str(root)], cwd=HERE,
                           env=job_env(first, CACHE_OWN_BLOCK_AT=20), stderr=subprocess.PIPE,
                           text=True, start_new_session=True, preexec_fn=_terminal_sigint)
    wait_blocked(tmp_path, job)
    os.killpg(job.pid, signal.SIGINT)  # a Ctrl-C at the terminal reaches the whole group
    _, err = job.communicate(timeout=120)
    assert job.returncode != 0 and "interrupted" in err and "KeyboardInterrupt" in err
    cached = ssdfeed.cache(data.MixedDataset(), cache=root)
    stored = cached.present()
    assert stored >= 1
    env = job_env(second)
    r = subprocess.run([sys.executable, "-c", script, str(root)], cwd=HERE, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sum(data.counts(second).values()) == data.N - stored


def test_cli_warm_python_factory(tmp_path, counter):
    root = tmp_path / "c"
    r = cli("warm", "--python", "cache_own_data:make_mixed", "--cache", root, "--workers", 2,
            "--json", cwd=HERE, env=job_env(counter))
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["computed"] == data.N and report["present"] == data.N
    # The training script's one line finds what the CLI filled.
    cached = ssdfeed.cache(data.MixedDataset(), cache=root)
    assert cached.present() == data.N
    for i in range(data.N):
        cached[i]
    assert sum(data.counts(counter).values()) == data.N
    # --key, and a factory that wraps the dataset itself.
    r = cli("warm", "--python", "cache_own_data:make_mixed", "--key", "k1", "--cache", root,
            "--json", "--workers", 1, cwd=HERE, env=job_env(counter))
    assert r.returncode == 0 and json.loads(r.stdout)["uri"] == "python:k1"
    r = cli("warm", "--python", "cache_own_data:make_cached_mixed", "--cache", root, "--json",
            cwd=HERE, env=job_env(counter))
    assert r.returncode == 0 and json.loads(r.stdout)["uri"] == "python:mixed-from-factory"


def test_cli_warm_python_group_shared(tmp_path, counter):
    """--group-shared reaches the Python fill, as it reaches warm --source: a
    group's 2770 root is filled, and the entry is made for the group."""
    root = tmp_path / "c"
    root.mkdir()
    os.chmod(root, 0o2770)
    args = ("warm", "--python", "cache_own_data:make_mixed", "--cache", root, "--workers", 1,
            "--json")
    r = cli(*args, cwd=HERE, env=job_env(counter))
    assert r.returncode != 0 and "writable by its group" in r.stderr
    r = cli(*args, "--group-shared", cwd=HERE, env=job_env(counter))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["present"] == data.N
    entries = list((root / "entries").iterdir())
    assert len(entries) == 1 and entries[0].stat().st_mode & 0o7777 == 0o2770
    assert ssdfeed.cache(data.MixedDataset(), cache=root, group_shared=True).present() == data.N
    # A factory's own ssdfeed.cache(...) without group_shared: said, not ignored.
    r = cli("warm", "--python", "cache_own_data:make_cached_mixed", "--group-shared",
            cwd=HERE, env=job_env(counter))
    assert r.returncode == 2 and "group_shared=True" in r.stderr


def test_cli_warm_python_errors_are_clear(tmp_path):
    r = cli("warm", "--python", "cache_own_data", "--cache", tmp_path, cwd=HERE,
            env=job_env(tmp_path))
    assert r.returncode == 2 and "MODULE:FACTORY" in r.stderr
    r = cli("warm", "--python", "cache_own_data:nope", "--cache", tmp_path, cwd=HERE,
            env=job_env(tmp_path))
    assert r.returncode == 2 and "has no nope" in r.stderr
    r = cli("warm", "--python", "m:f", "--resize-short", 256, cwd=HERE)
    assert r.returncode == 2 and "do not apply" in r.stderr
    # An interpreter without the ssdfeed package says so.
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    env = dict(os.environ, SSDFEED_PYTHON=str(bare / "bin" / "python"))
    env.pop("PYTHONPATH", None)
    r = cli("warm", "--python", "m:f", cwd=tmp_path, env=env)
    assert r.returncode == 2 and "ssdfeed Python package is not importable" in r.stderr
    env["SSDFEED_PYTHON"] = str(tmp_path / "no-such-python")
    r = cli("warm", "--python", "m:f", cwd=tmp_path, env=env)
    assert r.returncode != 0 and "SSDFEED_PYTHON" in r.stderr


# A training script's own directory, with an ssdfeed/ package another user
# planted beside it: importing it leaves a file named PLANTED.
TRAIN_PY = """
import numpy as np

class Squares:
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return np.full(3, i * i)

def make():
    return Squares()
"""


def script_dir(tmp_path, mode):
    d = tmp_path / "job"
    (d / "ssdfeed").mkdir(parents=True)
    (d / "train.py").write_text(TRAIN_PY)
    (d / "ssdfeed" / "__init__.py").write_text(
        f"open({str(tmp_path / 'PLANTED')!r}, 'w').close()\n")
    d.chmod(mode)
    return d


def plain_env():
    """No PYTHONPATH entry names the script's directory."""
    env = dict(os.environ)
    env.pop("CACHE_OWN_COUNTER", None)
    return env


def test_cli_warm_python_never_imports_a_planted_ssdfeed(tmp_path):
    d = script_dir(tmp_path, 0o700)
    r = cli("warm", "--python", "train:make", "--cache", tmp_path / "c", "--workers", 1,
            "--json", cwd=d, env=plain_env())
    assert not (tmp_path / "PLANTED").exists(), "the planted ssdfeed/__init__.py ran"
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["present"] == 6 and report["uri"] == "python:train.Squares"


@pytest.mark.parametrize("mode, why", [(0o2770, "group-writable, mode 2770"),
                                       (0o1777, "world-writable, mode 1777 (the sticky bit")])
def test_cli_warm_python_refuses_a_directory_others_can_write(tmp_path, mode, why):
    d = script_dir(tmp_path, mode)
    r = cli("warm", "--python", "train:make", "--cache", tmp_path / "c", cwd=d, env=plain_env())
    assert not (tmp_path / "PLANTED").exists(), "the planted ssdfeed/__init__.py ran"
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"refusing to import train from {d}: it is {why}" in r.stderr
    assert "only you (or root) can write" in r.stderr
    assert not (tmp_path / "c").exists(), "filled an entry from a module it refused"


@pytest.mark.root
def test_cli_warm_python_refuses_a_directory_of_another_user(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    d = script_dir(tmp_path, 0o755)
    os.chown(d, 65534, 65534)
    r = cli("warm", "--python", "train:make", "--cache", tmp_path / "c", cwd=d, env=plain_env())
    assert not (tmp_path / "PLANTED").exists()
    assert r.returncode == 2 and "refusing to import train" in r.stderr
    assert "it belongs to" in r.stderr


def test_warm_under_skip_counts_bad_items_and_raise_names_them(tmp_path, counter, capfd):
    ds = data.FailingDataset(n=8, bad=(2, 5))
    r = ssdfeed.cache(ds, cache=tmp_path / "c", on_error="skip").warm(workers=2, progress=False)
    assert (r["present"], r["skipped"], r["computed"]) == (6, 2, 6)
    err = capfd.readouterr().err
    assert "skipped item 2" in err and "corrupt file for 5" in err
    # Each worker meets one bad item (2 and 5); whichever fails first is raised.
    with pytest.raises(ValueError, match="corrupt file for [25]"):
        ssdfeed.cache(ds, cache=tmp_path / "d").warm(workers=2, progress=False)


def test_warm_progress_bar_ends_with_the_count(tmp_path, counter, capfd):
    ssdfeed.cache(data.ArrayDataset(), cache=tmp_path / "c").warm(workers=1)
    err = capfd.readouterr().err
    assert f"{data.N}/{data.N}" in err.splitlines()[-1]


def test_warm_reports_a_worker_killed_mid_fill(tmp_path):
    """A warm-up worker killed by kill -9 (or the OOM killer) left its items
    undone, and warm reported success; now it fails naming the worker and
    the signal, once the other worker is done, and what was stored stays."""
    counter_dir = tmp_path / "counter"
    counter_dir.mkdir()
    root = tmp_path / "c"
    script = ("import sys, ssdfeed, cache_own_data as d\n"
              "print(ssdfeed.cache(d.MixedDataset(), cache=sys.argv[1])"
              ".warm(workers=2, progress=False))\n")
    # Worker 1 (items 1, 3, 5, ...) stores 1 and 3, then blocks on 5.
    job = subprocess.Popen([sys.executable, "-c", script, str(root)], cwd=HERE,
                           env=job_env(counter_dir, CACHE_OWN_BLOCK_AT=5),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_blocked(tmp_path, job)
    os.kill(int((tmp_path / "blocked").read_text()), signal.SIGKILL)
    out, err = job.communicate(timeout=120)
    assert job.returncode != 0, out
    assert "WarmWorkerError" in err and "worker 1" in err and "SIGKILL" in err, err
    stored = data.N // 2 + 2  # every even item, and 1 and 3
    assert f"{stored}/{data.N} items stored" in err, err
    assert ssdfeed.cache(data.MixedDataset(), cache=root).present() == stored


FULL_ROOT_WARM = """
import json, sys, ssdfeed, cache_own_data as d
cached = ssdfeed.cache(d.SizedDataset(int(sys.argv[2]), 8), key=sys.argv[3], cache=sys.argv[1],
                       cache_capacity=4 << 20)
r = cached.warm(workers=2, progress=False)
bad = [i for i in range(0, len(cached), 97) if not d.sized_item_ok(cached[i], i, 8)]
print(json.dumps({"warm": r, "bad": bad}))
"""


def test_warm_and_items_under_a_root_full_of_entries_in_use(tmp_path, monkeypatch):
    """Three warm-ups into one 4 MiB root: the first fills it and keeps its
    entry open (in use), so the other two, run at once, cannot make theirs
    (no room, nothing to evict). They failed with OSError; now they warn and
    compute from the dataset, and cached[i] returns the right item with one
    warning, until there is room again."""
    root = tmp_path / "c"
    full = ssdfeed.cache(data.SizedDataset(320, 16 << 10), key="full", cache=root,
                         cache_capacity=4 << 20)
    r = full.warm(workers=1, progress=False)  # one writer: it stores until the root is full
    assert 0 < r["present"] < 320, r
    assert full.present() == r["present"]  # and its entry in use from here on
    # 30,000 items: a new entry's small files alone need more than one of
    # the full entry's 16 KiB records, the most the root can have left.
    jobs = [subprocess.Popen([sys.executable, "-c", FULL_ROOT_WARM, str(root), "30000", key],
                             cwd=HERE, env=job_env(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for key in ("b", "c")]
    for job in jobs:
        out, err = job.communicate(timeout=300)
        assert job.returncode == 0, err
        res = json.loads(out.splitlines()[-1])
        assert res["bad"] == [], res
        assert res["warm"]["items"] == 30000 and res["warm"]["present"] == 0, res
        assert "without storing them" in err, err

    monkeypatch.setattr(ssdfeed.CachedDataset, "RETRY_OPEN_SECONDS", 0.0)  # every access tries again
    cached = ssdfeed.cache(data.SizedDataset(30000, 8), key="d", cache=root, cache_capacity=4 << 20)
    with pytest.warns(UserWarning, match="computed from the dataset"):
        assert data.sized_item_ok(cached[7], 7, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once
        assert data.sized_item_ok(cached[8], 8, 8)
        assert cached.stats() == {}
        full.close()  # no longer in use: the next try evicts it and makes the entry
        assert data.sized_item_ok(cached[9], 9, 8)
    assert cached.stats()["cache_dir"]
    assert cached.present() == 1
