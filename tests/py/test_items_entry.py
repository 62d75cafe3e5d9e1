"""ItemEntry (the per-item cache binding under ssdfeed.cache and
ssdfeed.tf.cache) and the C++ Loader fast path over Python items: computed
once, shared by processes, kept when a filler dies, exceptions raised as the
user's own with the item's index, fork-safe, and batches equal to the items."""

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ssdfeed
from ssdfeed import _items, _ssdfeed

ARRAY, BYTES = 5, 6


def item(i):
    """A mixed item: ints, floats, str, arrays of fixed and varying shape."""
    return {"x": np.arange(6, dtype=np.float32).reshape(2, 3) + i, "label": i,
            "score": i / 4, "name": f"item-{i}", "ragged": np.ones(i % 3 + 1, np.int16) * i}


def fields(i):
    return _items.encode(item(i))


def entry(root, compute=fields, n=20, **kw):
    return _ssdfeed.ItemEntry(str(root), "python:test-items", "id-1", n, compute, **kw)


def assert_item_equal(got, want):
    assert got.keys() == want.keys()
    for k in want:
        assert type(got[k]) is type(want[k]), k
        if isinstance(want[k], np.ndarray):
            assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k
        else:
            assert got[k] == want[k], k


class Counter:
    """compute that records each call, in this process and in a file (other processes')."""

    def __init__(self, log=None, fail=()):
        self.calls, self.log, self.fail, self.raised = [], log, set(fail), []

    def __call__(self, i):
        self.calls.append(i)
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{i}\n")
        if i in self.fail:
            e = ValueError(f"bad item {i}")
            self.raised.append(e)
            raise e
        return fields(i)


def logged(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(x) for x in f.read().split()]


CHILD = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {testdir!r})
    from test_items_entry import entry, fields, logged
    root, log, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    def compute(i):
        with open(log, "a") as f:
            f.write(f"{{i}}\\n")
        if mode == "hang" and i >= 5:
            open(log + ".hung", "w").close()
            time.sleep(600)  # killed here: items 0-4 are stored
        if mode == "slow":
            time.sleep(0.01)  # work, so both fillers overlap
        return fields(i)
    if mode == "loader":  # the C++ loader's workers fill it
        import ssdfeed
        from test_items_entry import Cached
        cached = Cached(root, key="test-items")
        cached._identity = "id-1"
        cached._compute_fields = lambda i: (time.sleep(0.01), compute(i))[1]
        labels = [int(x) for b in ssdfeed.Loader(cached, batch_size=4, workers=2,
                                                 shuffle=True, seed=os.getpid())
                  for x in b["label"]]
        assert sorted(labels) == list(range(20))
        sys.exit(0)
    e = entry(root, compute)
    order = range(20) if mode != "reverse" else range(19, -1, -1)
    for i in order:
        assert e.get(i) is not None
    e.close()
