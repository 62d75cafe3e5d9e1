"""The Loader as training scripts use it (serving: order, epochs, resume, errors)."""

import io
import mmap
import os
import pickle
import subprocess
import sys
import tarfile
import textwrap
import threading
import time

import numpy as np
import pytest
from PIL import Image

import ssdfeed


@pytest.fixture(scope="module")
def id_dataset(tmp_path_factory):
    """A tar dataset whose label is the sample id, with varied image sizes."""
    d = tmp_path_factory.mktemp("ids")
    rng = np.random.default_rng(0)
    n = 53
    with tarfile.open(d / "shard-000.tar", "w") as tf:
        for i in range(n):
            h, w = rng.integers(40, 90, 2)
            arr = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
            buf = io.BytesIO()
            Image.fromarray(arr).save(buf, format="JPEG", quality=90)
            for ext, data in (("jpg", buf.getvalue()), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return f"tar:{d}/shard-000.tar", n


def make_loader(uri, **kw):
    args = dict(prepare=ssdfeed.Prepare(resize_short=40),
                augment=ssdfeed.RandomResizedCrop(24), batch_size=8, shuffle=True, seed=1,
                workers=2)
    args.update(kw)
    return ssdfeed.Loader(uri, **args)


def test_every_sample_once_per_rank_set(id_dataset):
    uri, n = id_dataset
    for drop_last in (False, True):
        seen = []
        lens = set()
        for rank in range(3):
            loader = make_loader(uri, rank=rank, world_size=3, drop_last=drop_last,
                                 sampler_drop_last=drop_last)
            loader.set_epoch(5)
            ids = [int(i) for _, labels in loader for i in labels]
            lens.add(len(ids))
            seen += ids
        assert len(lens) == 1, "ranks must get equal lengths"
        if drop_last:
            assert len(seen) == len(set(seen)) == (n // 3 // 8) * 8 * 3
        else:
            assert set(seen) == set(range(n)) and len(seen) == 3 * -(-n // 3)


def test_labels_match_the_source_in_canonical_order(small_datasets):
    uri = small_datasets["tfrecord"]["uri"]
    src = ssdfeed.Source(uri)
    loader = ssdfeed.Loader(uri, prepare=ssdfeed.Prepare(resize=(32, 32)), batch_size=10)
    labels = np.concatenate([y for _, y in loader])
    assert labels.tolist() == [src.read(i)[1] for i in range(len(src))]
    assert len(loader) == 5


def test_first_epoch_fills_cache_second_only_from_it(id_dataset, tmp_path):
    uri, n = id_dataset
    loader = make_loader(uri, cache=str(tmp_path / "c"))
    loader.set_epoch(0)
    first = [(x.copy(), y.copy()) for x, y in loader]
    s0 = loader.stats()
    assert s0["cache_misses"] == n and s0["origin_bytes"] > 0
    loader.set_epoch(1)
    second = [(x.copy(), y.copy()) for x, y in loader]
    s1 = loader.stats()
    assert s1["origin_bytes"] == s0["origin_bytes"], "epoch 2 read the origin"
    assert s1["cache_hits"] == n
    assert s1["wait_seconds"] >= 0 and s1["decode_errors"] == 0
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(first, second))
    out = subprocess.run(["ssdfeed", "cache", "ls", "--json", "--cache", str(tmp_path / "c")],
                         capture_output=True, text=True, check=True)
    assert '"state": "complete"' in out.stdout


def test_batches_are_zero_copy_views_and_safe_to_keep(id_dataset):
    uri, _ = id_dataset
    loader = make_loader(uri, prefetch=1)
    it = iter(loader)
    x0, y0 = next(it)
    assert not x0.flags.owndata and x0.base is not None
    kept = x0.copy()
    rest = [x for x, _ in it]
    assert len(rest) >= 5
    np.testing.assert_array_equal(x0, kept)  # not overwritten by later batches


def test_same_output_for_any_worker_count(id_dataset):
    uri, _ = id_dataset
    outs = []
    for workers in (1, 4):
        loader = make_loader(uri, workers=workers)
        loader.set_epoch(3)
        outs.append([x.copy() for x, _ in loader])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def large_dataset(tmp_path_factory):
    """Sixteen 1024x1024 noise JPEGs: a batch of them takes one worker about
    0.14 s to decode here, so a consumer really waits."""
    d = tmp_path_factory.mktemp("large")
    rng = np.random.default_rng(1)
    with tarfile.open(d / "shard-000.tar", "w") as tf:
        for i in range(16):
            buf = io.BytesIO()
            arr = rng.integers(0, 255, (1024, 1024, 3), dtype=np.uint8)
            Image.fromarray(arr).save(buf, format="JPEG", quality=90)
            for ext, data in (("jpg", buf.getvalue()), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return f"tar:{d}/shard-000.tar"


@pytest.mark.serial
def test_gil_released_while_waiting(large_dataset):
    # No cache: the consumer must really wait (on decoding) for the batch; a
    # batch already cached by another test arrives before the thread ticks.
    # Large images: with the 53 small ones of id_dataset the wait was 4 ms on
    # a fast build, too short to tell a released GIL from a held one.
    loader = make_loader(large_dataset, workers=1, batch_size=16,
                         prepare=ssdfeed.Prepare(resize_short=512), cache=False)
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    t0 = time.perf_counter()
    next(iter(loader))
    waited = time.perf_counter() - t0
    stop.set()
    t.join()
    # A held GIL allows at most one tick during the wait; a busy machine may
    # stretch 1 ms sleeps a lot, so ask for one tick per 50 ms, not per 1 ms.
    n = len([x for x in ticks if x > t0])
    assert waited > 0.02, f"the batch came in {waited:.3f} s: too fast to tell"
    assert n >= max(2, int(waited / 0.05)), f"thread starved: {n} ticks in {waited:.3f} s"


RESUME_SCRIPT = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import ssdfeed
    uri, state_file, out_file = sys.argv[1:4]
    loader = ssdfeed.Loader(uri, prepare=ssdfeed.Prepare(resize_short=40),
                            augment=ssdfeed.RandomResizedCrop(24), batch_size=8,
                            shuffle=True, seed=1, workers=2)
    with open(state_file, "rb") as f:
        loader.load_state_dict(pickle.load(f))
    with open(out_file, "wb") as f:
        pickle.dump([(x.copy(), y.copy()) for x, y in loader], f)
""")


def test_exact_resume_in_a_new_process(id_dataset, tmp_path):
    uri, _ = id_dataset
    loader = make_loader(uri)
    loader.set_epoch(2)
    full = [(x.copy(), y.copy()) for x, y in loader]
    loader.set_epoch(2)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    assert state["epoch"] == 2 and state["batches_consumed"] == 3
    (tmp_path / "state.pkl").write_bytes(pickle.dumps(state))
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    subprocess.run([sys.executable, str(script), uri, str(tmp_path / "state.pkl"),
                    str(tmp_path / "out.pkl")], check=True)
    rest = pickle.loads((tmp_path / "out.pkl").read_bytes())
    assert len(rest) == len(full) - 3
    for (a, la), (b, lb) in zip(rest, full[3:]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)


TWO_PROC_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import ssdfeed
    uri, cache = sys.argv[1:3]
    loader = ssdfeed.Loader(uri, cache=cache, prepare=ssdfeed.Prepare(resize=(32, 32)),
                            batch_size=4, shuffle=True, seed=int(sys.argv[3]), workers=2)
    out = {}
    for x, y in loader:
        for img, label in zip(x, y):
            out[int(label)] = hashlib.sha1(img.tobytes()).hexdigest()
    print(json.dumps(out))
""")


def test_two_loaders_in_two_processes_share_one_cache(id_dataset, tmp_path):
    uri, n = id_dataset
    ref = ssdfeed.Loader(uri, prepare=ssdfeed.Prepare(resize=(32, 32)), batch_size=n)
    import hashlib
    x, y = next(iter(ref))
    want = {str(int(l)): hashlib.sha1(img.tobytes()).hexdigest() for img, l in zip(x, y)}
    script = tmp_path / "two.py"
    script.write_text(TWO_PROC_SCRIPT)
    procs = [subprocess.Popen([sys.executable, str(script), uri, str(tmp_path / "cache"), str(s)],
                              stdout=subprocess.PIPE, text=True) for s in (1, 2)]
    import json
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        assert json.loads(out) == want


def test_unequal_shapes_error_says_what_to_do(id_dataset):
    uri, _ = id_dataset
    loader = ssdfeed.Loader(uri, prepare=ssdfeed.Prepare(resize_short=40), batch_size=4)
    with pytest.raises(ValueError, match="resize.*center_crop.*augment"):
        next(iter(loader))


def test_corrupt_sample_raises_with_its_name_or_is_skipped(tmp_path):
    rep = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=40, classes=2,
                               corrupt=0.2, min_side=40, max_side=60)
    loader = ssdfeed.Loader(rep["uri"], prepare=ssdfeed.Prepare(resize=(16, 16)), batch_size=4)
    with pytest.raises(ssdfeed.CorruptionError, match=r"img_\d+\.jpg"):
        for _ in loader:
            pass
    skip = ssdfeed.Loader(rep["uri"], prepare=ssdfeed.Prepare(resize=(16, 16)), batch_size=4,
                          on_error="skip")
    n = sum(len(y) for _, y in skip)
    assert n == 40 and skip.stats()["skipped"] == rep["corrupt"]  # each replaced


def test_float_nchw_normalized(id_dataset):
    uri, _ = id_dataset
    a = make_loader(uri)
    b = make_loader(uri, dtype="float32", layout="NCHW", mean=(0.485, 0.456, 0.406),
                    std=(0.229, 0.224, 0.225))
    xa, _ = next(iter(a))
    xb, _ = next(iter(b))
    assert xb.shape == (8, 3, 24, 24) and xb.dtype == np.float32
    want = (xa.transpose(0, 3, 1, 2) / 255.0 - np.array([0.485, 0.456, 0.406])[:, None, None]) / \
        np.array([0.229, 0.224, 0.225])[:, None, None]
    np.testing.assert_allclose(xb, want, atol=1e-5)
    c = make_loader(uri, dtype="float16")
    xc, _ = next(iter(c))
    assert xc.dtype == np.float16
    np.testing.assert_allclose(xc.astype(np.float32), xa / 255.0, atol=2e-3)


def test_stubs_are_shipped():
    stub = os.path.join(os.path.dirname(ssdfeed.__file__), "_ssdfeed.pyi")
    text = open(stub).read()
    assert "class NativeLoader" in text and "def make_dataset" in text


def test_warm_read_direct_serves_what_buffered_serves(id_dataset, tmp_path):
    """O_DIRECT + io_uring reads of cached records (warm_read="direct") give
    the same batches as page-cache reads, from one filled cache."""
    uri, _ = id_dataset
    cache = str(tmp_path / "cache")
    fill = make_loader(uri, cache=cache)
    fill.set_epoch(0)
    list(fill)
    epochs = {}
    for mode in ("buffered", "direct"):
        loader = make_loader(uri, cache=cache, warm_read=mode)
        loader.set_epoch(1)
        epochs[mode] = [(x.copy(), y.copy()) for x, y in loader]
        assert loader.stats()["cache_hits"] == 53, loader.stats()
    assert len(epochs["direct"]) == len(epochs["buffered"]) == 7
    for (x, y), (dx, dy) in zip(epochs["buffered"], epochs["direct"]):
        np.testing.assert_array_equal(x, dx)
        np.testing.assert_array_equal(y, dy)


def direct_write_refusal(path):
    """Why path's filesystem refuses O_DIRECT writes (tmpfs; overlayfs on
    older kernels, as in a container), or None."""
    probe = os.path.join(path, ".direct-probe")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
    except OSError as e:
        return f"{path} refuses O_DIRECT: {e.strerror}"
    try:
        os.write(fd, mmap.mmap(-1, 4096))  # page-aligned, as O_DIRECT needs
    except OSError as e:
        return f"{path} refuses O_DIRECT writes: {e.strerror}"
    finally:
        os.close(fd)
        os.unlink(probe)
    return None


def test_fill_write_direct_caches_what_buffered_caches(id_dataset, tmp_path):
    """A cold epoch whose records go to the SSD with O_DIRECT from the writer
    thread (fill_write="direct") serves the same batches as one written
    through the page cache, and so does the warm epoch read back from each
    cache (direct reads too: nothing of it is in the page cache)."""
    why = direct_write_refusal(str(tmp_path))
    if why is not None:
        pytest.skip(why)
    uri, _ = id_dataset
    epochs = {}
    for mode in ("buffered", "direct"):
        cache = str(tmp_path / mode)
        loader = make_loader(uri, cache=cache, fill_write=mode)
        loader.set_epoch(0)
        cold = [(x.copy(), y.copy()) for x, y in loader]
        assert loader.stats()["cache_misses"] == 53, loader.stats()
        loader.close()  # what is staged is written and indexed
        warm = make_loader(uri, cache=cache, fill_write=mode, warm_read=mode)
        warm.set_epoch(1)
        epochs[mode] = cold + [(x.copy(), y.copy()) for x, y in warm]
        assert warm.stats()["cache_hits"] == 53, warm.stats()
        direct = mode == "direct"
        assert (loader.stats()["cache_direct_writes"] == 53) == direct, loader.stats()
        assert (warm.stats()["cache_direct_reads"] == 53) == direct, warm.stats()
    assert len(epochs["direct"]) == len(epochs["buffered"]) == 14
    for (x, y), (dx, dy) in zip(epochs["buffered"], epochs["direct"]):
        np.testing.assert_array_equal(x, dx)
        np.testing.assert_array_equal(y, dy)
