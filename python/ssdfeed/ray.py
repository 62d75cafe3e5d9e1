"""ssdfeed on Ray Data: a ``ray.data.Dataset`` whose read tasks run where
their samples are cached.

Every node keeps its own cache root. Before a read is planned, a small task
on each alive node reports which sample ids its root holds for this source and
preparation; each read task (a range of ids) then runs on the node holding
most of its range, through soft node affinity: a node that is gone, or never
had the range, does not stall anything, the range is read on any node, which
prepares and caches it for the next pass. Install with ``pip install
'ssdfeed[ray]'``.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pickle
from collections import OrderedDict
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import ray
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as e:  # pragma: no cover - exercised only without ray
    raise ImportError("ssdfeed.ray needs Ray Data: pip install 'ssdfeed[ray]' "
                      "(or 'ray[data]')") from e

from ssdfeed import _compat, _ssdfeed
from ssdfeed.loader import Loader, _fill_source_side, _int, default_cache_dir
from ssdfeed.prepare import Prepare

Ranges = List[Tuple[int, int]]

# How long planning waits for a node's report; a node that has not answered
# by then is planned as if it cached nothing (its ranges go anywhere).
REPORT_TIMEOUT_S = 30.0

# Defaults that keep Ray's per-task and per-block costs (a task start, an
# object in the store, a step of the executor) small against the bytes
# moved: one read task per CPU of the cluster, each yielding its whole range
# as one block. Ray Data concatenates (copies) the blocks a task yields until
# they pass its target block size (DataContext.target_max_block_size, 128
# MiB by default), so a task's range is at most that many bytes, one block
# that passes through whole. Tasks stay at most MAX_SAMPLES_PER_TASK ids, so
# a task retried after a node loss redoes a bounded range, and at least
# MIN_SAMPLES_PER_TASK (where a block holds them): not slivers.
MIN_SAMPLES_PER_TASK = 1024
MAX_SAMPLES_PER_TASK = 1 << 16


def _node_id() -> str:
    return ray.get_runtime_context().get_node_id()


def _root_here(cache) -> str:
    """The cache root on the node this runs on: ``{node_id}`` in a path is
    this node's Ray id; True is the node's default root ($SSDFEED_CACHE)."""
    if cache is True:
        return default_cache_dir()
    if cache is False or cache is None:
        return ""
    return os.fspath(cache).replace("{node_id}", _node_id())


def _loader_kwargs(spec: dict, cache) -> dict:
    kw = dict(spec)
    kw["cache"] = _root_here(cache) or False
    return kw


def _cached_ranges(spec: dict, cache) -> Tuple[str, Ranges]:
    """(this node's id, the id runs its cache root holds)."""
    ranges = _ssdfeed.cached_id_ranges(_pack_args(spec, cache))
    return _node_id(), [tuple(r) for r in ranges]


def _pack_args(spec: dict, cache):
    """The native LoaderOptions of spec, as Loader() would build them, without
    opening a loader (a report must not create a cache entry)."""
    kw = _loader_kwargs(spec, cache)
    o = _ssdfeed.LoaderOptions()
    _fill_source_side(o, kw["source"], kw["cache"], kw.get("prepare", Prepare()),
                      kw.get("on_error", "raise"), kw.get("image_key"), kw.get("label_key"),
                      kw.get("fields"), kw.get("stems"))
    return o


def _rows(batch, kinds: dict) -> dict:
    """A loader batch as a block's columns: (images, labels) as image and
    label; a dict batch by name, with padded boxes and classes cut to each
    row's num_boxes (a column of (K, 4) and (K,) arrays)."""
    if isinstance(batch, tuple):
        images, labels = batch
        return {"image": images, "label": labels}
    out = dict(batch)
    count = _compat.box_count_name(kinds)
    for name, kind in kinds.items():
        if kind in _compat.PER_BOX_KINDS and name in out:
            out[name] = [row[:k] for row, k in zip(out[name], out[count].tolist())]
    return out


# Loaders a Ray worker process keeps open between passes (Ray reuses its
# workers): a read task whose range this process read before finds the source
# listed and the entry open, where opening them again cost each task of each
# pass a listing of the whole source. Keyed by everything the loader is made
# of and the source's size as planned (a source that grew or shrank is
# another key). A kept loader also keeps its batch buffer for reuse (a
# range's bytes), so a process keeps at most KEEP_OPEN loaders and
# KEEP_OPEN_BYTES of their ranges, the least recently used closed first (the
# one just used is always kept).
KEEP_OPEN = 8
KEEP_OPEN_BYTES = 256 << 20
_open_loaders: "OrderedDict[bytes, Tuple[Loader, int]]" = OrderedDict()

# Sources a Ray worker process keeps open, listed once: a loader made for a
# range that no kept loader holds (more ranges than KEEP_OPEN_BYTES keeps:
# any dataset past a few hundred MB a pass) reads through the process's
# source instead of listing the whole source again, which cost each such
# task 0.13 s at 50,000 files and grows with the listing. Keyed by what the
# source is opened with and the source's size as planned (a source that grew
# or shrank is listed again). A source holds its listing and index, no
# sample bytes. The loaders of one process run one at a time (one read task
# at a time), so each counts only its own origin traffic.
KEEP_SOURCES = 4
_open_sources: "OrderedDict[bytes, object]" = OrderedDict()
_sources_opened = 0  # by this process: reported to a Stats actor as source_opens


class _RangeLoader(Loader):
    """A Loader over the process's shared source."""

    def __init__(self, shared_source, source, **kw):
        self._shared_source = shared_source
        super().__init__(source, **kw)


def _shared_source(spec: dict, cache):
    """The process's opened source for a loader of spec."""
    global _sources_opened
    key = pickle.dumps({k: spec.get(k) for k in ("source", "on_error", "image_key", "label_key",
                                                 "fields", "stems", "samples")})
    source = _open_sources.pop(key, None)
    if source is None:
        o = _pack_args(spec, cache)
        so = o.source_options
        so.defer_index = True  # as the Loader opens it: the index from the cache when stored
        source = _ssdfeed.open_source_with(o.source, so)
        _sources_opened += 1
    _open_sources[key] = source
    while len(_open_sources) > KEEP_SOURCES:
        _open_sources.popitem(last=False)
    return source


@atexit.register
def _close_open_loaders() -> None:
    """Stops the kept loaders' workers, and lets the kept sources go, before
    the interpreter goes."""
    while _open_loaders:
        _open_loaders.popitem()[1][0].close()
    _open_sources.clear()


def _open_loader(spec: dict, cache, lo: int, hi: int) -> Tuple[bytes, Loader]:
    kw = _loader_kwargs(spec, cache)
    kw.pop("epoch")
    key = pickle.dumps((kw, lo, hi))
    loader, _ = _open_loaders.pop(key, (None, 0))
    if loader is None:
        shared = _shared_source(spec, cache)
        source = kw.pop("source")
        kw.pop("samples", None)
        kw.pop("sample_bytes", None)
        loader = _RangeLoader(shared, source, ids=range(lo, hi), shuffle=False, **kw)
    _open_loaders[key] = (loader, (hi - lo) * spec.get("sample_bytes", 0))
    while len(_open_loaders) > 1 and (
            len(_open_loaders) > KEEP_OPEN
            or sum(held for _, held in _open_loaders.values()) > KEEP_OPEN_BYTES):
        _open_loaders.popitem(last=False)[1][0].close()
    return key, loader


def _read_range(spec: dict, cache, lo: int, hi: int, stats) -> Iterator[dict]:
    """Reads ids [lo, hi) here, in canonical order, as numpy batches, each
    yielded as the loader makes it (a block leaves the task while the next
    is read), with a loader this process keeps open for the next pass."""
    opened = _sources_opened
    key, loader = _open_loader(spec, cache, lo, hi)
    before = loader.stats() if stats is not None else None
    loader.set_epoch(spec["epoch"])
    whole = False
    try:
        pos = lo
        for b in loader:
            batch = _rows(b, loader.fields)
            n = len(batch["image"])
            if spec.get("on_error", "raise") == "raise":
                # Canonical order, nothing skipped: positions are ids.
                batch["id"] = np.arange(pos, pos + n, dtype=np.int64)
            pos += n
            yield batch
        whole = True
    finally:
        if not whole:  # a pass left early or failed: the next one opens afresh
            _open_loaders.pop(key, None)
            loader.close()
    if stats is not None:
        s = loader.stats()
        # Waited for, so a summary asked after the pass counts this task.
        counts = {k: s[k] - before[k] for k in ("cache_hits", "cache_misses", "prepared",
                                                "samples")}
        counts["source_opens"] = _sources_opened - opened
        ray.get(stats.add.remote(_node_id(), counts))


def _read_range_list(spec: dict, cache, lo: int, hi: int, stats) -> List[dict]:
    """_read_range as one list: what a task pinned to another node returns."""
    return list(_read_range(spec, cache, lo, hi, stats))


_read_range_remote = None


def _remote_reader():
    global _read_range_remote
    if _read_range_remote is None:
        _read_range_remote = ray.remote(_read_range_list)
    return _read_range_remote


def _best_node(lo: int, hi: int, reports: Dict[str, Ranges]) -> Optional[str]:
    """The node whose cache holds most of [lo, hi), or None if none holds any."""
    best, best_count = None, 0
    for node, ranges in reports.items():
        count = sum(max(0, min(hi, e) - max(lo, b)) for b, e in ranges)
        if count > best_count:
            best, best_count = node, count
    return best


@ray.remote
class Stats:
    """Collects what each read task's loader counted (cache_hits,
    cache_misses, prepared, samples) and the sources its process listed for
    it (source_opens: at most one per worker process and source, not one per
    task); pass one as ``read(..., stats=Stats.remote())`` and ask
    ``summary.remote()``."""

    def __init__(self):
        self._by_node: Dict[str, Dict[str, int]] = {}

    def add(self, node: str, counts: Dict[str, int]) -> None:
        mine = self._by_node.setdefault(node, {})
        for k, v in counts.items():
            mine[k] = mine.get(k, 0) + int(v)

    def summary(self) -> dict:
        total: Dict[str, int] = {}
        for counts in self._by_node.values():
            for k, v in counts.items():
                total[k] = total.get(k, 0) + v
        hits, misses = total.get("cache_hits", 0), total.get("cache_misses", 0)
        total["hit_rate"] = hits / (hits + misses) if hits + misses else 0.0
        total["by_node"] = {k: dict(v) for k, v in self._by_node.items()}
        return total


def _cpu_nodes() -> List[str]:
    """The alive nodes that can run a read task (a head with 0 CPUs cannot)."""
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU")]


def _cluster_cpus() -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _default_per_task(samples: int, cpus: int, sample_bytes: int) -> int:
    """One task per CPU, within [MIN_SAMPLES_PER_TASK, MAX_SAMPLES_PER_TASK],
    and no more ids than one block of Ray Data's target block size holds."""
    per_cpu = -(-samples // cpus)
    block = ray.data.DataContext.get_current().target_max_block_size or (128 << 20)
    per = max(MIN_SAMPLES_PER_TASK, min(MAX_SAMPLES_PER_TASK, per_cpu))
    return max(1, min(samples, per, block // max(1, sample_bytes)))


def _metadata(rows: int, size: int) -> BlockMetadata:
    # The fields of BlockMetadata changed across Ray releases (schema moved
    # out of it): pass the ones this Ray has.
    fields = {f.name for f in dataclasses.fields(BlockMetadata)}
    kw = dict(num_rows=rows, size_bytes=size, schema=None, input_files=None, exec_stats=None)
    return BlockMetadata(**{k: v for k, v in kw.items() if k in fields})


class SsdfeedDatasource(Datasource):
    """Read tasks over ranges of sample ids, placed where the ids are cached."""

    def __init__(self, spec: dict, cache, samples: int, sample_bytes: int,
                 samples_per_task: int, locality: bool, stats):
        self._spec, self._cache = spec, cache
        self._n, self._sample_bytes = samples, sample_bytes
        self._per_task, self._locality, self._stats = samples_per_task, locality, stats

    def get_name(self) -> str:
        return "ssdfeed"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return self._n * self._sample_bytes

    def node_reports(self) -> Dict[str, Ranges]:
        """What each alive node's cache root holds: {node id: id runs}."""
        probe = ray.remote(num_cpus=0)(_cached_ranges)
        refs = [probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                    n["NodeID"], soft=False)).remote(self._spec, self._cache)
                for n in ray.nodes() if n.get("Alive")]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=REPORT_TIMEOUT_S)
        reports = {}
        for ref in ready:
            try:
                node, ranges = ray.get(ref)
            except ray.exceptions.RayError:  # the node went away meanwhile
                continue
            reports[node] = ranges
        return reports

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context=None) -> List[ReadTask]:
        # On one node every task is local: no reports to wait for.
        several = len(_cpu_nodes()) > 1
        reports = self.node_reports() if self._locality and self._cache and several else {}
        per_task = self._per_task
        tasks = []
        for lo in range(0, self._n, per_task):
            hi = min(self._n, lo + per_task)
            node = _best_node(lo, hi, reports)
            meta = _metadata(hi - lo, (hi - lo) * self._sample_bytes)
            limit = {} if per_task_row_limit is None else {"per_task_row_limit":
                                                           per_task_row_limit}
            tasks.append(ReadTask(self._read_fn(lo, hi, node), meta, **limit))
        return tasks

    def _read_fn(self, lo: int, hi: int, node: Optional[str]):
        spec, cache, stats = self._spec, self._cache, self._stats

        def read():
            if node is None or node == _node_id():
                batches = _read_range(spec, cache, lo, hi, stats)
            else:
                # Ray Data gives all read tasks the same placement, so the
                # range is read by a task pinned (softly) to its node; a dead
                # or full node lets it run anywhere instead.
                where = NodeAffinitySchedulingStrategy(node, soft=True)
                batches = ray.get(_remote_reader().options(scheduling_strategy=where)
                                  .remote(spec, cache, lo, hi, stats))
            for b in batches:
                yield BlockAccessor.batch_to_block(b)

        return read