""")


def child(tmp_path, mode, log):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(testdir=os.path.dirname(__file__)))
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / "cache"), str(log), mode])


def test_get_computes_once_and_another_process_hits(tmp_path):
    c = Counter()
    e = entry(tmp_path / "cache", c)
    for _ in range(2):
        for i in range(20):
            assert_item_equal(_items.decode(e.get(i)), item(i))
    assert sorted(c.calls) == list(range(20)), "each item computed once"
    assert e.present() == 20 and e.size == 20
    s = e.stats()
    assert s["cache_misses"] == 20 and s["cache_hits"] == 20
    got = e.get(3)
    assert [f[0] for f in got] == ["__tree__", "0", "1", "2", "3", "4"]
    name, kind, dtype, shape, data = got[1]
    assert (kind, dtype, shape) == (ARRAY, "<f4", (2, 3)) and isinstance(data, bytes)
    e.close()
    with pytest.raises(ValueError, match="closed"):
        e.get(0)

    log = tmp_path / "log"
    p = child(tmp_path, "plain", log)
    assert p.wait(timeout=120) == 0
    assert logged(log) == [], "the second process computed nothing"
    other = entry(tmp_path / "cache", None)  # read-only: lookup and get, never compute
    assert other.fingerprint == e.fingerprint
    assert_item_equal(_items.decode(other.lookup(7)), item(7))


def test_lookup_put_and_a_missing_item_without_compute(tmp_path):
    e = entry(tmp_path / "cache", None)
    assert e.lookup(4) is None
    with pytest.raises(KeyError, match="item 4 is not cached"):
        e.get(4)
    assert e.put(4, fields(4)) is True
    assert e.put(4, fields(4)) is False, "present already"
    assert_item_equal(_items.decode(e.get(4)), item(4))
    with pytest.raises(IndexError):
        e.get(20)
    with pytest.raises(ValueError, match="want a list of"):
        e.put(5, [("a", 9, b"")])


def test_a_dataset_longer_than_the_format_holds_is_refused_at_open(tmp_path):
    """len(dataset) past the format's bound (2^32 samples, as `cache import`
    refuses) is refused when the entry opens, before any file is made."""

    class Huge:
        def __len__(self):
            return 2**32 + 1

        def __getitem__(self, i):
            return i

    cached = ssdfeed.cache(Huge(), key="huge", cache=tmp_path / "c")
    assert len(cached) == 2**32 + 1
    with pytest.raises(ValueError, match=r"python:huge: 4294967297 samples is more than a "
                                         r"cache entry holds \(at most 4294967296"):
        cached[0]
    with pytest.raises(ValueError, match="4294967297 samples"):
        entry(tmp_path / "c", n=2**32 + 1)
    assert not glob.glob(str(tmp_path / "c" / "entries" / "*"))


def test_close_during_a_get_lets_that_get_finish(tmp_path):
    """close() from compute (as from another thread while a get runs): the
    running get keeps the entry open until it returns; later calls raise."""
    holder = {}

    def compute(i):
        holder["e"].close()
        return fields(i)

    holder["e"] = e = entry(tmp_path / "cache", compute)
    assert_item_equal(_items.decode(e.get(2)), item(2))
    with pytest.raises(ValueError, match="closed"):
        e.get(2)
    assert entry(tmp_path / "cache", None).lookup(2) is not None, "stored before it closed"


def test_two_processes_fill_concurrently_computing_each_item_about_once(tmp_path):
    log = tmp_path / "log"
    a, b = child(tmp_path, "slow", log), child(tmp_path, "reverse", log)
    assert a.wait(timeout=300) == 0 and b.wait(timeout=300) == 0
    calls = logged(log)
    assert sorted(set(calls)) == list(range(20))
    # Claims shared through the entry: the two fills split the work (an item
    # is computed twice only when both reach it at once and a claim waits out).
    assert len(calls) <= 24, calls
    e = entry(tmp_path / "cache", None)
    assert e.present() == 20


def test_two_fast_path_loaders_fill_one_entry_together(tmp_path):
    log = tmp_path / "log"
    a, b = child(tmp_path, "loader", log), child(tmp_path, "loader", log)
    assert a.wait(timeout=300) == 0 and b.wait(timeout=300) == 0
    calls = logged(log)
    assert sorted(set(calls)) == list(range(20))
    assert len(calls) <= 24, calls
    assert entry(tmp_path / "cache", None).present() == 20, "the ItemEntry's own entry"


def test_a_killed_filler_keeps_what_it_stored(tmp_path):
    log = tmp_path / "log"
    p = child(tmp_path, "hang", log)
    hung = str(log) + ".hung"
    for _ in range(6000):
        if os.path.exists(hung) or p.poll() is not None:
            break
        try:
            p.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
    assert os.path.exists(hung), "the filler reached item 5"
    p.send_signal(signal.SIGKILL)
    p.wait()
    c = Counter()
    e = entry(tmp_path / "cache", c)
    assert e.present() == 5
    for i in range(20):
        assert_item_equal(_items.decode(e.get(i)), item(i))
    assert sorted(c.calls) == list(range(5, 20)), "only the rest is computed"


def test_an_exception_in_compute_is_raised_as_itself_with_the_index(tmp_path):
    c = Counter(fail={3})
    e = entry(tmp_path / "cache", c)
    with pytest.raises(ValueError, match=r"bad item 3 \(item 3\)") as info:
        e.get(3)
    assert info.value is c.raised[0], "the same exception object"

    class Odd(Exception):
        def __str__(self):
            raise RuntimeError("a __str__ that fails")

    def odd(i):
        raise Odd(i)

    e2 = _ssdfeed.ItemEntry(str(tmp_path / "cache"), "python:odd", "x", 4, odd)
    with pytest.raises(Odd) as info:
        e2.get(2)
    if sys.version_info >= (3, 11):
        assert any("item 2" in n for n in info.value.__notes__)
    # The same from the loader's worker threads, where nothing may escape.
    odd_cached = Cached(tmp_path / "cache-odd")
    odd_cached._compute_fields = lambda i: odd(i) if i == 5 else fields(i)
    with pytest.raises(Odd):
        collect(ssdfeed.Loader(odd_cached, batch_size=4, workers=2))
    odd_cached._compute_fields = lambda i: [("a", 5, "not bytes")] if i == 5 else fields(i)
    with pytest.raises(ValueError, match="python:fast item 5: .*payload not bytes"):
        collect(ssdfeed.Loader(odd_cached, batch_size=4, workers=2))

    skip = entry(tmp_path / "cache", Counter(fail={3}), on_error="skip")
    assert skip.get(3) is None
    s = skip.stats()
    assert s["skipped"] == 1 and "item 3" in s["skipped_items"][0]
    assert "bad item 3" in s["skipped_items"][0]
    assert_item_equal(_items.decode(skip.get(4)), item(4))


def test_a_forked_child_uses_its_own_entry_and_releases_nothing_of_the_parents(tmp_path):
    c = Counter(log=tmp_path / "log")
    e = entry(tmp_path / "cache", c)
    e.get(0)
    pid = os.fork()
    if pid == 0:  # the child: reopens for its own use, drops the parent's object
        ok = False
        try:
            ok = _items.decode(e.get(1))["label"] == 1 and e.lookup(0) is not None
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    pid = os.fork()
    if pid == 0:  # destroyed in a process that never used it: nothing released
        try:
            del e
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    # The parent's entry still stores, and a fresh reader sees everything.
    for i in range(2, 6):
        e.get(i)
    e.close()
    assert entry(tmp_path / "cache", None).present() == 6
    assert sorted(logged(tmp_path / "log")) == list(range(6))


class Cached:
    """The duck-typed protocol ssdfeed.cache()'s CachedDataset gives the fast path."""

    def __init__(self, root, n=20, fail=(), key="fast"):
        self._uri, self._identity, self._n = f"python:{key}", "id-fast", n
        self._cache_root, self._capacity = str(root), 0
        self.computed, self.fail, self._entry = [], set(fail), None

    def __len__(self):
        return self._n

    def _compute_fields(self, i):
        self.computed.append(i)
        if i in self.fail:
            raise KeyError(f"no item {i}")
        return _items.encode(item(i))

    def _open_entry(self):
        if self._entry is None:
            self._entry = _ssdfeed.ItemEntry(self._cache_root, self._uri, self._identity,
                                             self._n, self._compute_fields)
        return self._entry


