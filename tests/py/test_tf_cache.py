"""ssdfeed.tf.cache: a tf.data pipeline's elements in ssdfeed cache entries."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import ssdfeed.tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tf_cache_worker as w  # noqa: E402

N = 20


@pytest.fixture
def records(tmp_path):
    path = str(tmp_path / "data.tfrecord")
    w.write_records(path, N)
    return path


def counts(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def expected():
    return [w.normalise(w.element(tf.constant(i, tf.int64))) for i in range(N)]


def served(ds):
    return [w.normalise(el) for el in ds]


def present(root, key, ds):
    """Elements the cache holds for (key, ds), read without computing."""
    from ssdfeed import _tf_cache
    store = _tf_cache.Store(root, key, ds.element_spec, None, _tf_cache._PART)
    return sum(store.entry(0).lookup(i) is not None for i in range(N))


def test_same_elements_same_order_and_parse_runs_once(tmp_path, records):
    cnt = str(tmp_path / "counts")
    ds = w.tfrecord_pipeline(records, cnt)
    cached = ssdfeed.tf.cache(ds, key="parse-v1", cache=str(tmp_path / "c"))
    assert cached.element_spec == ds.element_spec
    assert served(cached) == expected()
    assert sorted(counts(cnt)) == list(range(N))
    assert served(cached) == expected()
    assert served(cached) == expected()
    assert sorted(counts(cnt)) == list(range(N)), "a warm pass ran parse"
    # The count is known once the upstream ended, so Keras sees the steps.
    again = ssdfeed.tf.cache(ds, key="parse-v1", cache=str(tmp_path / "c"))
    assert int(again.cardinality()) == N
    assert served(again) == expected()
    assert len(counts(cnt)) == N


def test_dense_string_ragged_sparse_and_namedtuple_types_come_back(tmp_path, records):
    ds = w.tfrecord_pipeline(records, str(tmp_path / "counts")).map(
        lambda e: (e, tf.sparse.from_dense(tf.cast(e["image"][0], tf.float64))))
    cached = ssdfeed.tf.cache(ds, key="types", cache=str(tmp_path / "c"))
    for _ in range(2):
        for a, b in zip(ds, cached, strict=True):
            assert isinstance(b[0]["pair"], w.Pair)
            assert isinstance(b[0]["tags"], tf.RaggedTensor)
            assert isinstance(b[1], tf.SparseTensor)
            for x, y in zip(tf.nest.flatten(a, expand_composites=True),
                            tf.nest.flatten(b, expand_composites=True), strict=True):
                assert x.dtype == y.dtype and x.shape == y.shape
                a, b = np.asarray(x.numpy()), np.asarray(y.numpy())
                if x.dtype == tf.string:
                    assert a.tolist() == b.tolist()
                else:
                    assert a.tobytes() == b.tobytes()  # bit for bit


def test_unsupported_dtype_is_named(tmp_path):
    ds = tf.data.Dataset.range(3).map(lambda i: {"v": tf.cast(i, tf.bfloat16)})
    with pytest.raises(TypeError, match="bfloat16"):
        ssdfeed.tf.cache(ds, key="bf16", cache=str(tmp_path / "c"))


def test_key_is_required_and_cache_false_is_the_pipeline_itself(tmp_path):
    ds = tf.data.Dataset.range(3)
    with pytest.raises(ValueError, match="key"):
        ssdfeed.tf.cache(ds, key="", cache=str(tmp_path))
    assert ssdfeed.tf.cache(ds, key="k", cache=False) is ds


def test_what_a_resumed_fill_recomputes(tmp_path, records):
    """A pass left after 8 elements keeps them. The next pass reads them back,
    then needs the upstream from element 8 on. A TFRecord pipeline has no
    index: tf's skip(8) runs parse for the 8 skipped elements too, so the
    resumed pass computes all 20. A from_tensor_slices(list).map(load)
    pipeline is read by index (tf.data.experimental.at): only 12 computed."""
    for kind, make in (("tfrecord", lambda c: w.tfrecord_pipeline(records, c)),
                       ("slices", lambda c: w.files_pipeline(N, c))):
        cnt = str(tmp_path / f"counts-{kind}")
        root = str(tmp_path / f"c-{kind}")
        ds = make(cnt)
        cached = ssdfeed.tf.cache(ds, key=kind, cache=root)
        assert served(cached.take(8)) == expected()[:8]
        kept = present(root, kind, ds)
        assert kept == 8
        os.unlink(cnt)
        assert served(cached) == expected()
        computed = sorted(counts(cnt))
        if kind == "tfrecord":
            assert computed == list(range(N)), "skip() runs parse for skipped elements"
        else:
            assert computed == list(range(kept, N)), "read by index: only the rest"
        os.unlink(cnt)
        assert served(cached) == expected()
        assert counts(cnt) == []


@pytest.mark.filterwarnings("ignore:ssdfeed.tf.cache.*is full")
def test_a_too_small_capacity_serves_the_rest_from_the_upstream(tmp_path, records):
    cnt = str(tmp_path / "counts")
    ds = w.tfrecord_pipeline(records, cnt).map(
        lambda e: {**e, "pad": tf.random.stateless_normal(  # 400 KB an element
            [100000], seed=tf.stack([e["pair"].index, tf.constant(0, tf.int64)]))})
    root = str(tmp_path / "c")
    cap = 4 << 20
    cached = ssdfeed.tf.cache(ds, key="small", cache=root, cache_capacity=cap)
    want = [w.normalise(e) for e in ds]
    for _ in range(3):
        assert served(cached) == want
    kept = present(root, "small", ds)
    assert 0 < kept < N
    du = subprocess.run(["du", "-sb", root], capture_output=True, text=True, check=True)
    assert int(du.stdout.split()[0]) <= cap + 256 * 1024  # + index and metadata files


def test_shuffle_reads_a_fresh_global_permutation_each_pass(tmp_path, records):
    cnt = str(tmp_path / "counts")
    ds = w.tfrecord_pipeline(records, cnt)
    root = str(tmp_path / "c")
    a = ssdfeed.tf.cache(ds, key="shuf", cache=root, shuffle=True, seed=7)
    assert served(a) == expected(), "the pass that fills serves the upstream order"
    p1, p2 = served(a), served(a)
    key = sorted(expected(), key=json.dumps)
    assert sorted(p1, key=json.dumps) == key and sorted(p2, key=json.dumps) == key
    assert p1 != p2 and p1 != expected()
    b = ssdfeed.tf.cache(ds, key="shuf", cache=root, shuffle=True, seed=7)
    b0, b1 = served(b), served(b)
    assert b1 == p1, "pass e of a seed is the same permutation in every job"
    c = ssdfeed.tf.cache(ds, key="shuf", cache=root, shuffle=True, seed=8)
    assert served(c) != b0
    assert len(counts(cnt)) == N


def test_shuffle_reads_each_pass_in_the_loaders_epoch_order(tmp_path, records):
    """Pass e of tf.cache(shuffle=True, seed=s) is the order the C++ EpochOrder
    (what ssdfeed.Loader reads) gives for (s, e): one shuffle for every API."""
    from ssdfeed import _ssdfeed
    ds = w.tfrecord_pipeline(records, str(tmp_path / "counts"))
    c = ssdfeed.tf.cache(ds, key="order", cache=str(tmp_path / "c"), shuffle=True, seed=7)
    assert served(c) == expected()  # pass 0 fills, in the upstream's order
    want = expected()
    for epoch in (1, 2):
        order = np.frombuffer(_ssdfeed.epoch_order(N, True, 7, epoch), np.uint64)
        assert sorted(order.tolist()) == list(range(N))
        assert served(c) == [want[k] for k in order]


def worker(tmp_path, kind, src, key, name, meet=None, how="--meet"):
    cmd = [sys.executable, os.path.join(HERE, "tf_cache_worker.py"), str(tmp_path / "c"), kind,
           src, key, str(tmp_path / "counts"), str(tmp_path / f"{name}.json")]
    if meet:
        cmd += [how, meet, name]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_concurrent_jobs_fill_and_read_one_cache(tmp_path, records):
    meet = tmp_path / "meet"
    meet.mkdir()
    jobs = [worker(tmp_path, "tfrecord", records, "conc", n, str(meet)) for n in ("a", "b")]
    for j in jobs:
        _, err = j.communicate(timeout=300)
        assert j.returncode == 0, err[-3000:]
    for n in ("a", "b"):
        with open(tmp_path / f"{n}.json") as f:
            assert json.load(f) == expected()
    # Both were past element 5 at once (the meeting point); a third job reads.
    before = len(counts(str(tmp_path / "counts")))
    third = worker(tmp_path, "tfrecord", records, "conc", "c")
    _, err = third.communicate(timeout=300)
    assert third.returncode == 0, err[-3000:]
    with open(tmp_path / "c.json") as f:
        assert json.load(f) == expected()
    assert len(counts(str(tmp_path / "counts"))) == before


def test_two_fills_by_index_at_once_parse_each_element_about_once(tmp_path):
    """Where the pipeline gives elements by index, a fill computes a missing
    element under its claim, and waits for (then reads) one that the other
    job claimed: two jobs started together share the parsing, as two
    Loaders share preparing, instead of each parsing every element."""
    together = tmp_path / "together"
    together.mkdir()
    jobs = [worker(tmp_path, "slices", str(N), "shared", n, str(together), how="--together")
            for n in ("a", "b")]
    for j in jobs:
        _, err = j.communicate(timeout=300)
        assert j.returncode == 0, err[-3000:]
    for n in ("a", "b"):
        with open(tmp_path / f"{n}.json") as f:
            assert json.load(f) == expected()
    parsed = counts(str(tmp_path / "counts"))
    assert sorted(set(parsed)) == list(range(N))
    # About once: only a claim that outlives the other's bounded wait (3 s)
    # is parsed twice. Without claims both jobs parse all: 2N.
    assert len(parsed) <= N + N // 10, sorted(parsed)


def test_tf_data_cache_fails_where_two_readers_share_a_file(tmp_path, records):
    """The contrast: tf.data's own cache refuses a second concurrent fill."""
    ds = w.tfrecord_pipeline(records, str(tmp_path / "counts")).cache(str(tmp_path / "tfc"))
    first = iter(ds)
    next(first)
    with pytest.raises(tf.errors.AlreadyExistsError, match="lockfile"):
        next(iter(ds))


