"""ssdfeed.Loader: shuffled, augmented batches from a cached dataset."""

from __future__ import annotations

import copy
import numbers
import os
from dataclasses import dataclass
from typing import Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ssdfeed import _compat, _item_loader, _moved, _ssdfeed
from ssdfeed.prepare import Prepare, _pair, _positive_pair


def default_cache_dir() -> str:
    """The cache root used when ``cache=True``: ``$SSDFEED_CACHE`` if set,
    else ``~/.cache/ssdfeed``. The CLI uses the same root (one C++ helper
    decides it for both)."""
    return _ssdfeed.default_cache_root()


def _int(name: str, value, lo: int, hint: str = "") -> int:
    """value as an int >= lo, or a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo}{hint}, not {value!r}")
    return int(value)


def _bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, not {value!r}")
    return value


def _float(name: str, value, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not lo < value <= hi:
        raise ValueError(f"{name} values must be numbers in ({lo}, {hi}], not {value!r}")
    return float(value)


@dataclass(frozen=True)
class RandomResizedCrop:
    """Per-epoch augmentation, applied after the cache.

    torchvision's ``RandomResizedCrop`` (same meaning of size, scale and
    ratio), then a horizontal flip with probability 1/2 when ``flip``.
    Randomness is keyed by (seed, epoch, sample id): the same whatever the
    worker count or timing.

    Args:
        size: output side (int) or (H, W), each >= 1. Required.
        scale: (min, max) fraction of the image area kept,
            0 < min <= max <= 1. Default (0.08, 1.0).
        ratio: (min, max) aspect ratio w/h of the crop, 0 < min <= max.
            Default (3/4, 4/3).
        flip: random horizontal flip. Default True.
        min_box_visible: detection boxes are clipped to the crop and
            dropped, with their classes, when less than this fraction of
            their area remains in it; a number in [0, 1]. Default 0.25.

    Every spatial field of a sample (mask, boxes) gets the image's crop and
    flip: masks are resized nearest, so they never hold a class id that is
    not in the source.
    """

    size: Union[int, Tuple[int, int]]
    scale: Tuple[float, float] = (0.08, 1.0)
    ratio: Tuple[float, float] = (3 / 4, 4 / 3)
    flip: bool = True
    min_box_visible: float = 0.25

    def __post_init__(self):
        _positive_pair("RandomResizedCrop size", self.size)
        lo, hi = (_float("RandomResizedCrop scale", x, 0.0, 1.0) for x in self.scale)
        if lo > hi:
            raise ValueError(f"RandomResizedCrop scale needs min <= max, not {self.scale!r}")
        lo, hi = (_float("RandomResizedCrop ratio", x, 0.0, float("inf")) for x in self.ratio)
        if lo > hi:
            raise ValueError(f"RandomResizedCrop ratio needs min <= max, not {self.ratio!r}")
        v = self.min_box_visible
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0.0 <= v <= 1.0:
            raise ValueError(f"RandomResizedCrop min_box_visible must be a number in [0, 1], "
                             f"not {v!r}")


@dataclass(frozen=True)
class Flip:
    """Per-epoch augmentation, applied after the cache: torchvision's
    ``RandomHorizontalFlip(p)``, nothing else. Samples keep their prepared
    shape, so a batch of more than one sample needs one prepared shape
    (``Prepare(resize=...)`` or ``center_crop``). Masks and boxes are
    flipped with the image. Randomness is keyed by (seed, epoch, sample id).

    Args:
        p: probability of the flip, a number in [0, 1]. Default 0.5.
    """

    p: float = 0.5

    def __post_init__(self):
        _probability("Flip p", self.p)


@dataclass(frozen=True)
class ScaleJitterCrop:
    """Per-epoch augmentation, applied after the cache: the torchvision
    segmentation reference's training transform, ``RandomResize(min_size,
    max_size)`` (shorter side drawn uniformly from [min_size, max_size],
    aspect kept), ``RandomHorizontalFlip(flip)``, then ``RandomCrop(size)``
    of the image padded on the bottom and right to at least ``size``.
    Randomness is keyed by (seed, epoch, sample id).

    Args:
        size: crop side (int) or (H, W), each >= 1: every sample's output
            shape. Required.
        min_size, max_size: the shorter side's range in pixels, ints with
            1 <= min_size <= max_size. Required (the reference uses 0.5x
            and 2x its base size: 260 and 1040 for 520).
        flip: probability of the horizontal flip, in [0, 1]. Default 0.5.
        fill: pixel value of the padding, an int in [0, 255]. Default 0.
        mask_fill: mask value of the padding, an int in [0, 65535].
            Default 255 (the reference's ignore index).
        min_box_visible: as RandomResizedCrop's. Default 0.25.

    Masks are resized nearest, flipped, padded with ``mask_fill`` and
    cropped with the image; boxes scaled, flipped, shifted and clipped.
    """

    size: Union[int, Tuple[int, int]]
    min_size: int
    max_size: int
    flip: float = 0.5
    fill: int = 0
    mask_fill: int = 255
    min_box_visible: float = 0.25

    def __post_init__(self):
        _positive_pair("ScaleJitterCrop size", self.size)
        _int("ScaleJitterCrop min_size", self.min_size, 1)
        _int("ScaleJitterCrop max_size", self.max_size, 1)
        if self.min_size > self.max_size:
            raise ValueError(f"ScaleJitterCrop needs min_size <= max_size, not "
                             f"{self.min_size} > {self.max_size}")
        _probability("ScaleJitterCrop flip", self.flip)
        if _int("ScaleJitterCrop fill", self.fill, 0) > 255:
            raise ValueError(f"ScaleJitterCrop fill must be an int in [0, 255], not {self.fill}")
        if _int("ScaleJitterCrop mask_fill", self.mask_fill, 0) > 65535:
            raise ValueError(f"ScaleJitterCrop mask_fill must be an int in [0, 65535], "
                             f"not {self.mask_fill}")
        _probability("ScaleJitterCrop min_box_visible", self.min_box_visible)


def _probability(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], not {v!r}")


def _fill_augment(aug, augment) -> None:
    """The C++ AugmentSpec of an augment object."""
    if not isinstance(augment, (RandomResizedCrop, Flip, ScaleJitterCrop)):
        raise ValueError(f"augment must be an ssdfeed.RandomResizedCrop, Flip or "
                         f"ScaleJitterCrop, or None, not {augment!r}")
    aug.enabled = True
    if isinstance(augment, Flip):
        aug.kind = _ssdfeed.AugmentKind.parse("flip")
        aug.flip_prob = float(augment.p)
        return
    aug.height, aug.width = _pair(augment.size)
    aug.min_box_visible = float(augment.min_box_visible)
    if isinstance(augment, ScaleJitterCrop):
        aug.kind = _ssdfeed.AugmentKind.parse("scale_jitter_crop")
        aug.jitter_min, aug.jitter_max = int(augment.min_size), int(augment.max_size)
        aug.flip_prob = float(augment.flip)
        aug.fill, aug.mask_fill = int(augment.fill), int(augment.mask_fill)
        return
    aug.scale_min, aug.scale_max = (float(x) for x in augment.scale)
    aug.ratio_min, aug.ratio_max = (float(x) for x in augment.ratio)
    aug.flip = bool(augment.flip)


def _channel_values(name: str, values, channels: int) -> Tuple[float, float, float]:
    vals = [float(x) for x in values]
    if len(vals) == 1 or (channels == 1 and len(vals) >= 1):
        vals = vals[:1] * 3
    if len(vals) != 3:
        raise ValueError(f"{name} needs 1 or {channels} values (one per channel), not {values!r}")
    if name == "std" and any(v == 0 for v in vals):
        raise ValueError(f"std values must be non-zero, not {values!r}")
    return tuple(vals)


def _spelling(value) -> str:
    """The text of an enum keyword; the C++ spelling table checks it (one
    check, whose ValueError names the allowed values)."""
    return value if isinstance(value, str) else repr(value)


def _cache_root(cache) -> str:
    if cache is True:
        return default_cache_dir()
    if cache is False or cache is None:
        return ""
    if isinstance(cache, (str, os.PathLike)):
        root = os.fspath(cache)
        if root:
            return root
    raise ValueError(f"cache must be True (the default root), False (no cache) or a "
                     f"directory path, not {cache!r}")


def _field_specs(fields) -> list:
    """``fields={"image": "jpg", "mask": "seg.png", "depth": ("array", "npy")}``
    as the native [(name, kind, key), ...]: a bare key's kind is "auto",
    which the layout resolves from the name, then the key ("seg.png" a
    mask, "cls" a label, "npy" an array)."""
    if fields is None:
        return []
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(f"fields must be a non-empty dict {{name: key}} (e.g. {{'image': "
                         f"'jpg', 'mask': 'seg.png'}}) or None, not {fields!r}")
    kinds = _ssdfeed.field_kinds()
    out = []
    for name, value in fields.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"fields: names must be non-empty strings, not {name!r}")
        if isinstance(value, str):
            kind, key = "auto", value
        elif isinstance(value, (tuple, list)) and len(value) == 2 \
                and all(isinstance(x, str) for x in value):
            kind, key = value
            if kind not in kinds:
                raise ValueError(f"fields[{name!r}]: kind must be one of {kinds}, not {kind!r}")
        else:
            raise ValueError(f"fields[{name!r}] must be a key string or a (kind, key) pair, "
                             f"not {value!r}")
        out.append((name, kind, key))
    return out


def _fill_source_side(o, source, cache, prepare, on_error, image_key, label_key,
                      fields=None, stems=None) -> None:
    """The options of o that pick the cache entry (source, cache root,
    preparation, source keys and fields): shared with ssdfeed.ray's cache
    reports."""
    o.source = os.fspath(source)
    o.cache.root = _cache_root(cache)
    if not isinstance(prepare, Prepare):
        raise ValueError(f"prepare must be an ssdfeed.Prepare, not {prepare!r}")
    o.prepare = prepare._spec()
    o.source_options.on_error = _ssdfeed.OnError.parse(_spelling(on_error))
    o.source_options.image_key = image_key or ""
    o.source_options.label_key = label_key or ""
    o.source_options.fields = _field_specs(fields)
    o.source_options.stems = _stems(stems)


def _stems(stems) -> list:
    """A files: source's split as a list of stems (None: every stem)."""
    if stems is None:
        return []
    if isinstance(stems, (str, bytes)) or not all(isinstance(s, str) for s in stems):
        raise ValueError(f"stems must be a list of str (the stems of a split, e.g. the lines "
                         f"of VOC's ImageSets/Segmentation/train.txt) or None, not {stems!r}")
    stems = list(stems)
    if not stems:
        raise ValueError("stems is empty: pass None to serve every stem")
    return stems


class Loader:
    """Iterates numpy batches of a dataset, preparing each sample once into
    a cache on local SSD shared by every job: ``(images, labels)`` for a
    source of images and class labels, else a dict of its fields (see
    "Sample fields" in docs/python.md).

    A cached dataset (``ssdfeed.cache(dataset)``) is ``ItemLoader``'s
    source; ``Loader(cached)`` still serves one for this release, with a
    DeprecationWarning (docs/migrating.md).

    Args:
        source: ``folder:DIR`` (ImageFolder: DIR/<class>/<image>),
            ``tfrecord:GLOB`` or ``tar:GLOB`` (WebDataset shards; brace
            ranges such as ``{000..099}`` allowed), ``files:ROOT?FIELD=
            PATTERN&...`` (files paired by ``{stem}``, e.g. Pascal VOC) or
            ``coco:IMAGES_DIR?annotations=FILE.json``. A bare directory
            means ``folder:DIR``.
        fields: the fields each sample gives, ``{name: key}``: for tar
            sources WebDataset member extensions, for tfrecord feature
            keys, e.g. ``{"image": "jpg", "mask": "seg.png", "label": "cls",
            "depth": "npy"}``. A field's kind follows from its name and key
            ("mask"/"seg*" names and "seg.png" keys a mask, "label"/"cls" a
            class label, "npy" an array, anything else bytes); ``{name:
            (kind, key)}`` says it. None (default): the layout's own fields.
            ``loader.fields`` gives the kinds the source resolved.
        stems: a ``files:`` source's split: serve only these stems (e.g.
            ``open("VOC2012/ImageSets/Segmentation/train.txt").read().split()``),
            still in sorted stem order; a stem without its files is an
            error naming it. The URI's ``split=FILE`` (relative to ROOT)
            does the same from the file. None (default): every stem found.
        cache: where prepared samples are kept. ``True`` (default): the
            default root, ``$SSDFEED_CACHE`` then ``~/.cache/ssdfeed``, as the
            CLI; a path: that root; ``False`` (or ``None``): no cache, every
            epoch prepares from the origin.
        prepare: the cached, deterministic preparation. Default
            ``Prepare()``: full-size RGB (the default of every tool; pass
            ``Prepare(resize_short=256)`` to cache ImageNet-sized images).
        augment: a ``RandomResizedCrop``, ``Flip`` or ``ScaleJitterCrop``
            applied every epoch after the cache, or None (default): samples
            served as prepared.
        batch_size: samples per batch, int >= 1. Default 1.
        shuffle: a fresh permutation per epoch from (seed, epoch). Default
            False (canonical order).
        seed: int >= 0. Default 0: the same order on every run, as
            DistributedSampler (``ssdfeed.torch.Loader`` follows torch's
            RNG instead when no seed is given). Also picks the
            validation split.
        workers: worker threads, int >= 1, or None/0 (default): one per core.
        prefetch: batches prepared ahead of the consumer, int >= 1. Default 2.
        rank, world_size: this process's share, with PyTorch
            DistributedSampler semantics (0 <= rank < world_size). Default 0, 1
            (with a warning when torchrun's WORLD_SIZE says there are more
            ranks: ssdfeed.torch.Loader reads them).
        drop_last: DataLoader's ``drop_last``: drop the epoch's last batch
            when it is short. Default False.
        sampler_drop_last: DistributedSampler's ``drop_last``: drop the
            tail of the epoch that does not split evenly over ranks, else
            pad it by repeating samples from the start. Default False.
        shard: how samples are split over ranks from epoch to epoch.
            ``"global"`` (default): a fresh global permutation every epoch,
            dealt over ranks (DistributedSampler), so every node ends up
            reading, and caching, the whole dataset. ``"sticky"``: each rank
            keeps the same 1/world_size of the samples (a fixed partition
            from ``seed``) every epoch, shuffled within it, so a node caches
            only its ranks' shards. ``"rotate"``: sticky shards that move to
            the next rank every ``rotate_every`` epochs. See
            docs/multi-node.md for the statistical trade-off.
        rotate_every: epochs between shard moves with ``shard="rotate"``,
            int >= 1. Default 1.
        ids: serve only these source ids, a non-empty ``range`` with step 1
            (one read task of a distributed engine), or None (default): all.
        validation_split, subset: Keras' names: serve one part of a seeded
            random split of the samples (after ``ids``): ``subset=
            "validation"`` holds ``floor(validation_split * n)`` of them,
            ``"training"`` the rest; the parts depend on ``seed`` only, so
            two loaders with the same seed never overlap. Default None (no
            split).
        on_error: ``"raise"`` (default): a bad sample raises, naming its
            file; ``"skip"``: it is counted in ``stats()["skipped"]`` and
            replaced in place by the next good sample after it in this
            rank's plan of the epoch, so every rank serves exactly
            ``len(loader)`` batches (DDP ranks stay in step).
        dtype: ``"uint8"`` (default, pixels as stored), ``"float32"`` or
            ``"float16"`` (``(pixel * scale / 255 - mean) / std``).
        layout: ``"NHWC"`` (default) or ``"NCHW"``.
        scale: float pixels span [0, scale] before mean/std: 1.0 (default,
            torchvision's ToTensor) or 255.0 (Keras). Only for float dtypes.
        mean, std: per-channel normalisation for float dtypes, in the units
            of ``scale`` (1 value or one per channel; std non-zero): output
            is ``(pixel * scale / 255 - mean) / std``. Default 0 and 1. An
            error with uint8, and with values that look like the other
            scale's (mean 123 with scale 1).
        image_key, label_key: tfrecord feature / tar member extension of the
            image and label; None: the defaults tried in order
            (``image/encoded`` + ``image/class/label``; ``jpg``/``png`` +
            ``cls``).
        cache_capacity: most bytes the cache root may hold, int >= 1, or
            None (default): the bytes it holds now plus 80% of free space.
        group_shared: the cache root is shared by the members of its group
            (a 2770 directory): entries are created 02770/0660 and entries
            that members of our groups made are used, as the CLI's
            ``--group-shared``. Default False (a group-writable root is then
            refused). With a cached dataset, the dataset's own setting
            (``ssdfeed.cache(..., group_shared=)``) is used.
        warm_read: how cached records are read: ``"auto"`` (default)
            reads with O_DIRECT through io_uring when the entry is larger
            than the memory available (every epoch reads the device) and
            through the page cache otherwise; ``"buffered"`` or ``"direct"``
            force one.
        fill_write: how the cold epoch writes records: ``"auto"``
            (default) writes with O_DIRECT from one writer thread when the
            entry will not fit in the memory available, and through the
            page cache from the workers otherwise (the second epoch is then
            served from RAM); ``"buffered"`` or ``"direct"`` force one.

    Iteration: each pass (``for batch in loader``) is one epoch. A pass
    without a ``set_epoch()`` call before it takes the next epoch (0, 1,
    2, ...), so ``shuffle=True`` reshuffles every pass; calling
    ``set_epoch(e)`` before each pass, as with DistributedSampler, uses
    exactly epoch e. Either way the order is a pure function of (seed,
    epoch).

    Arrays are views of a pooled buffer (no copy); holding on to them is
    safe: a buffer is recycled only once nothing refers to it.

    Batches of a source with other fields (masks, boxes, arrays, bytes) are
    dicts: ``"image"`` (N,H,W,C) as above, ``"label"`` (N,) when the source
    has one, ``"mask"`` (N,H,W), ``"boxes"`` (N,B,4) float32 xyxy pixels of
    the served image and ``"classes"`` (N,B) int64, padded to the batch's
    most boxes B (boxes with 0, classes with -1), with ``"num_boxes"`` (N,);
    arrays stacked (N, ...) when every sample's has one shape and dtype,
    else a list of arrays; bytes as a list of ``bytes``. ``fields`` and
    ``classic`` tell which form a loader gives.
    """

    # A cached dataset (ssdfeed.cache) is ItemLoader's source: this
    # signature's, with a DeprecationWarning, for one release.
    _takes_items = False
    _public_name = "ssdfeed.Loader"
    _item_loader_name = "ssdfeed.ItemLoader"

    # An opened source (_ssdfeed.Source) to read instead of listing `source`
    # again: ssdfeed.ray's read tasks share one per process (a subclass sets
    # it). None: the loader opens `source` itself.
    _shared_source = None

    def __init__(self, source: Union[str, os.PathLike], *,
                 cache: Union[str, os.PathLike, bool, None] = True,
                 prepare: Prepare = Prepare(), augment=None,
                 batch_size: int = 1, shuffle: bool = False, seed: int = 0,
                 workers: Optional[int] = None, prefetch: int = 2, rank: int = 0,
                 world_size: Optional[int] = None, drop_last: bool = False, sampler_drop_last: bool = False,
                 shard: str = "global", rotate_every: int = 1, ids: Optional[range] = None,
                 validation_split: Optional[float] = None, subset: Optional[str] = None,
                 on_error: str = "raise", dtype: str = "uint8", layout: str = "NHWC",
                 scale: float = 1.0,
                 mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None,
                 image_key: Optional[str] = None, label_key: Optional[str] = None,
                 cache_capacity: Optional[int] = None, group_shared: bool = False,
                 warm_read: str = "auto",
                 fill_write: str = "auto", metrics: bool = True,
                 metrics_port: Optional[int] = None, metrics_host: str = "127.0.0.1",
                 fields: Optional[Mapping[str, Union[str, Tuple[str, str]]]] = None,
                 stems: Optional[Sequence[str]] = None):
        o = _ssdfeed.LoaderOptions()
        self._items = None
        if _item_loader.is_cached_dataset(source):
            if not self._takes_items:  # the one release it keeps working
                _moved.warn(f"{self._public_name}(cached dataset)",
                            f"{self._item_loader_name}(cached dataset)", stacklevel=4)
            # ssdfeed.cache(dataset): its items, served by the C++ workers.
            _item_loader.refuse_image_options({
                "prepare": None if prepare == Prepare() else prepare, "augment": augment,
                "dtype": None if dtype == "uint8" else dtype,
                "layout": None if layout == "NHWC" else layout,
                "scale": None if scale == 1.0 else scale, "mean": mean, "std": std,
                "image_key": image_key, "label_key": label_key, "fields": fields,
                "stems": stems})
            if cache_capacity is not None:
                _int("cache_capacity", cache_capacity, 1)
            if group_shared and not getattr(source, "_group_shared", False):
                raise ValueError("ssdfeed.Loader(cached dataset) uses the dataset's own cache: "
                                 "pass group_shared=True to ssdfeed.cache(dataset, ...)")
            _item_loader.fill_options(o, source, cache, cache_capacity, _spelling(on_error))
            self._items = _item_loader.ItemBatches(source, skip=_spelling(on_error) == "skip")
        else:
            _fill_source_side(o, source, cache, prepare, on_error, image_key, label_key, fields,
                              stems)
            if self._shared_source is not None:
                o.source_object = self._shared_source
            o.cache.capacity_bytes = 0 if cache_capacity is None else _int("cache_capacity",
                                                                            cache_capacity, 1)
            o.cache.group_shared = _bool("group_shared", group_shared)
        o.cache.warm_read = _ssdfeed.WarmRead.parse(_spelling(warm_read))
        o.cache.fill_write = _ssdfeed.FillWrite.parse(_spelling(fill_write))
        # metrics: publish counters for `ssdfeed serve-metrics`; metrics_port:
        # also serve this process's own /metrics on metrics_host:metrics_port.
        o.metrics = bool(metrics)
        o.metrics_port = _int("metrics_port", metrics_port or 0, 0)
        o.metrics_host = str(metrics_host)
        if augment is not None:
            _fill_augment(o.augment, augment)
        o.batch_size = _int("batch_size", batch_size, 1)
        o.shuffle = bool(shuffle)
        o.seed = _int("seed", seed, 0)
        o.workers = 0 if workers is None else _int("workers", workers, 0,
                                                   " (0 or None: one per core)")
        o.prefetch = _int("prefetch", prefetch, 1)
        o.world_size = _int("world_size", _compat.default_world_size(world_size), 1)
        o.rank = _int("rank", rank, 0)
        if o.rank >= o.world_size:
            raise ValueError(f"rank must be in [0, world_size={o.world_size}), not {rank!r}")
        o.drop_last = bool(drop_last)
        o.sampler_drop_last = bool(sampler_drop_last)
        o.shard = _ssdfeed.ShardMode.parse(_spelling(shard))
        o.rotate_every = _int("rotate_every", rotate_every, 1)
        if ids is not None:
            if not isinstance(ids, range) or ids.step != 1 or not 0 <= ids.start < ids.stop:
                raise ValueError(f"ids must be a non-empty range(begin, end), 0 <= begin, "
                                 f"step 1, or None, not {ids!r}")
            o.id_begin, o.id_end = ids.start, ids.stop
        o.validation_split, o.validation_subset = _compat.split_options(validation_split, subset)
        o.split_seed = o.seed
        o.output.dtype = _ssdfeed.DType.parse(_spelling(dtype))
        o.output.layout = _ssdfeed.Layout.parse(_spelling(layout))
        for name, values in (("mean", mean), ("std", std)):
            if values is not None:
                if dtype == "uint8":
                    raise ValueError(f"{name} applies only to float output: pass "
                                     f"dtype='float32' or 'float16' (dtype is 'uint8')")
                _channel_values(name, values, o.prepare.channels)
        self._scale = _compat.check_scale(scale, dtype, mean, std)
        for name, values in zip(("mean", "std"), _compat.native_mean_std(self._scale, mean, std)):
            if values is not None:
                setattr(o.output, name, _channel_values(name, values, o.prepare.channels))
        self._options = o
        self._dtype, self._layout = dtype, layout
        self._impl = _ssdfeed.NativeLoader.open(o)
        self._fields = {name: kind for name, kind, _ in self._impl.fields()}
        if self._items is not None:
            _item_loader.track(self)
        self._epoch_chosen = False  # set_epoch / load_state_dict since the last pass began
        self._unfinished = False    # a pass was left before its end
        self._pass_start = None     # state_dict() when the last pass began
        self._cache_logged = False

    # -- iteration --------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Chooses the epoch (permutation and augmentation) of the next
        pass, which starts at its first batch. int >= 0."""
        self._impl.set_epoch(_int("epoch", epoch, 0))
        self._epoch_chosen = True

    def __iter__(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        """One pass: the chosen epoch, else the one after the last pass."""
        yield from self.start_pass()

    def start_pass(self, *, replay_left_pass: bool = False) -> Iterator:
        """Starts a pass now (``iter(loader)`` starts one at its first
        ``next``) and returns its batches: the chosen epoch, else the one
        after the last pass. ``replay_left_pass=True`` (default False):
        when the last pass was left before its end and no epoch was chosen
        since, start where that pass began instead, so a pass that only
        previewed a batch (tf's ``ds.take(1)``) uses up no epoch; what
        ``ssdfeed.tf.dataset``'s passes do."""
        if replay_left_pass and self._pass_start is not None and self._unfinished \
                and not self._epoch_chosen \
                and self.state_dict()["batches_consumed"] < len(self):
            self.load_state_dict(self._pass_start)
        self._begin_pass()
        self._pass_start = self.state_dict()
        return self._rest_of_pass()

    def _begin_pass(self) -> None:
        impl = self._impl
        if self._unfinished and not self._epoch_chosen:
            # The last pass was left early: a new pass is the next epoch.
            impl.set_epoch(impl.state()["epoch"] + 1)
        self._epoch_chosen = False
        self._unfinished = True
        if not self._cache_logged:
            self._cache_logged = True
            _compat.log_cold_cache(self._options,
                                   _compat.served_count(self._options, impl.source_size()))

    def _rest_of_pass(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        impl = self._impl
        while True:
            batch = impl.next()
            if batch is None:
                # The native loader has moved on to the next epoch by itself.
                self._unfinished = False
                return
            yield batch if self._items is None else self._items.convert(batch)

    def __len__(self) -> int:
        """Batches per epoch for this rank (also with on_error="skip": a
        skipped sample is replaced, never dropped). After loading a merged
        state, the batches left of the resumed epoch until it ends."""
        return self._impl.num_batches()

    @property
    def num_samples(self) -> int:
        """Samples per epoch for this rank."""
        return self._impl.num_samples()

    @property
    def batch_size(self) -> int:
        return self._options.batch_size

    @property
    def drop_last(self) -> bool:
        return self._options.drop_last

    @property
    def sampler_drop_last(self) -> bool:
        return self._options.sampler_drop_last

    @property
    def scale(self) -> float:
        """Float pixels span [0, scale] before mean/std."""
        return self._scale

    @property
    def source(self) -> str:
        """The source URI."""
        return self._options.source

    @property
    def epoch(self) -> int:
        """The epoch the next (or current) pass uses."""
        return int(self._impl.state()["epoch"])

    @property
    def sample_shape(self) -> Tuple[Optional[int], Optional[int], int]:
        """(H, W, C) of every sample, None where it varies."""
        s = _ssdfeed.served_sample_shape(self._options.prepare, self._options.augment)
        return (s.height or None, s.width or None, s.channels)

    @property
    def fields(self) -> Dict[str, str]:
        """The source's fields, ``{name: kind}`` in order (kinds: "image",
        "mask", "boxes", "classes", "box_floats", "instance_masks", "label",
        "array", "bytes"). Batches carry ``num_boxes`` beside boxes too."""
        return dict(self._fields)

    @property
    def classic(self) -> bool:
        """True when batches are ``(images, labels)`` tuples (a source of
        images and class labels only), False when they are dicts."""
        return list(self._fields.values()) == ["image", "label"]

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def layout(self) -> str:
        return self._layout

    def close(self) -> None:
        """Stops the workers (also done when the loader is collected)."""
        self._impl.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- numbers and state ---------------------------------------------------
    def peek(self) -> dict:
        """One batch of the source's first sample, read and prepared from the
        origin with this loader's options (no cache entry is made, no epoch
        used): the fields, dtypes and inner shapes its batches hold, for an
        adapter that must declare them before the first batch (tf)."""
        o = copy.copy(self._options)
        o.cache.root = ""
        o.batch_size, o.workers, o.shuffle, o.metrics = 1, 1, False, False
        o.rank, o.world_size, o.validation_split = 0, 1, 0.0
        o.id_end = min(o.id_end or self._impl.source_size(), o.id_begin + 64)
        probe = _ssdfeed.NativeLoader.open(o)
        try:
            return probe.next()
        finally:
            probe.stop()

    def stats(self) -> dict:
        """cache_hits, cache_misses, cache_bytes, origin_bytes, decode_errors,
        corrupt_records, wait_seconds and more (cumulative): the numbers this
        job publishes to `ssdfeed serve-metrics` (docs/metrics.md maps each
        key to its Prometheus metric)."""
        return self._impl.stats().as_dict()

    def state_dict(self) -> dict:
        """Where iteration stands (epoch, batches consumed, plan position)
        for exact resume with load_state_dict()."""
        return dict(self._impl.state())

    def load_state_dict(self, state: dict) -> None:
        """The next pass continues exactly after the saved batch. The loader
        must have the same seed, rank, world_size, batch_size, shard (and
        rotate_every) and dataset; a state from ``merge_states()`` loads
        into any rank and world_size and serves this rank's part of the
        rest of the interrupted epoch."""
        self._impl.load_state(dict(state))
        self._epoch_chosen = True


class ItemLoader(Loader):
    """Iterates batches of a cached dataset (what ``ssdfeed.cache(dataset)``
    returns) with the C++ workers: items read, checked and collated with no
    Python per item; a missing one is computed by the dataset and stored,
    as ``cached[i]`` would. Batches have the structure of item 0, each leaf
    replaced by its batch (docs/python.md, "The C++ loader over a cached
    dataset").

    Args:
        cached: what ``ssdfeed.cache(dataset, ...)`` returned; its cache
            root, capacity and group setting are the entry's.
        batch_size, shuffle, seed, workers, prefetch, rank, world_size,
        drop_last, sampler_drop_last, shard, rotate_every, ids,
        validation_split, subset, warm_read, fill_write, metrics,
        metrics_port, metrics_host: as ``Loader``'s, with its defaults.
        on_error: ``"raise"`` (default) or ``"skip"``: an item whose
            ``__getitem__`` raised is counted in ``stats()["skipped"]`` and
            replaced by the next good one.
        cache_capacity: most bytes the entry's root may hold, int >= 1, or
            None (default): the cached dataset's own.

    It takes no image options (prepare, augment, dtype, ...): items are
    served as the dataset gave them.
    """

    _takes_items = True

    def __init__(self, cached, *, batch_size: int = 1, shuffle: bool = False, seed: int = 0,
                 workers: Optional[int] = None, prefetch: int = 2, rank: int = 0,
                 world_size: Optional[int] = None, drop_last: bool = False,
                 sampler_drop_last: bool = False, shard: str = "global", rotate_every: int = 1,
                 ids: Optional[range] = None, validation_split: Optional[float] = None,
                 subset: Optional[str] = None, on_error: str = "raise",
                 cache_capacity: Optional[int] = None, warm_read: str = "auto",
                 fill_write: str = "auto", metrics: bool = True,
                 metrics_port: Optional[int] = None, metrics_host: str = "127.0.0.1"):
        _item_loader.require_cached_dataset(cached, type(self).__name__)
        super().__init__(cached, batch_size=batch_size, shuffle=shuffle, seed=seed,
                         workers=workers, prefetch=prefetch, rank=rank, world_size=world_size,
                         drop_last=drop_last, sampler_drop_last=sampler_drop_last, shard=shard,
                         rotate_every=rotate_every, ids=ids, validation_split=validation_split,
                         subset=subset, on_error=on_error, cache_capacity=cache_capacity,
                         warm_read=warm_read, fill_write=fill_write, metrics=metrics,
                         metrics_port=metrics_port, metrics_host=metrics_host)


def merge_states(states: Sequence[dict]) -> dict:
    """Merges the ``state_dict()`` of every rank of one job into one state
    that ``load_state_dict()`` takes on a loader of any world size (elastic
    resume). The ranks may have stopped at different batches (a rank that
    finished the epoch may be at the next one's start); the rest of the
    interrupted epoch is dealt over the new ranks in equal counts, so every
    sample is read once over the old ranks' batches and the new ones' (only
    padding for equal counts repeats, at most new world_size - 1 samples).
    The epochs after it are split over the new world as usual."""
    states = list(states)
    for i, s in enumerate(states):
        if not isinstance(s, dict):
            raise TypeError(f"merge_states: state {i} is a {type(s).__name__}, not the dict "
                            f"state_dict() returns")
    return _ssdfeed.merge_states(states)