def collect(loader):
    out = []
    for batch in loader:
        n = len(batch["label"])
        for j in range(n):
            out.append({"x": batch["x"][j], "label": int(batch["label"][j]),
                        "score": float(batch["score"][j]), "name": batch["name"][j],
                        "ragged": batch["ragged"][j]})
    return out


def test_fast_path_batches_equal_the_items(tmp_path):
    cached = Cached(tmp_path / "cache")
    loader = ssdfeed.Loader(cached, batch_size=8, workers=2)
    batch = next(iter(loader))
    assert batch["x"].shape == (8, 2, 3) and batch["x"].dtype == np.float32
    assert batch["label"].dtype == np.int64 and batch["score"].dtype == np.float64
    assert isinstance(batch["name"], list) and batch["name"][0] == "item-0"
    assert isinstance(batch["ragged"], list), "unequal shapes are listed"
    got = collect(loader)
    assert [g["label"] for g in got] == list(range(20))
    for g in got:
        want = item(g["label"])
        assert np.array_equal(g["x"], want["x"]) and g["score"] == want["score"]
        assert g["name"] == want["name"] and np.array_equal(g["ragged"], want["ragged"])
    first = sorted(set(cached.computed))
    assert first == list(range(20))
    n = len(cached.computed)
    again = ssdfeed.Loader(cached, batch_size=8, shuffle=True, seed=3)
    assert sorted(g["label"] for g in collect(again)) == list(range(20))
    assert len(cached.computed) == n, "a warm epoch computes nothing"
    assert again.stats()["cache_hits"] == 20
    with pytest.raises(ValueError, match="does not take augment"):
        ssdfeed.Loader(cached, augment=ssdfeed.RandomResizedCrop(8))


