"""What makes ssdfeed a drop-in for DataLoader and image_dataset_from_directory:
the value scale of float output, the seeded validation split, the
``.dataset`` / ``.sampler`` views and the one-time cache log. Kept apart from
loader.py so that the core loader stays short."""

from __future__ import annotations

import logging
import numbers
import os
import shutil
import sys
import warnings
from typing import List, Optional, Sequence, Tuple

from ssdfeed import _ssdfeed

log = logging.getLogger("ssdfeed")

_SUBSETS = ("training", "validation")


def check_scale(scale, dtype: str, mean, std) -> float:
    """scale as a float; refuses mean/std that look like the other scale's
    values (an unchanged torchvision or Keras script passing them would train
    on inputs off by 255 in silence)."""
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not scale > 0:
        raise ValueError(f"scale must be a number > 0 (float pixels span [0, scale]), "
                         f"not {scale!r}")
    scale = float(scale)
    if dtype == "uint8":
        if scale != 1.0:
            raise ValueError("scale applies only to float output: pass dtype='float32' or "
                             "'float16' (dtype is 'uint8')")
        return scale
    given = [float(v) for vals in (mean, std) if vals is not None for v in vals]
    if not given:
        return scale
    identity = all(float(v) == 0 for v in (mean or ())) and all(float(v) == 1 for v in (std or ()))
    if scale <= 1.0 and max(abs(v) for v in given) > 1.5:
        raise ValueError(
            f"mean={mean!r}, std={std!r} look like 0-255 pixel values, but float output is "
            f"in [0, {scale:g}]: divide them by 255, or pass scale=255 (Keras' [0, 255])")
    if scale >= 255.0 and not identity and max(abs(v) for v in given) <= 1.0:
        raise ValueError(
            f"mean={mean!r}, std={std!r} look like [0, 1] values, but float output is in "
            f"[0, {scale:g}]: multiply them by {scale:g}, or pass scale=1.0 "
            f"(torchvision's [0, 1])")
    return scale


def native_mean_std(scale: float, mean, std) -> Tuple[Optional[list], Optional[list]]:
    """The native output computes (pixel / 255 - m) / s; with values in
    [0, scale] and mean/std in those units, m = mean / scale and
    s = std / scale."""
    if scale == 1.0:
        return mean, std
    m = [float(v) / scale for v in mean] if mean is not None else None
    s = [float(v) / scale for v in std] if std is not None else [1.0 / scale]
    return m, s


# The kinds whose rows are a sample's boxes (or one value per box), padded in
# a batch to its most boxes and cut back by the box count.
PER_BOX_KINDS = ("boxes", "classes", "box_floats", "instance_masks")


def box_count_name(kinds: dict) -> Optional[str]:
    """The batch key of the per-sample box count that goes with a source's
    fields ``{name: kind}``, or None without a boxes field: "num_boxes" for
    a field named "boxes", else "num_" + its name. The loader writes one
    count, after its first boxes field, which every per-box field (classes,
    box_floats, instance_masks) shares; the C++ side's BoxCountName
    (src/pipeline/batch_fields.cc) names it the same way."""
    boxes = next((n for n, k in kinds.items() if k == "boxes"), None)
    if boxes is None:
        return None
    return "num_boxes" if boxes == "boxes" else "num_" + boxes


def default_world_size(world_size):
    """world_size, or 1 when None: with a warning when torchrun says there
    are several ranks, since this loader would then serve each of them the
    whole dataset."""
    if world_size is not None:
        return world_size
    ws = os.environ.get("WORLD_SIZE", "")
    if ws.isdigit() and int(ws) > 1 and "RANK" in os.environ:
        warnings.warn(f"WORLD_SIZE={ws} (torchrun), but this loader was given no rank/"
                      f"world_size: it serves this rank the whole dataset. Pass rank= and "
                      f"world_size= (or use ssdfeed.torch.Loader, which reads them)",
                      stacklevel=4)
    return 1


def split_options(validation_split, subset) -> Tuple[float, bool]:
    """(fraction, validation part?) from Keras' validation_split/subset."""
    if validation_split is None or validation_split == 0:
        if subset is not None:
            raise ValueError(f"subset={subset!r} needs validation_split (the fraction held "
                             f"out for validation), e.g. validation_split=0.2")
        return 0.0, False
    if isinstance(validation_split, bool) or not isinstance(validation_split, numbers.Real) \
            or not 0 < validation_split < 1:
        raise ValueError(f"validation_split must be a number in (0, 1), not "
                         f"{validation_split!r}")
    if subset == "both":
        raise ValueError("subset='both' gives two datasets: ssdfeed.tf.dataset takes it; "
                         "with a Loader make two, subset='training' and subset='validation', "
                         "with the same validation_split and seed")
    if subset not in _SUBSETS:
        raise ValueError(f"with validation_split, subset must be 'training' or 'validation', "
                         f"not {subset!r}")
    return float(validation_split), subset == "validation"


def served_ids(o, source_size: int) -> Sequence[int]:
    """The source ids a loader's options serve (all ranks together)."""
    begin, end = o.id_begin, o.id_end or source_size
    if o.validation_split > 0:
        return _ssdfeed.split_ids(begin, end, o.validation_split, o.split_seed,
                                  o.validation_subset)
    return range(begin, end)


def served_count(o, source_size: int) -> int:
    """len(served_ids(o, source_size)), without listing them."""
    m = (o.id_end or source_size) - o.id_begin
    if o.validation_split <= 0:
        return m
    nval = int(o.validation_split * m)
    return nval if o.validation_subset else m - nval


