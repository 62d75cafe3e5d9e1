"""PyTorch adapter: the same Loader, yielding torch tensors (zero-copy).

With CUDA present, each batch buffer is page-locked once (cudaHostRegister)
so `.cuda(non_blocking=True)` copies asynchronously; buffers are recycled, so
registration happens only for the few buffers of the pool. The loader
unregisters them when it is closed or collected, while the pool still owns
the memory.
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import torch

from ssdfeed import _compat, _item_loader, _ssdfeed
from ssdfeed.loader import Loader as _Loader

# torch.utils.data.DataLoader arguments that have no meaning here, and why.
_NOT_SUPPORTED = {
    "sampler": "the order comes from shuffle/seed/set_epoch, and rank/world_size "
               "(DistributedSampler semantics; its drop_last is sampler_drop_last); "
               "loader.sampler has DistributedSampler's len() and set_epoch()",
    "batch_sampler": "batches are cut from the epoch plan; use batch_size and drop_last",
    "collate_fn": "batches are already (images, labels) tensors, or dicts of tensors with "
                  "detection targets; output='detection' or 'segmentation' gives "
                  "torchvision's (images, targets) / (image, mask) pairs",
    "worker_init_fn": "workers are C++ threads, not Python processes",
    "multiprocessing_context": "workers are C++ threads, not Python processes",
    "generator": "randomness comes from seed (and the epoch); without seed=, from "
                 "torch's RNG as with DataLoader",
    "prefetch_factor": "use prefetch=N (batches prepared ahead, in total)",
    "timeout": "there is no worker timeout; a stuck read shows in stats()['wait_seconds']",
    "pin_memory_device": "pinned memory is registered for the current CUDA device",
    "in_order": "batches always come in plan order",
}


class Loader(_Loader):
    """``ssdfeed.Loader`` yielding ``(images, labels)`` as torch tensors, or
    for a source with other fields a dict of tensors.

    A dict batch holds the numpy loader's keys as tensors (zero-copy where
    the numpy array is a view; lists of per-sample tensors where a field's
    shapes differ; bytes stay ``bytes``). When it has boxes it also holds
    ``"targets"``: torchvision's detection targets, a list with one
    ``{"boxes": (K,4) float32 xyxy, "labels": (K,) int64, "area": (K,)
    float32, "iscrowd": (K,) int64}`` per image, whose labels are the
    source's 0-based classes plus ``label_offset`` (default 1: torchvision's
    detection models reserve label 0 for the background). ``area`` is the
    box's unless a ``coco:`` source's ``fields=image_id,iscrowd,area`` gives
    COCO's own ``area`` and ``iscrowd`` (and then also ``"image_id"``), as
    torchvision's COCO evaluation reads them. With ``fields=masks`` each
    target also holds ``"masks"``: (K,H,W) uint8 0/1, one per box, as
    torchvision's Mask R-CNN reads them. A torchvision detection model
    of ``num_classes = classes + 1`` trains on it as it is::

        for batch in loader:   # dtype="float32", layout="NCHW"
            losses = model(list(batch["image"]), batch["targets"])

    ``output="detection"`` yields those as torchvision's reference loops
    read them, ``for images, targets in loader``; ``output="segmentation"``
    yields ``(images, masks)``, the masks as int64 class ids.

    Takes every ``ssdfeed.Loader`` argument, plus the familiar
    ``torch.utils.data.DataLoader`` names:

    Args:
        output: "batch" (default): ``(images, labels)`` for a source of
            images and class labels, else the dict above. "detection":
            ``(images, targets)``, images the (N, C, H, W) batch tensor
            (iterating it gives one image at a time, as the references'
            ``list(image.to(device) for image in images)`` does) and targets
            the list of dicts above; needs a boxes field. Both pair outputs
            default ``dtype`` to "float32" and ``layout`` to "NCHW"
            (torchvision's ToTensor), unless given. "segmentation":
            ``(images, masks)``, masks (N, H, W) int64 (a list when their
            sizes differ); needs exactly one mask field.
        label_offset: int added to the source's 0-based classes in the
            detection targets' ``"labels"`` (default 1: 0 is torchvision's
            background; 0 serves them as the source numbers them). The
            dict's own ``"classes"`` stay 0-based.
        peer_fill: fill this node's cache entry with the torch.distributed
            job's other nodes on a thread, while training runs (as
            ``ssdfeed.distributed.warm``; every rank must pass it). A sample
            not yet here is read as usual and served once. Default False.
        num_workers: worker threads (``workers``); 0 means one per core,
            since no loading happens in the calling thread either way. Give
            ``workers`` or ``num_workers``, not both.
        pin_memory: page-lock batch buffers for asynchronous ``.cuda()``
            copies. Default: True when CUDA is available. True without CUDA
            warns and serves unpinned, as DataLoader does.
        drop_last: DataLoader's: drop a short last batch. DistributedSampler's
            ``drop_last`` (drop the tail that does not split evenly over
            ranks) is ``sampler_drop_last``.
        seed: as ``ssdfeed.Loader``; when not given, drawn from torch's RNG
            (``torch.manual_seed`` decides, as for DataLoader's
            RandomSampler), or 0 with several ranks (DistributedSampler's
            default: every rank must use the same order). Needed with
            ``validation_split``.
        persistent_workers: accepted for compatibility, either value: the
            cache, buffers and open files persist across epochs anyway, and
            worker threads start in microseconds.
        rank_wait_every: K > 0: under torch.distributed, every K steps all
            ranks all-gather the data wait of each of their last K steps
            (one small collective; every rank must pass the same K), so
            ``stats()["ranks"]`` says which rank's input is slowest, and
            rank 0 adds the max over ranks of each step's wait to
            ``ssdfeed_rank_max_wait_seconds_total``. A step's wait is the
            time ``next()`` on this loader took. Default 0 (off).

    ``sampler``, ``batch_sampler``, ``collate_fn``, ``worker_init_fn``,
    ``generator``, ``prefetch_factor``, ``timeout`` and
    ``multiprocessing_context`` raise a ValueError saying what to use
    instead. rank/world_size default to ``torch.distributed``'s when it is
    initialised, else to torchrun's ``RANK``/``WORLD_SIZE`` environment. The
    default worker count is this process's CPUs (affinity, cgroup quota)
    divided by torchrun's ``LOCAL_WORLD_SIZE``. ``.batch_size``,
    ``.drop_last``, ``.dataset`` (with ImageFolder's ``classes``,
    ``class_to_idx``, ``samples``) and ``.sampler`` (``len()``,
    ``set_epoch``) are there as on a DataLoader.
    """

    _public_name = "ssdfeed.torch.Loader"
    _item_loader_name = "ssdfeed.torch.ItemLoader"

    def __init__(self, source, *, pin_memory=None, num_workers=None,
                 persistent_workers=False, output="batch", label_offset=1, peer_fill=False,
                 rank_wait_every=0, **kwargs):
        for name in _NOT_SUPPORTED:
            if name in kwargs:
                raise ValueError(f"ssdfeed.torch.Loader does not take {name}: "
                                 f"{_NOT_SUPPORTED[name]}")
        if num_workers is not None:
            if kwargs.get("workers") is not None:
                raise ValueError("give workers or num_workers, not both")
            if isinstance(num_workers, bool) or not isinstance(num_workers, int) \
                    or num_workers < 0:
                raise ValueError(f"num_workers must be an int >= 0 (0: one thread per core), "
                                 f"not {num_workers!r}")
            kwargs["workers"] = num_workers
        self._seed_drawn = kwargs.get("seed") is None
        kwargs = self._torch_defaults(kwargs)
        if not isinstance(persistent_workers, bool):
            raise ValueError(f"persistent_workers must be True or False, "
                             f"not {persistent_workers!r}")
        if output not in _OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(map(repr, _OUTPUTS))}, "
                             f"not {output!r}")
        if isinstance(label_offset, bool) or not isinstance(label_offset, int):
            raise ValueError(f"label_offset must be an int (1: torchvision's detection "
                             f"labels, 0 the background), not {label_offset!r}")
        if output != "batch" and _item_loader.is_cached_dataset(source):
            raise ValueError(f"output={output!r} needs a source of fields (boxes, masks); "
                             f"a cached dataset's batches have its items' structure")
        if output != "batch":
            # What torchvision's models take: float CHW in [0, 1] (ToTensor).
            kwargs.setdefault("dtype", "float32")
            kwargs.setdefault("layout", "NCHW")
        super().__init__(source, **kwargs)
        if self._items is not None:  # a cached dataset: its items' structure, as tensors
            self._items.tensors = True
            self._cached = source
        self._output = output
        self._label_offset = label_offset
        self._pair = _pair_fields(output, self._fields, self._options.source)
        self._pin = torch.cuda.is_available() if pin_memory is None else bool(pin_memory)
        if self._pin and not torch.cuda.is_available():
            # DataLoader warns and goes on unpinned; every example script passes it.
            warnings.warn("pin_memory=True, but torch has no CUDA device here: batches are "
                          "served unpinned", stacklevel=2)
            self._pin = False
        self._pinned = set()  # addresses this loader registered with cudaHostRegister
        self._dataset = None
        self._peer_fill = self._start_peer_fill(peer_fill)
        self._rank_waits = _RankWaits.make(rank_wait_every, self._options.world_size)

    def _start_peer_fill(self, peer_fill):
        """peer_fill=True: this node's entry is filled with the job's other
        nodes on a thread (ssdfeed.distributed), training meanwhile; a sample
        not yet here is read as usual (the origin, or a claim another job on
        the node holds) and served once."""
        if not isinstance(peer_fill, bool):
            raise ValueError(f"peer_fill must be True or False, not {peer_fill!r}")
        if not peer_fill:
            return None
        if self._items is not None or not self._options.cache.root:
            raise ValueError("peer_fill=True needs a source of samples and a cache root "
                             "(cache=True or a directory), not a cached dataset or cache=False")
        from ssdfeed import distributed
        o = _ssdfeed.WarmOptions()
        o.source = self._options.source_options
        o.prepare = self._options.prepare
        o.cache = self._options.cache
        o.workers = self._options.workers
        return distributed.PeerFill(self._options.source, o, reads=self._first_reads())

    def _first_reads(self):
        """reads(n, rank): the ids rank reads in the coming epoch, so each
        node's origin share of the peer fill is what its ranks read anyway;
        None where loader ids are not sample ids (ids=, a validation split)."""
        lo = self._options
        if lo.id_begin or lo.id_end or lo.validation_split:
            return None

        def reads(n, rank):  # a new loader's first pass is epoch 0
            order = _ssdfeed.epoch_order(n, lo.shuffle, lo.seed, 0, rank, lo.world_size,
                                         lo.sampler_drop_last, lo.shard, lo.rotate_every)
            return np.frombuffer(order, np.uint64)
        return reads

    @property
    def peer_fill(self):
        """The running peer fill (``.done()``, ``.wait()`` gives its result
        dict, as ssdfeed.distributed.warm's), or None."""
        return self._peer_fill

    @staticmethod
    def _torch_defaults(kwargs: dict) -> dict:
        """rank, world_size, workers and seed as DataLoader and torchrun
        would have them, unless given."""
        kwargs = dict(kwargs)
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            kwargs.setdefault("rank", dist.get_rank())
            kwargs.setdefault("world_size", dist.get_world_size())
        elif "RANK" in os.environ and "WORLD_SIZE" in os.environ and \
                "rank" not in kwargs and "world_size" not in kwargs:
            # torchrun set them; init_process_group may come later. Serving
            # every rank the whole dataset would multiply the epoch in silence.
            try:
                kwargs["rank"], kwargs["world_size"] = (int(os.environ["RANK"]),
                                                        int(os.environ["WORLD_SIZE"]))
            except ValueError:
                raise ValueError(f"RANK={os.environ['RANK']!r} and WORLD_SIZE="
                                 f"{os.environ['WORLD_SIZE']!r} (from torchrun) must be ints; "
                                 f"or pass rank= and world_size=") from None
        local = os.environ.get("LOCAL_WORLD_SIZE", "")
        if not kwargs.get("workers") and local.isdigit() and int(local) > 1:
            # Ranks of one node share its CPUs.
            kwargs["workers"] = max(1, _ssdfeed.default_workers() // int(local))
        if kwargs.get("seed") is None:
            if kwargs.get("validation_split"):
                raise ValueError("validation_split needs seed=: the training and validation "
                                 "loaders must draw the same split")
            ws = kwargs.get("world_size", 1)
            if isinstance(ws, int) and ws > 1:
                kwargs["seed"] = 0  # DistributedSampler's default: ranks must agree
            else:
                # As RandomSampler: torch.manual_seed (or nothing) decides.
                kwargs["seed"] = int(torch.empty((), dtype=torch.int64).random_().item())
        return kwargs

    def load_state_dict(self, state: dict) -> None:
        """As ``ssdfeed.Loader.load_state_dict``; a seed drawn from torch's
        RNG (none given) becomes the saved run's, so a resumed job without
        ``torch.manual_seed`` continues the same order."""
        seed = state.get("seed")
        if self._seed_drawn and isinstance(seed, int) and seed != self._options.seed:
            self._unpin_buffers()
            self._impl.stop()
            self._options.seed = seed
            self._impl = _ssdfeed.NativeLoader.open(self._options)
        super().load_state_dict(state)

    @property
    def pin_memory(self) -> bool:
        return self._pin

    @property
    def num_workers(self) -> int:
        """Worker threads actually used."""
        return self._options.workers or _ssdfeed.default_workers()

    @property
    def dataset(self) -> _compat.DatasetView:
        """The samples served (every rank's): ``len()`` as
        ``len(DataLoader.dataset)``, ``read(i)``, and for folder sources
        ImageFolder's ``classes``, ``class_to_idx``, ``samples``,
        ``targets``."""
        if self._items is not None:
            return self._cached
        if self._dataset is None:
            self._dataset = _compat.DatasetView(self._options)
        return self._dataset

    @property
    def sampler(self) -> _compat.SamplerView:
        """DistributedSampler's view of the order: ``len()`` is this rank's
        samples per epoch, ``set_epoch(e)`` chooses the next pass's epoch."""
        return _compat.SamplerView(self)

    def _pin_buffer(self, array) -> None:
        ptr = array.__array_interface__["data"][0]
        if ptr in self._pinned:
            return
        base = array.base if array.base is not None else array
        nbytes = getattr(base, "nbytes", array.nbytes)
        if torch.cuda.cudart().cudaHostRegister(ptr, nbytes, 0) == 0:
            self._pinned.add(ptr)

    def _unpin_buffers(self) -> None:
        # Before the native loader (and its buffer pool) goes away: memory
        # freed while still registered would stay pinned for the process.
        pinned, self._pinned = getattr(self, "_pinned", None), set()
        if pinned:
            cudart = torch.cuda.cudart()
            for ptr in pinned:
                cudart.cudaHostUnregister(ptr)

    def close(self) -> None:
        """Stops the workers and unregisters the pinned batch buffers."""
        super().close()
        self._unpin_buffers()

    def __del__(self):
        try:
            self._unpin_buffers()
        except Exception:  # interpreter shutdown: torch may be gone already
            pass

    def stats(self) -> dict:
        """``ssdfeed.Loader.stats()``, plus with ``rank_wait_every`` the
        ranks' waits: ``stats()["ranks"]`` (see ``_RankWaits.summary``)."""
        out = super().stats()
        if self._rank_waits is not None:
            out["ranks"] = self._rank_waits.summary()
        return out

    def __iter__(self):
        if self._rank_waits is None:
            yield from self._batches()
            return
        # The wait a step pays: the time next() on this loader takes.
        it = self._batches()
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            self._rank_waits.step(time.perf_counter() - t0, self._impl)
            yield batch
        self._rank_waits.flush(self._impl)  # every rank ends its pass at the same step

    def _batches(self):
        if self._items is not None:
            yield from super().__iter__()
            return
        for batch in super().__iter__():
            if isinstance(batch, tuple):
                images, labels = batch
                if self._pin:
                    self._pin_buffer(images)
                yield torch.from_numpy(images), torch.from_numpy(labels)
            else:
                if self._pin:
                    # Only the images: their buffer never changes size, so a
                    # registered range is never freed under the registration.
                    self._pin_buffer(batch["image"])
                out = _tensors(batch, self._fields, self._label_offset)
                yield out if self._pair is None else _as_pair(out, self._output, self._pair)

    @property
    def output(self) -> str:
        """What each batch is: "batch", "detection" or "segmentation"."""
        return self._output

    @property
    def label_offset(self) -> int:
        """Added to the 0-based classes in detection targets' labels."""
        return self._label_offset


class ItemLoader(Loader):
    """``ssdfeed.ItemLoader`` yielding torch tensors: batches of a cached
    dataset (``ssdfeed.cache(dataset)``) with its items' structure, each
    leaf batched as DataLoader's default collate would (ints int64, floats
    float64, arrays stacked into tensors when every item's has one shape).

    Takes ``ssdfeed.ItemLoader``'s arguments (seed None, the default, draws
    one from torch's RNG as DataLoader does) and DataLoader's
    ``pin_memory`` (default: whether CUDA is available), ``num_workers``
    (C++ threads; None or 0: one per core) and ``persistent_workers``.
    """

    _takes_items = True

    def __init__(self, cached, *, pin_memory=None, num_workers=None, persistent_workers=False,
                 batch_size=1, shuffle=False, seed=None, workers=None, prefetch=2, rank=None,
                 world_size=None, drop_last=False, sampler_drop_last=False, shard="global",
                 rotate_every=1, ids=None, validation_split=None, subset=None,
                 on_error="raise", cache_capacity=None, warm_read="auto", fill_write="auto",
                 metrics=True, metrics_port=None, metrics_host="127.0.0.1"):
        _item_loader.require_cached_dataset(cached, "ssdfeed.torch.ItemLoader")
        given = dict(batch_size=batch_size, shuffle=shuffle, seed=seed, workers=workers,
                     prefetch=prefetch, rank=rank, world_size=world_size, drop_last=drop_last,
                     sampler_drop_last=sampler_drop_last, shard=shard,
                     rotate_every=rotate_every, ids=ids, validation_split=validation_split,
                     subset=subset, on_error=on_error, cache_capacity=cache_capacity,
                     warm_read=warm_read, fill_write=fill_write, metrics=metrics,
                     metrics_port=metrics_port, metrics_host=metrics_host)
        # None: Loader's own default (rank and world_size from torchrun's env)
        super().__init__(cached, pin_memory=pin_memory, num_workers=num_workers,
                         persistent_workers=persistent_workers,
                         **{k: v for k, v in given.items()
                            if v is not None or k in ("seed", "workers")})


class _RankWaits:
    """The data wait of each step on every rank, gathered every K steps
    (rank_wait_every): the slowest rank sets the pace of a synchronous job."""

    def __init__(self, every: int):
        self.every = every
        self.pending = []        # this rank's waits since the last gather
        self.steps = 0           # steps gathered
        self.max_wait = 0.0      # sum over gathered steps of the max over ranks
        self.last_max = 0.0      # the max over ranks of the last gathered step
        self.per_rank = []       # each rank's wait summed over the last gather
        self.slowest_rank = None

    @staticmethod
    def make(every, world_size):
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ValueError(f"rank_wait_every must be an int >= 0 (steps between gathers; "
                             f"0: off), not {every!r}")
        if every == 0:
            return None
        if world_size > 1 and not (torch.distributed.is_available()
                                   and torch.distributed.is_initialized()):
            raise ValueError("rank_wait_every needs torch.distributed initialised "
                             "(init_process_group) when world_size > 1")
        return _RankWaits(every)

    def step(self, seconds: float, impl) -> None:
        self.pending.append(seconds)
        if len(self.pending) >= self.every:
            self.flush(impl)

    def flush(self, impl) -> None:
        """Gathers the pending steps' waits of every rank (a collective:
        every rank calls it at the same step)."""
        if not self.pending:
            return
        mine = torch.tensor(self.pending, dtype=torch.float64)
        self.pending = []
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            if dist.get_backend() == "nccl":  # nccl gathers device tensors only
                mine = mine.cuda()
            rows = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
            dist.all_gather(rows, mine)
            waits = torch.stack(rows).cpu()  # (ranks, steps)
            me = dist.get_rank()
        else:
            waits, me = mine.unsqueeze(0), 0
        step_max = waits.max(dim=0).values
        self.steps += waits.shape[1]
        self.max_wait += float(step_max.sum())
        self.last_max = float(step_max[-1])
        totals = waits.sum(dim=1)
        self.per_rank = totals.tolist()
        self.slowest_rank = int(totals.argmax())
        if me == 0:  # one rank adds it, so summing over nodes counts each step once
            impl.record_rank_max_wait(float(step_max.sum()))

    def summary(self) -> dict:
        """steps: steps gathered; max_wait_seconds: the sum over them of the
        slowest rank's wait; last_max_wait_seconds: the slowest rank's wait at
        the last gathered step; wait_seconds: each rank's wait summed over the
        last gather; slowest_rank: the rank with the most of it (None before
        the first gather)."""
        return {"steps": self.steps, "max_wait_seconds": self.max_wait,
                "last_max_wait_seconds": self.last_max, "wait_seconds": list(self.per_rank),
                "slowest_rank": self.slowest_rank}


def _tensor(value):
    """A numpy array as a tensor sharing its memory; a list element-wise;
    bytes (and dtypes torch has no type for) as they are."""
    if isinstance(value, list):
        return [_tensor(v) for v in value]
    if isinstance(value, bytes):
        return value
    try:
        return torch.from_numpy(value)
    except TypeError:  # e.g. a string or big-endian .npy array
        return value


def _tensors(batch: dict, kinds: dict, label_offset: int) -> dict:
    """A numpy dict batch as tensors, plus torchvision's detection targets
    when it holds boxes."""
    out = {name: _tensor(v) for name, v in batch.items()}
    boxes = next((n for n, k in kinds.items() if k == "boxes" and n in out), None)
    if boxes is not None and "targets" not in out:
        classes = next((n for n, k in kinds.items() if k == "classes" and n in out), None)
        counts = out[_compat.box_count_name(kinds)].tolist()
        # What torchvision's COCO evaluation also reads, when the source
        # gives it (coco: fields=image_id,iscrowd,area).
        extra = {n: n for n, k in (("image_id", "label"), ("iscrowd", "classes"),
                                   ("area", "box_floats"))
                 if kinds.get(n) == k and n in out}
        # Instance masks (coco: fields=masks): a (B,Kmax,H,W) padded
        # tensor, or a list of (K,H,W) where the images' sizes differ.
        masks = next((n for n, k in kinds.items() if k == "instance_masks" and n in out), None)
        targets = []
        for i, k in enumerate(counts):
            t = _target(out[boxes][i, :k], None if classes is None else out[classes][i, :k],
                        label_offset)
            if "image_id" in extra:
                t["image_id"] = out["image_id"][i]
            for n in ("iscrowd", "area"):
                if n in extra:
                    t[n] = out[n][i, :k]
            if masks is not None:
                t["masks"] = out[masks][i][:k]
            targets.append(t)
        out["targets"] = targets
    return out


def _target(boxes, classes, label_offset: int) -> dict:
    """One image's target as torchvision's detection models and references
    read it. Labels are shifted: torchvision counts classes from 1, 0 being
    the background, and trains no box regression for a box labelled 0."""
    t = {"boxes": boxes}
    if classes is not None:
        t["labels"] = classes + label_offset if label_offset else classes
    t["area"] = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    # Sources' crowd boxes are left out (COCO iscrowd=1), so none is a crowd.
    t["iscrowd"] = torch.zeros(len(boxes), dtype=torch.int64)
    return t


# What ssdfeed.torch.Loader(output=...) yields per batch.
_OUTPUTS = ("batch", "detection", "segmentation")


def _pair_fields(output: str, kinds: dict, source: str):
    """The field names an (images, targets) or (images, masks) pair is made
    of, or None for output="batch"; a source without them is an error that
    names the fields it has."""
    if output == "batch":
        return None
    image = next((n for n, k in kinds.items() if k == "image"), None)
    want = "boxes" if output == "detection" else "mask"
    found = [n for n, k in kinds.items() if k == want]
    has = ", ".join(f"{n} ({k})" for n, k in kinds.items())
    if image is None or not found:
        raise ValueError(f"output={output!r} needs an image and a {want} field; {source} "
                         f"has {has}")
    if len(found) > 1:
        raise ValueError(f"output={output!r} needs one {want} field; {source} has "
                         f"{len(found)} ({', '.join(found)}): pass fields= to choose one")
    return image, found[0]


def _as_pair(batch: dict, output: str, names) -> tuple:
    """(images, targets) or (images, masks) of a tensor dict batch."""
    image, field = names
    if output == "detection":
        return batch[image], batch["targets"]
    masks = batch[field]
    if isinstance(masks, list):
        return batch[image], [m.long() for m in masks]
    return batch[image], masks.long()