def test_fast_path_shuffle_sharding_and_state_dict(tmp_path):
    cached = Cached(tmp_path / "cache")
    a = [g["label"] for g in collect(ssdfeed.Loader(cached, batch_size=4, shuffle=True,
                                                    seed=5))]
    assert a != list(range(20)) and sorted(a) == list(range(20))
    ranks = [[g["label"] for g in collect(ssdfeed.Loader(cached, batch_size=2, shuffle=True,
                                                         seed=5, rank=r, world_size=2))]
             for r in (0, 1)]
    assert not set(ranks[0]) & set(ranks[1]) and len(ranks[0] + ranks[1]) == 20
    loader = ssdfeed.Loader(cached, batch_size=4, shuffle=True, seed=5, drop_last=True)
    it = iter(loader)
    head = [int(x) for _ in range(2) for x in next(it)["label"]]
    state = loader.state_dict()
    resumed = ssdfeed.Loader(cached, batch_size=4, shuffle=True, seed=5, drop_last=True)
    resumed.load_state_dict(state)
    tail = [g["label"] for g in collect(resumed)]
    assert head + tail == a


def test_fast_path_errors_skip_and_torch(tmp_path, capfd):
    cached = Cached(tmp_path / "cache", fail={6})
    with pytest.raises(KeyError, match="no item 6") as info:
        collect(ssdfeed.Loader(cached, batch_size=4))
    assert "item 6" in str(info.value) + "".join(getattr(info.value, "__notes__", []))
    skipped = ssdfeed.Loader(cached, batch_size=4, on_error="skip")
    labels = [g["label"] for g in collect(skipped)]
    assert 6 not in labels and len(labels) == 20
    assert skipped.stats()["skipped"] >= 1
    assert "python:fast item 6: skipped (on_error=skip): KeyError" in capfd.readouterr().err
    first_bad = Cached(tmp_path / "cache3", fail={0})
    labels = [g["label"] for g in collect(ssdfeed.Loader(first_bad, batch_size=4,
                                                         on_error="skip"))]
    assert 0 not in labels and len(labels) == 20, "item 1 gives the structure"

    torch = pytest.importorskip("torch")
    import ssdfeed.torch as st

    loader = st.Loader(Cached(tmp_path / "cache2"), batch_size=5, seed=0, num_workers=2)
    batch = next(iter(loader))
    assert isinstance(batch["x"], torch.Tensor) and batch["x"].shape == (5, 2, 3)
    assert batch["label"].dtype == torch.int64 and batch["score"].dtype == torch.float64
    assert batch["name"] == [f"item-{int(i)}" for i in batch["label"]]