def folder_classes(source: str) -> Optional[List[str]]:
    """The class names of a folder source, as torchvision's find_classes and
    the native folder source find them (sorted directories); None for other
    sources, which carry labels without names."""
    if source.startswith("folder:"):
        root = source[len("folder:"):].split("?", 1)[0]
    elif "://" not in source and ":" not in source.split("/", 1)[0]:
        root = source
    else:
        return None
    if not os.path.isdir(root):
        return None
    return sorted(e.name for e in os.scandir(root) if e.is_dir())


class DatasetView:
    """``loader.dataset``: the samples a loader serves (every rank's), with
    the ImageFolder attributes DataLoader users read.

    ``len()`` is the number of samples (after ``ids`` and the validation
    split), as ``len(DataLoader(...).dataset)``; ``read(i)`` /
    ``self[i]`` give sample i's encoded bytes and label; ``classes``,
    ``class_to_idx``, ``samples`` ((path, label) pairs), ``targets`` and
    ``imgs`` are there for folder sources (None for others, whose labels
    have no names); ``source`` is the ``ssdfeed.Source``."""

    def __init__(self, options):
        self._o = options
        self._source = None
        self._ids = None
        self._samples = None

    @property
    def source(self):
        if self._source is None:
            # As the loader opened it: the shard index from the cache, no shard read.
            self._source = _ssdfeed.open_loader_source(self._o)
        return self._source

    @property
    def uri(self) -> str:
        return self.source.uri

    @property
    def ids(self) -> Sequence[int]:
        """The source ids served, ascending."""
        if self._ids is None:
            self._ids = served_ids(self._o, len(self.source))
        return self._ids

    def __len__(self) -> int:
        return len(self.ids)

    def read(self, i: int):
        return self.source.read(self.ids[i])

    __getitem__ = read

    @property
    def classes(self) -> Optional[List[str]]:
        return folder_classes(self._o.source)

    @property
    def class_to_idx(self) -> Optional[dict]:
        c = self.classes
        return None if c is None else {name: i for i, name in enumerate(c)}

    @property
    def samples(self) -> Optional[List[Tuple[str, int]]]:
        """(path, class index) of each sample served, as ImageFolder.samples."""
        index = self.class_to_idx
        if index is None:
            return None
        if self._samples is None:
            src = self.source
            paths = (src.describe(i) for i in self.ids)
            self._samples = [(p, index[os.path.basename(os.path.dirname(p))]) for p in paths]
        return self._samples

    imgs = samples

    @property
    def targets(self) -> Optional[List[int]]:
        s = self.samples
        return None if s is None else [label for _, label in s]


class SamplerView:
    """``loader.sampler``: DistributedSampler's names over the loader's own
    order. ``len()`` is this rank's samples per epoch (``num_samples``);
    ``set_epoch(e)`` is ``loader.set_epoch(e)``."""

    def __init__(self, loader):
        self._loader = loader

    def __len__(self) -> int:
        return self._loader.num_samples

    @property
    def num_samples(self) -> int:
        return self._loader.num_samples

    @property
    def total_size(self) -> int:
        return self._loader.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        self._loader.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self._loader.epoch

    @property
    def num_replicas(self) -> int:
        return self._loader._options.world_size

    @property
    def rank(self) -> int:
        return self._loader._options.rank

    @property
    def shuffle(self) -> bool:
        return self._loader._options.shuffle

    @property
    def seed(self) -> int:
        return self._loader._options.seed

    @property
    def drop_last(self) -> bool:
        """DistributedSampler's drop_last: the loader's sampler_drop_last."""
        return self._loader._options.sampler_drop_last


_logged_roots = set()


def log_cold_cache(o, served: int) -> None:
    """Once per cache root and entry: where the cache is, how large the entry
    will grow and the capacity, when the entry does not yet hold what this
    loader serves (its first epoch is a cold one)."""
    root = o.cache.root
    if not root:
        return
    key = (root, o.source)
    if key in _logged_roots:
        return
    _logged_roots.add(key)
    try:
        held = sum(e - b for b, e in _ssdfeed.cached_id_ranges(o))
        if held >= served:
            return
        # Probing reads samples from the origin: only when nothing is cached
        # yet (a cold job reads them all anyway). A partial entry's job must
        # read only its misses, so it logs without an estimate.
        size = None
        if held == 0:
            src = _ssdfeed.open_loader_source(o)  # its index from the cache: no shard read
            size = _ssdfeed.estimate_entry_bytes(src, o.prepare)
    except Exception as e:  # a log line must never stop training
        log.debug("ssdfeed: no cache estimate: %s", e)
        return
    if o.cache.capacity_bytes:
        cap = f"capacity {_human(o.cache.capacity_bytes)} (cache_capacity)"
    else:
        free = shutil.disk_usage(root if os.path.isdir(root) else os.path.dirname(root)).free
        cap = (f"capacity: what the root holds now plus 80% of the {_human(free)} free "
               f"(set cache_capacity to bound it)")
    if size is None:
        grows = f"the entry holds {held} of the {served} samples served so far"
    else:
        grows = f"the entry will take about {_human(size)} ({held} of its samples cached so far)"
    msg = f"ssdfeed: cold epoch: caching {o.source} into {root}; {grows}; {cap}"
    if log.hasHandlers():
        log.info(msg)
    else:  # logging not configured: still say it once, as DataLoader's warnings do
        print(msg, file=sys.stderr, flush=True)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