def test_a_killed_fill_keeps_what_it_stored_and_resumes(tmp_path):
    job = worker(tmp_path, "slices", str(N), "killed", "a")
    for line in job.stdout:
        if int(line) >= 9:  # 10 elements served, so stored: kill it mid-fill
            break
    job.send_signal(signal.SIGKILL)
    job.communicate(timeout=60)
    assert job.returncode == -signal.SIGKILL
    cnt = str(tmp_path / "counts")
    first = counts(cnt)
    os.unlink(cnt)
    resumed = worker(tmp_path, "slices", str(N), "killed", "b")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    with open(tmp_path / "b.json") as f:
        assert json.load(f) == expected()
    again = counts(cnt)
    assert len(first) < N
    assert min(again) >= 10 and sorted(again) == list(range(min(again), N)), \
        "the resumed job computes only what the killed one had not stored"


def test_a_decoded_image_as_float_is_stored_as_uint8_and_comes_back_bit_for_bit(tmp_path):
    """cast/255 of a uint8 image (the usual parse) is kept as the uint8 (a
    quarter of the bytes); floats that are not are kept as they are."""
    from ssdfeed import _tf_cache

    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (6, 32, 24, 3), dtype=np.uint8)
    noisy = rng.standard_normal((6, 32, 24, 3)).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((imgs, noisy)).map(
        lambda k, x: {"scaled": tf.cast(k, tf.float32) / 255.0, "as_float": tf.cast(k, tf.float32),
                      "noisy": x, "neg_zero": -tf.zeros([8, 8])})
    root = str(tmp_path / "c")
    cached = ssdfeed.tf.cache(ds, key="u8", cache=root)
    for _ in range(2):
        for a, b in zip(ds, cached, strict=True):
            for name in a:
                assert a[name].numpy().view(np.uint32).tobytes() == \
                    b[name].numpy().view(np.uint32).tobytes(), name
    store = _tf_cache.Store(root, "u8", ds.element_spec, None, _tf_cache._PART)
    fields = {f[0]: f for f in store.entry(0).lookup(0)}
    order = sorted(ds.element_spec)  # tf.nest flattens dicts by sorted key
    kinds = {order[int(n.split(":")[0])]: (n, f[2]) for n, f in fields.items()}
    assert kinds["scaled"] == ("%d:u8/255" % order.index("scaled"), "|u1")
    assert kinds["as_float"] == ("%d:u8" % order.index("as_float"), "|u1")
    assert kinds["noisy"][1] == "<f4" and kinds["neg_zero"][1] == "<f4"