def test_cli_verify_repair_ls_export_import_rm_an_items_entry(tmp_path):
    root = tmp_path / "cache"
    e = entry(root)
    for i in range(20):
        e.get(i)
    name = e.fingerprint
    e.close()

    def run(*args):
        return subprocess.run(["ssdfeed", *args, "--cache", str(root)], capture_output=True,
                              text=True)

    ls = json.loads(run("cache", "ls", "--json").stdout)
    assert [(x["entry"], x["source"], x["spec"], x["spec_summary"], x["state"]) for x in ls] \
        == [(name, "python:test-items", "items1", "python items", "complete")]
    r = run("cache", "verify")
    assert r.returncode == 0, r.stderr
    assert "20 good" in r.stdout and "a Python dataset" in r.stdout

    dat = sorted(glob.glob(str(root / "entries" / name / "seg-*.dat")))[0]
    with open(dat, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    r = run("cache", "verify")
    assert r.returncode == 1 and "1 corrupt" in r.stdout
    r = run("cache", "verify", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dropped 1" in r.stdout
    c = Counter()
    again = entry(root, c)
    for i in range(20):
        assert_item_equal(_items.decode(again.get(i)), item(i))
    assert len(c.calls) == 1, "the dropped item is computed again"
    again.close()

    tar = str(tmp_path / "e.tar")
    r = run("cache", "export", name, "--to", tar)
    assert r.returncode == 0, r.stderr
    other = tmp_path / "other"
    r = subprocess.run(["ssdfeed", "cache", "import", tar, "--cache", str(other),
                        "--trust-items"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    imported = entry(other, None)
    assert imported.present() == 20
    assert_item_equal(_items.decode(imported.get(11)), item(11))
    imported.close()
    r = run("cache", "compact")
    assert r.returncode == 0, r.stderr
    r = run("cache", "rm", name)
    assert r.returncode == 0, r.stderr
    assert json.loads(run("cache", "ls", "--json").stdout) == []
    r = subprocess.run(["ssdfeed", "cache", "gc", "--max-bytes", "1", "--cache", str(other)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "1 entry removed" in r.stdout, r.stdout + r.stderr


def test_exiting_mid_epoch_with_workers_computing_is_clean(tmp_path):
    """Workers still computing (under the GIL) when the script ends: stopped
    at exit, before the interpreter finalizes (a worker taking the GIL then
    would end the process with an abort)."""
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import ssdfeed
        from test_items_entry import Cached
        loader = ssdfeed.Loader(Cached({str(tmp_path / "cache")!r}, n=500), batch_size=4,
                                workers=4, prefetch=8)
        batch = next(iter(loader))
        print(batch["label"].tolist())
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0, 1, 2, 3]"
    assert "leaked" not in r.stderr


class TorchItems:
    """A user's map-style dataset of fixed-structure items."""

    def __len__(self):
        return 18

    def __getitem__(self, i):
        import torch

        return (torch.arange(12, dtype=torch.float32).reshape(3, 4) * i, i, i / 7,
                f"name {i}", {"a": np.full(2, i, np.int32), "flag": bool(i % 2)})


def test_torch_fast_path_batches_equal_dataloaders_default_collate(tmp_path):
    torch = pytest.importorskip("torch")
    if not hasattr(ssdfeed, "cache"):
        pytest.skip("ssdfeed.cache() is not in this build")
    import ssdfeed.torch as st

    cached = ssdfeed.cache(TorchItems(), key="torch-items", cache=str(tmp_path / "c"))
    ours = list(st.Loader(cached, batch_size=4, shuffle=False, num_workers=2))
    theirs = list(torch.utils.data.DataLoader(TorchItems(), batch_size=4))
    assert len(ours) == len(theirs) == 5

    def same(a, b):
        # DataLoader gives a batch of str as a tuple or a list depending on
        # where it sits; ours are lists.
        seq = (list, tuple)
        assert type(a) is type(b) or isinstance(a, seq) and isinstance(b, seq), (a, b)
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and torch.equal(a, b)
        elif isinstance(a, (list, tuple)):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                same(x, y)
        elif isinstance(a, dict):
            assert a.keys() == b.keys()
            for k in a:
                same(a[k], b[k])
        else:
            assert a == b

    for a, b in zip(ours, theirs):
        assert isinstance(a, tuple), "the item's own container type"
        same(a, b)


def test_manifest_strings_reach_the_terminal_escaped(tmp_path):
    """An export stream comes from elsewhere: an escape sequence in its
    manifest (here the source URI: set the window title, clear the screen,
    an 8-bit CSI) is printed escaped by cache import and cache ls, never
    raw, and the entry still imports."""
    uri = "python:\x1b]0;owned\x07\x1b[2J\x9b31m\u00e9t\u00e9"
    shown = b"python:\\x1b]0;owned\\x07\\x1b[2J\\xc2\\x9b31m" + "\u00e9t\u00e9".encode()
    e = _ssdfeed.ItemEntry(str(tmp_path / "a"), uri, "id-1", 4, fields)
    for i in range(4):
        e.get(i)
    name = e.fingerprint
    e.close()
    tar = str(tmp_path / "e.tar")
    r = subprocess.run(["ssdfeed", "cache", "export", name, "--to", tar, "--cache",
                        str(tmp_path / "a")], capture_output=True)
    assert r.returncode == 0, r.stderr

    def check(*args, rc=0):
        r = subprocess.run(["ssdfeed", "cache", *args, "--cache", str(tmp_path / "b")],
                           capture_output=True)
        assert r.returncode == rc, r.stderr
        for raw in (b"\x1b", b"\x07", b"\xc2\x9b"):
            assert raw not in r.stdout + r.stderr, (args, r.stdout, r.stderr)
        if rc == 0:
            assert shown in r.stdout, r.stdout  # escaped, and the accented letters kept

    check("import", tar, rc=1)  # an item entry's stream is refused unless trusted
    check("import", tar, "--trust-items")
    check("ls")
    r = subprocess.run(["ssdfeed", "cache", "ls", "--json", "--cache", str(tmp_path / "b")],
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    for raw in (b"\x1b", b"\x07", b"\xc2\x9b"):
        assert raw not in r.stdout, r.stdout
    [listed] = json.loads(r.stdout)
    assert listed["source"] == uri, "JSON escapes: the URI reads back as it was"


def test_a_full_cache_root_is_its_own_exception_class(tmp_path):
    """A root too small for any entry raises ssdfeed.CacheFullError, an
    OSError that callers catch by class (as CacheUnavailableError, which
    ssdfeed.cache and tf.cache fall back on), never by its message."""
    with pytest.raises(ssdfeed.CacheFullError) as e:
        _ssdfeed.ItemEntry(str(tmp_path), "python:full", "full", 4, None, capacity_bytes=1)
    assert isinstance(e.value, ssdfeed.CacheUnavailableError)
    assert isinstance(e.value, OSError)
    assert str(tmp_path) in str(e.value)