def read(source: Union[str, os.PathLike], *, prepare: Prepare = Prepare(),
         augment=None,
         cache: Union[str, os.PathLike, bool, None] = True, epoch: int = 0, seed: int = 0,
         samples_per_task: Optional[int] = None, batch_size: Optional[int] = None,
         threads: int = 1, reserve_resources: bool = False,
         locality: bool = True, stats=None, on_error: str = "raise", dtype: str = "uint8",
         layout: str = "NHWC", mean: Optional[Sequence[float]] = None,
         std: Optional[Sequence[float]] = None, image_key: Optional[str] = None,
         label_key: Optional[str] = None, cache_capacity: Optional[int] = None,
         fields: Optional[dict] = None, **read_args) -> "ray.data.Dataset":
    """A ``ray.data.Dataset`` of rows ``{"image", "label", "id"}`` of source,
    or for a source with other fields one column per field (as the
    Loader's dict batches, but boxes and classes per row: a (K, 4) and a
    (K,) array, with ``num_boxes``; bytes as binary).

    Args:
        source, prepare, augment, on_error, dtype, layout, mean, std,
            image_key, label_key, cache_capacity, fields: as
            ``ssdfeed.Loader``.
            Samples must share one shape (``Prepare(resize=...)`` or
            ``center_crop``, or a ``RandomResizedCrop`` or ``ScaleJitterCrop``
            augment; a ``Flip`` keeps the prepared shape).
        cache: the cache root of each node. ``True`` (default): the node's
            default root (``$SSDFEED_CACHE`` there, else ~/.cache/ssdfeed);
            a path, in which ``{node_id}`` is replaced by the Ray node id
            (several raylets on one machine); False: no cache.
        epoch, seed: key the augmentation, as ``Loader.set_epoch``; make one
            dataset per epoch for fresh crops. Defaults 0, 0.
        samples_per_task: ids per read task (the unit of placement), int >= 1,
            or None (default): one task per CPU of the cluster, at least
            1024 and at most 65,536 ids (Ray's per-task cost is paid once
            per CPU, not once per thousand samples), and no more than one
            block of ``DataContext.target_max_block_size`` bytes (128 MiB
            by default) holds.
        batch_size: rows per block a read task yields, int >= 1, or None
            (default): the task's whole range as one block. Ray Data
            concatenates (copies) smaller blocks of a task up to its target
            block size; one block per task passes through whole, and
            ``iter_batches`` cuts it to any batch size without copying
            image columns.
        threads: decoding threads of each read task, int >= 1. Default 1
            (Ray counts one CPU per task).
        reserve_resources: Ray Data's per-operator resource reservation
            (``DataContext.op_resource_reservation_enabled``) for this
            dataset and those derived from it; the process's DataContext
            is left as it is. Default False: with it on, Ray Data ran the
            read tasks one after the other, one at a time, on 2 and on 4
            CPUs (tests/py/test_ray.py); pass True where later operators of
            the pipeline (a heavy ``map_batches``) need CPUs kept from the
            reads.
        locality: place read tasks where their ids are cached. Default True.
        stats: a ``ssdfeed.ray.Stats`` actor that read tasks report their
            cache counters to, or None (default).
        read_args: passed to ``ray.data.read_datasource`` (e.g.
            ``override_num_blocks``, ``ray_remote_args``).

    A Ray worker keeps the loader of each range it read (up to KEEP_OPEN
    loaders and KEEP_OPEN_BYTES of ranges) for the next pass, as a plain
    Loader is kept between epochs, and the opened source (up to
    KEEP_SOURCES) for the ranges it keeps no loader for: the source is
    listed by this call on the driver and once by each worker process, not
    again by every read task.

    Order is canonical by id range; shuffle with ``random_shuffle()`` or
    ``iter_batches(local_shuffle_buffer_size=...)``. The ``id`` column is
    absent with ``on_error="skip"`` (skipped samples shift positions).
    """
    rows = None if batch_size is None else _int("batch_size", batch_size, 1)
    spec = dict(source=os.fspath(source), prepare=prepare, augment=augment, seed=seed,
                epoch=_int("epoch", epoch, 0), batch_size=rows or 1,
                workers=_int("threads", threads, 1), on_error=on_error, dtype=dtype,
                layout=layout, mean=mean, std=std, image_key=image_key, label_key=label_key,
                cache_capacity=cache_capacity, fields=fields)
    # Checks every argument here, on the driver, as Loader() does, and
    # learns the sample shape; no cache is opened.
    with Loader(source, cache=False, ids=range(0, 1), **{k: v for k, v in spec.items()
                                                         if k not in ("source", "epoch")}) as probe:
        h, w, c = probe.sample_shape
        samples = probe._impl.source_size()
    if h is None:
        raise ValueError("ssdfeed.ray.read needs samples of one shape: pass "
                         "Prepare(resize=...) or center_crop, or an augment")
    size = {"uint8": 1, "float16": 2, "float32": 4}[dtype]
    sample_bytes = h * w * c * size
    if cache is not True and cache not in (False, None) and not os.fspath(cache):
        raise ValueError(f"cache must be True, False or a directory path, not {cache!r}")
    if samples_per_task is None:
        if not ray.is_initialized():
            ray.init()  # as read_datasource would, to learn the cluster's CPUs
        per_task = _default_per_task(samples, _cluster_cpus(), sample_bytes)
    else:
        per_task = _int("samples_per_task", samples_per_task, 1)
    spec["batch_size"] = rows or per_task  # default: a task's range, one block
    spec["samples"] = samples  # keys the loaders read tasks keep open
    spec["sample_bytes"] = sample_bytes  # what a kept loader's buffer holds
    ds = SsdfeedDatasource(spec, cache, samples, sample_bytes, per_task, bool(locality), stats)
    # As many output blocks as read tasks make: with fewer, Ray Data would
    # split every task's blocks into slivers (SplitBlocks), paying its
    # per-block cost dozens of times per task.
    read_args.setdefault("override_num_blocks", max(1, -(-samples // per_task)))
    dataset = ray.data.read_datasource(ds, **read_args)
    # The dataset's own copy of the DataContext: what its execution reads.
    dataset.context.op_resource_reservation_enabled = bool(reserve_resources)
    return dataset


def cached(source: Union[str, os.PathLike], *, prepare: Prepare = Prepare(),
           cache: Union[str, os.PathLike, bool] = True, on_error: str = "raise",
           image_key: Optional[str] = None, label_key: Optional[str] = None,
           fields: Optional[dict] = None) -> Dict[str, Ranges]:
    """What each alive node's cache root holds of (source, prepare):
    ``{node id: [(begin, end), ...]}`` id runs, as ``read`` plans with. Asking
    creates no cache root or entry."""
    spec = dict(source=os.fspath(source), prepare=prepare, on_error=on_error,
                image_key=image_key, label_key=label_key, fields=fields)
    return SsdfeedDatasource(spec, cache, 0, 0, 1, True, None).node_reports()


# ---------------------------------------------------------------- warm

@ray.remote(num_cpus=0)
class _PeerNode:
    """One node's entry in ssdfeed.ray.warm: pinned to its node, it prepares
    the node's share from the origin, exports record batches (Ray objects,
    fetched by the nodes that need them through the object store) and checks
    and stores batches received (docs/multi-node.md)."""

    def __init__(self, uri: str, cache, options: dict, die_at: Optional[int] = None):
        from ssdfeed._warm import _warm_options
        o = _warm_options(cache=_root_here(cache), **options)
        self.die_at, self.batches_in = die_at, 0  # die_at: a test's kill (warm's _die_at)
        self.pe = _ssdfeed.PeerEntry.open(uri, o)
        self.r = dict(node_id=_node_id(), prepared=0, origin_bytes=0, records_received=0,
                      bytes_received=0, records_sent=0, bytes_sent=0, records_refused=0,
                      not_admitted=0, first_refusal="")
        self.full = ""

    def presence(self):
        if not self.full and not self.pe.admitting:
            self.full = self.pe.warning or "the cache is full"
        return self.pe.presence(), not self.full

    def warm(self, ids: List[int]) -> None:
        w = self.pe.warm_ids(ids)
        self.r["prepared"] += w.prepared
        self.r["origin_bytes"] += w.origin_bytes
        if w.cache_full:
            self.full = w.warning or "the cache is full"

    def export(self, ids: List[int], receivers: int) -> bytes:
        from ssdfeed.distributed import count_export

        batch, records = self.pe.export_batch(ids, receivers)
        count_export(self.r, batch, records, receivers)
        return batch

    def receive(self, batch: bytes) -> None:
        from ssdfeed.distributed import count_import

        if self.batches_in == self.die_at:
            os._exit(17)  # killed mid-exchange: no cleanup, nothing stored of this batch
        self.batches_in += 1
        count_import(self.r, self.pe.import_batch(batch))

    def finish(self, seconds: float) -> dict:
        self.pe.sync()
        present = np.frombuffer(self.pe.presence(), dtype=np.uint8)
        self.r.update(samples_total=self.pe.samples_total, samples_present=int(present.sum()),
                      complete=bool(present.all()), cache_full=bool(self.full),
                      warning=self.full, dir=self.pe.dir)
        if self.r["complete"]:
            self.pe.record_complete(seconds)
        return self.r


def warm(source: Union[str, os.PathLike], *, prepare: Prepare = Prepare(), cache=True,
         workers: Optional[int] = None, on_error: str = "raise", image_key: Optional[str] = None,
         label_key: Optional[str] = None, fields: Optional[dict] = None,
         cache_capacity: Optional[int] = None, batch_records: int = 256,
         _die_at: Optional[Tuple[int, int]] = None) -> dict:
    """Warms the cache entry of (source, prepare) on every alive node of the
    Ray cluster with one call: the samples no node holds are dealt among the
    nodes, each prepares its share once, and the nodes fill each other
    through the Ray object store (one actor per node); a node that holds
    part of the entry receives only what it lacks. Arguments as
    ``ssdfeed.distributed.warm`` (``cache`` may contain ``{node_id}``, as for
    ``read``). Returns ``{"nodes": {node_id: result}, "prepared",
    "origin_bytes", "complete"}``, each node's result as
    ``ssdfeed.distributed.warm``'s. Raises the Ray error of a node whose
    actor died (the others' actors are ended); calling again resumes, each
    node filling what it lacks from its peers.

    _die_at=(k, n), for tests: the k-th node's actor exits on receiving its
    n-th batch, as if killed."""
    import time

    _int("batch_records", batch_records, 1)
    t0 = time.monotonic()
    options = dict(prepare=prepare, workers=workers, on_error=on_error, image_key=image_key,
                   label_key=label_key, cache_capacity=cache_capacity, fields=fields)
    node_ids = [n["NodeID"] for n in ray.nodes()
                if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
    die = dict([_die_at]) if _die_at is not None else {}
    actors = [_PeerNode.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        nid, soft=False)).remote(os.fspath(source), cache, options, die.get(k))
        for k, nid in enumerate(node_ids)]
    try:
        results = _warm_rounds(actors, batch_records, t0)
    finally:
        for a in actors:
            ray.kill(a)
    return {"nodes": {r["node_id"]: r for r in results},
            "prepared": sum(r["prepared"] for r in results),
            "origin_bytes": sum(r["origin_bytes"] for r in results),
            "complete": all(r["complete"] for r in results)}


def _warm_rounds(actors, batch_records: int, t0: float) -> List[dict]:
    """warm's rounds, as ssdfeed.distributed's leaders run them: gather what
    every node holds, deal what none holds to the origin, exchange the rest;
    then each node's result."""
    import time

    from ssdfeed.distributed import MAX_ROUNDS, deal

    for rnd in range(MAX_ROUNDS + 1):
        reports = ray.get([a.presence.remote() for a in actors])
        present = np.stack([np.frombuffer(p, dtype=np.uint8) for p, _ in reports]).astype(bool)
        admitting = np.array([ok for _, ok in reports])
        wanting = admitting & ~present.all(axis=1)
        if not wanting.any():
            break
        missing = np.flatnonzero(~present.any(axis=0))
        if rnd == MAX_ROUNDS:  # peers could not deliver: the origin it is
            ray.get([a.warm.remote(np.flatnonzero(~present[k]).tolist())
                     for k, a in enumerate(actors) if wanting[k]])
        elif missing.size:
            takers = np.flatnonzero(admitting)
            ray.get([a.warm.remote(deal(missing, takers, k).tolist())
                     for k, a in enumerate(actors)])
        else:
            _exchange(actors, present, wanting, batch_records)
    seconds = time.monotonic() - t0
    return ray.get([a.finish.remote(seconds) for a in actors])


def _exchange(actors, present, wanting, batch_records: int) -> None:
    """One round: each record some admitting node lacks, exported once by
    one holder in a batch of records that the same nodes lack, fetched from
    the object store by those nodes only (ssdfeed.distributed.plan)."""
    from ssdfeed.distributed import plan

    pending = []
    for k, batches in enumerate(plan(present, wanting, batch_records)):
        for ids, to in batches:
            batch = actors[k].export.remote(ids, len(to))
            pending += [actors[j].receive.remote(batch) for j in to]
    ray.get(pending)