def test_elements_across_several_part_entries(tmp_path, records):
    """Elements go into entries of P each: with P = 7, 20 elements span 3."""
    from ssdfeed import _tf_cache

    cnt = str(tmp_path / "counts")
    ds = w.tfrecord_pipeline(records, cnt)
    root = str(tmp_path / "c")
    cached = _tf_cache.TfCache(ds, "parts", root, None, False, 0, part_size=7).dataset()
    assert served(cached.take(10)) == expected()[:10]
    assert served(cached) == expected()
    computed = len(counts(cnt))
    assert served(cached) == expected()
    again = _tf_cache.TfCache(ds, "parts", root, None, False, 0, part_size=7).dataset()
    assert int(again.cardinality()) == N
    assert served(again) == expected()
    assert len(counts(cnt)) == computed, "a complete cache runs no parse"
    store = _tf_cache.Store(root, "parts", ds.element_spec, None, 7)
    assert [store.entry(p).present() for p in range(3)] == [7, 7, 6]


class Squares:
    """A map-style dataset for ssdfeed.cache (its items, beside tf.data's)."""

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return np.full(2, i * i)


def cache_ls(root):
    r = subprocess.run(["ssdfeed", "cache", "ls", "--cache", root, "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = subprocess.run(["ssdfeed", "cache", "ls", "--cache", root],
                          capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    return ({e["spec_summary"]: e for e in json.loads(r.stdout)},
            {line.split()[0]: line for line in text.stdout.splitlines()[1:]})


def test_cache_ls_shows_tf_data_elements_counted_against_the_pipeline(tmp_path, records):
    """A part entry is made 65536 items long before the pipeline's length is
    known; ls counts its elements against the count the meta entry records
    (unknown, "?", until a pass has reached the end), not against 65536."""
    root = str(tmp_path / "c")
    cached = ssdfeed.tf.cache(w.tfrecord_pipeline(records, str(tmp_path / "n")), key="ls-v1",
                              cache=root)
    for _ in cached.take(5):  # a pass left early: the count is still unknown
        pass
    js, text = cache_ls(root)
    part, meta = js["tf.data elements"], js["tf.data element count"]
    assert part["source"] == meta["source"] == "tf:ls-v1"
    assert part["state"] == "partial" and part["items_total"] is None
    assert part["items_present"] == part["samples_present"] >= 5
    assert f"{part['items_present']}/?" in text[part["entry"][:12]]
    assert meta["state"] == "partial" and meta["items_total"] == 1

    assert served(cached) == expected()  # a whole pass: the count is recorded
    cached_items = ssdfeed.cache(Squares(), key="squares", cache=root)
    for i in range(len(cached_items)):
        cached_items[i]
    cached_items.close()
    js, text = cache_ls(root)
    part, meta, items = js["tf.data elements"], js["tf.data element count"], js["python items"]
    assert (part["state"], part["items_present"], part["items_total"]) == ("complete", N, N)
    assert (meta["state"], meta["items_present"], meta["items_total"]) == ("complete", 1, 1)
    assert (items["state"], items["items_present"], items["items_total"]) == ("complete", 3, 3)
    line = text[part["entry"][:12]]
    assert "complete" in line and f"{N}/{N}" in line and "tf.data elements" in line
    assert "65536" not in line
    assert "3/3" in text[items["entry"][:12]] and "python items" in text[items["entry"][:12]]


def test_a_shuffle_buffer_after_the_cache_reuses_memory_instead_of_faulting_it_in(tmp_path):
    """The field report's pipeline: cache, then shuffle(10000), which holds
    every element of a pass (here 300 images of 768 KiB, 225 MiB). Each warm
    pass used to fault every page of every element in anew (glibc unmaps
    the malloc heaps the drained buffer leaves empty): 4x slower than
    tf.data's cache. Elements are now in tf's own memory, reused pass after
    pass.

    What is counted is faults that add no resident memory: pages the pass
    gave back and faulted in again. A pass may also grow the allocator's
    high-water mark, when the prefetch and shuffle threads happen to hold
    more at once than in any pass before (measured: one pass in 5-20, up to
    22,000 faults, every one a page that stays resident). That is growth,
    not the refaulting this test is about, and it is subtracted."""
    import resource

    n, side = 300, 256

    def image(i):
        k = tf.random.stateless_uniform([side, side, 3], seed=tf.stack([i, i + 1]), minval=0,
                                        maxval=256, dtype=tf.int64)
        return tf.cast(tf.cast(k, tf.uint8), tf.float32) / 255.0

    ds = tf.data.Dataset.range(n).map(image)
    pipeline = ssdfeed.tf.cache(ds, key="faults", cache=str(tmp_path / "c"))
    pipeline = pipeline.shuffle(10000, seed=0).batch(50).prefetch(2)

    def resident_pages():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1])

    def refaults_of_a_pass():
        before, resident = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, resident_pages()
        seen = pipeline.reduce(tf.constant(0, tf.int64),
                               lambda acc, b: acc + tf.shape(b, out_type=tf.int64)[0])
        assert int(seen) == n
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        return faults - (resident_pages() - resident)

    refaults_of_a_pass()  # cold: fills the cache
    refaults_of_a_pass()  # the first warm pass may still grow the allocator's pools
    pages = n * side * side * 3 * 4 // 4096
    refaults = refaults_of_a_pass()
    # Measured, with numpy's memory as the tensors' (the bug): 15,000-28,000
    # refaults a pass; with tf's allocator: 300-340.
    assert refaults < pages // 10, f"{refaults} pages refaulted in a warm pass of {pages} pages"
