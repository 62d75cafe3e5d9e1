"""ssdfeed.ray on a real multi-node Ray cluster on this machine: several
raylets, each with its own cache root (``{node_id}`` in the root path)."""

import pickle

import pytest

ray = pytest.importorskip("ray", reason="ssdfeed.ray needs ray[data] (pip install 'ray[data]')")
pytest.importorskip("ray.data", reason="ssdfeed.ray needs ray[data]")

import ssdfeed  # noqa: E402
import ssdfeed.ray as sray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

# A local multi-node cluster per test: heavy, and its own ports and /tmp/ray.
pytestmark = pytest.mark.serial

N = 96
PREP = ssdfeed.Prepare(resize=(24, 24))
MB = 1 << 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Two raylets, each a node with its own cache root; the head also runs
    # the driver (a third raylet is added where a node must be removed).
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False})
    nodes = [c.head_node, c.add_node(num_cpus=1, object_store_memory=80 * MB)]
    ray.init(address=c.address, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield c, nodes
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("raydata")
    d = ssdfeed.make_dataset(str(root / "src"), format="tfrecord", count=N, classes=4, seed=5,
                             shard_size=50, min_side=32, max_side=48)
    return d["uri"], str(root / "cache-{node_id}")


@ray.remote(num_cpus=1)
def _warm(uri, root, lo, hi):
    root = root.replace("{node_id}", ray.get_runtime_context().get_node_id())
    with ssdfeed.Loader(uri, cache=root, prepare=PREP, ids=range(lo, hi), batch_size=16,
                        workers=1) as loader:
        for _ in loader:
            pass
        return loader.stats()["prepared"]


def _alive_worker_ids():
    return [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]


def _ids(ds):
    ids = []
    for b in ds.iter_batches(batch_size=20, batch_format="numpy"):
        assert b["image"].shape[1:] == (24, 24, 3)
        ids.extend(b["id"].tolist())
    return ids


def _count(reports):
    return sum(e - b for ranges in reports.values() for b, e in ranges)


def test_second_pass_reads_where_cached(cluster, data):
    uri, root = data
    a, b = _alive_worker_ids()[:2]
    assert _count(sray.cached(uri, prepare=PREP, cache=root)) == 0
    # One warm pass per node, of its half.
    halves = [(a, 0, N // 2), (b, N // 2, N)]
    prepared = ray.get([_warm.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node, soft=False)).remote(uri, root, lo, hi) for node, lo, hi in halves])
    assert prepared == [N // 2, N // 2]
    reports = sray.cached(uri, prepare=PREP, cache=root)
    assert reports[a] == [(0, N // 2)] and reports[b] == [(N // 2, N)]

    stats = sray.Stats.remote()
    ds = sray.read(uri, prepare=PREP, cache=root, samples_per_task=12, batch_size=12,
                   stats=stats)
    assert sorted(_ids(ds)) == list(range(N))
    s = ray.get(stats.summary.remote())
    assert s["samples"] == N
    assert s["hit_rate"] >= 0.95, s
    # No sample prepared twice: each node still holds exactly its half.
    after = sray.cached(uri, prepare=PREP, cache=root)
    assert after[a] == [(0, N // 2)] and after[b] == [(N // 2, N)], after
    assert s["prepared"] == 0, s


def test_streaming_split_feeds_every_row_once(cluster, data):
    uri, root = data
    ds = sray.read(uri, prepare=PREP, cache=root, samples_per_task=24, batch_size=12)
    it0, it1 = ds.streaming_split(2, equal=False)

    @ray.remote(num_cpus=0)
    def consume(it):
        return [int(i) for b in it.iter_batches(batch_size=8) for i in b["id"]]

    got = ray.get([consume.remote(it0), consume.remote(it1)])
    assert sorted(got[0] + got[1]) == list(range(N))


def test_a_node_removed_mid_pass_does_not_lose_the_job(cluster, data):
    c, nodes = cluster
    uri, root = data
    spare = c.add_node(num_cpus=1, object_store_memory=80 * MB)
    c.wait_for_nodes()
    ds = sray.read(uri, prepare=PREP, cache=root, samples_per_task=8, batch_size=8)
    ids = []
    it = ds.iter_batches(batch_size=8, batch_format="numpy", prefetch_batches=0)
    for i, b in enumerate(it):
        ids.extend(b["id"].tolist())
        if i == 1:
            c.remove_node(nodes[1])  # half the cache leaves with it
    assert sorted(set(ids)) == list(range(N))
    assert len(ids) == N
    assert nodes[1].node_id not in _alive_worker_ids()
    assert spare.node_id in _alive_worker_ids()


def test_blocks_are_what_the_read_tasks_make(cluster, data):
    # Ray's per-block cost dominated reading: Ray Data split each task's
    # output into slivers (SplitBlocks) to reach its own block count, and
    # concatenated (copied) the blocks a task yielded up to its target block
    # size. A read's blocks are now its tasks' ranges, each one block.
    uri, root = data
    ds = sray.read(uri, prepare=PREP, cache=root)
    whole = ds.materialize()
    # 96 samples: one task (a task takes at least 1,024 ids), one block.
    assert whole.num_blocks() == 1
    assert sorted(_ids(whole)) == list(range(N))
    four = sray.read(uri, prepare=PREP, cache=root, samples_per_task=24).materialize()
    assert four.num_blocks() == 4
    assert sorted(_ids(four)) == list(range(N))


def test_read_tasks_are_not_held_back_by_ray_datas_reservation(cluster, data):
    # Ray Data's per-operator resource reservation ran a read's tasks one at
    # a time (measured on 2 and 4 CPUs: the second started when the first
    # ended, in the same worker), half the reading speed on one node. A read
    # turns it off in its dataset's own DataContext (and those derived from
    # it), never in the process's, and turns it back on when asked.
    uri, root = data
    before = ray.data.DataContext.get_current().op_resource_reservation_enabled
    ds = sray.read(uri, prepare=PREP, cache=root, samples_per_task=48)
    assert ds.context.op_resource_reservation_enabled is False
    mapped = ds.map_batches(lambda b: b)
    assert mapped.context.op_resource_reservation_enabled is False
    assert sorted(_ids(mapped)) == list(range(N))
    assert ray.data.DataContext.get_current().op_resource_reservation_enabled == before
    kept = sray.read(uri, prepare=PREP, cache=root, samples_per_task=48,
                     reserve_resources=True)
    assert kept.context.op_resource_reservation_enabled is True
    assert sorted(_ids(kept)) == list(range(N))


def test_default_read_tasks_are_one_per_cpu_within_bounds():
    rgb64 = 64 * 64 * 3
    assert sray._default_per_task(10_000, 2, rgb64) == 5_000
    assert sray._default_per_task(5_000, 8, rgb64) == 1_024  # not slivers of 625
    assert sray._default_per_task(500, 8, rgb64) == 500  # one task for a small set
    assert sray._default_per_task(10_000_000, 4, 24 * 24 * 3) == 65_536  # a bounded retry
    # A task's range is one block of at most Ray Data's target block size
    # (128 MiB): 10,922 64x64 crops, 222 float32 224x224 ones.
    assert sray._default_per_task(10_000_000, 4, rgb64) == (128 << 20) // rgb64
    assert sray._default_per_task(100_000, 2, 224 * 224 * 3 * 4) == 222


def test_a_worker_keeps_a_ranges_loader_open_for_the_next_pass(data, tmp_path):
    # Each read task made a Loader, listing the whole source and opening the
    # entry, on every pass: a pass's fixed cost. A Ray worker now keeps it,
    # as a plain Loader is kept from one epoch to the next. In-process here:
    # which worker a task lands on is Ray's choice.
    uri, _ = data
    sray._close_open_loaders()
    spec = dict(source=uri, prepare=PREP, epoch=0, batch_size=16, workers=1, samples=N)
    root = str(tmp_path / "cache")
    first = list(sray._read_range(spec, root, 0, 32, None))
    ((key, (loader, _)),) = sray._open_loaders.items()
    again = list(sray._read_range(dict(spec, epoch=3), root, 0, 32, None))
    assert [(k, kept) for k, (kept, _) in sray._open_loaders.items()] == [(key, loader)]
    for a, b in zip(first, again):
        assert (a["id"] == b["id"]).all() and (a["image"] == b["image"]).all()
    assert loader.stats()["cache_hits"] == 32  # the second pass was warm
    # A pass left early drops its loader: the next one starts afresh.
    left = sray._read_range(spec, root, 0, 32, None)
    next(left)
    left.close()
    assert not sray._open_loaders
    # At most KEEP_OPEN ranges per process, the least recently used closed.
    for lo in range(sray.KEEP_OPEN + 1):
        list(sray._read_range(spec, root, lo, lo + 1, None))
    assert len(sray._open_loaders) == sray.KEEP_OPEN
    ranges = [pickle.loads(k)[1] for k in sray._open_loaders]
    assert ranges == list(range(1, sray.KEEP_OPEN + 1))
    # And at most KEEP_OPEN_BYTES of ranges (a kept loader keeps its batch
    # buffer): two ranges of 60% of it each, one kept; the one just used.
    big = dict(spec, sample_bytes=sray.KEEP_OPEN_BYTES * 6 // 10 // 16)
    list(sray._read_range(big, root, 0, 16, None))
    list(sray._read_range(big, root, 16, 32, None))
    assert [pickle.loads(k)[1:] for k in sray._open_loaders] == [(16, 32)]


def test_a_worker_lists_the_source_once_for_all_its_ranges(data, tmp_path):
    # Past KEEP_OPEN ranges (or KEEP_OPEN_BYTES of them: any dataset past a
    # few hundred MB a pass) a read task made a Loader that listed the whole
    # source again: 0.13 s a task at 50,000 files, growing with the listing.
    # The process now keeps the opened source, and each new range's loader
    # reads through it. In-process, as the test above.
    uri, _ = data
    sray._close_open_loaders()
    sray._open_sources.clear()
    spec = dict(source=uri, prepare=PREP, epoch=0, batch_size=4, workers=1, samples=N)
    root = str(tmp_path / "cache")
    opened = sray._sources_opened
    served = {}
    for lo in range(0, N, 4):  # 24 ranges: more than a process keeps loaders for
        for b in sray._read_range(spec, root, lo, lo + 4, None):
            served.update(zip(b["id"].tolist(), zip(b["image"], b["label"].tolist())))
    assert sray._sources_opened - opened == 1
    assert len(sray._open_loaders) == sray.KEEP_OPEN  # the rest were made again
    # What the loaders over the shared source served is what a Loader serves.
    with ssdfeed.Loader(uri, cache=root, prepare=PREP, batch_size=N, workers=1) as loader:
        images, labels = next(iter(loader))
    assert sorted(served) == list(range(N))
    for i in range(N):
        assert (served[i][0] == images[i]).all() and served[i][1] == labels[i], i
    # A source the driver planned at another size (it grew or shrank since)
    # is listed again, not read through the old listing.
    with pytest.raises(ValueError):  # N + 1 ids planned: the listing has N
        list(sray._read_range(dict(spec, samples=N + 1), root, N - 4, N + 1, None))
    assert sray._sources_opened - opened == 2
