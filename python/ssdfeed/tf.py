"""TensorFlow adapter: a tf.data.Dataset over an ssdfeed Loader.

Each pass over the dataset is one epoch; the epoch advances by itself, so
`model.fit(ds, epochs=E)` sees a fresh shuffle and augmentation each epoch.
Float output spans [0, 255] by default, as image_dataset_from_directory's.
"""

from __future__ import annotations

import threading

import numpy as np
import tensorflow as tf

from tensorflow.python.data.ops import dataset_ops

from ssdfeed import _compat, _moved, _tf_cache
from ssdfeed._tf_malloc import undo_tf_malloc_patch
from ssdfeed.loader import Loader, _bool, _cache_root

_DTYPES = {"uint8": tf.uint8, "float32": tf.float32, "float16": tf.float16}


def _no_injected_prefetch(ds: tf.data.Dataset) -> tf.data.Dataset:
    # tf.data adds a prefetch by default: the loader would then run a batch
    # ahead of the model, and a state_dict() taken mid-pass would skip that
    # batch on resume. The loader prefetches on its own workers anyway.
    opts = tf.data.Options()
    if hasattr(opts.experimental_optimization, "inject_prefetch"):
        opts.experimental_optimization.inject_prefetch = False
    return ds.with_options(opts)


def dataset(source=None, *, loader: Loader = None, **kwargs) -> tf.data.Dataset:
    """A tf.data.Dataset of (images, labels) batches over an ssdfeed.Loader,
    or of dicts for a source with other fields.

    A dict element holds the numpy loader's keys as tensors, except that
    ``boxes`` (B, None, 4) float32 and ``classes`` (B, None) int64 are
    ``tf.RaggedTensor``s cut to each image's ``num_boxes`` (kept too), and
    bytes fields are tf.string vectors. Arrays must have one shape within a
    batch. The dtypes of masks and arrays are read from the source's first
    sample when the dataset is made.

    Args:
        source: as ssdfeed.Loader (with any of its keyword arguments, which
            are checked the same way), or None when ``loader`` is given.
        loader: an existing ssdfeed.Loader to wrap instead.
        scale: float pixels span [0, scale]. Default 255.0, as Keras'
            ``image_dataset_from_directory`` (so a script's
            ``Rescaling(1/255)`` stays right); mean/std are in those units.
            ``scale=1.0`` gives torchvision's [0, 1].
        validation_split, subset, seed: Keras' seeded split.
            ``subset="both"`` returns ``(training, validation)`` datasets.

    Each pass over the dataset is the next epoch (0, 1, 2, ...), so
    ``model.fit(ds, epochs=E)`` reshuffles and re-augments every epoch. A
    pass left early (``ds.take(1)`` to preview a batch, a ``break``) leaves
    the loader where that pass began, so a preview uses up no epoch.

    The dataset's length (``ds.cardinality()``) is the epoch's batch count,
    so Keras knows the steps from the first epoch, when the loader starts at
    an epoch's beginning and ``on_error="raise"``. To resume mid-epoch, load
    the state into the loader first and then make the dataset
    (``loader.load_state_dict(s); ds = dataset(loader=loader)``): its first
    pass continues right after the batch ``s`` was saved at, and its length
    is left unknown. ``ds.stats()`` gives the loader's counters, ``ds.loader``
    the loader (for ``state_dict()``); ``ds.class_names`` the class names of
    a folder source (None for others).
    """
    if loader is None and kwargs.get("subset") == "both":
        if kwargs.get("seed") is None:
            raise ValueError("subset='both' needs seed=, as Keras: it picks the split")
        return tuple(dataset(source, **{**kwargs, "subset": part})
                     for part in ("training", "validation"))
    if loader is None:
        if kwargs.get("dtype", "uint8") != "uint8":
            kwargs.setdefault("scale", 255.0)
        loader = Loader(source, **kwargs)
    elif kwargs:
        raise ValueError(f"give loader or Loader arguments, not both ({sorted(kwargs)})")
    h, w, c = loader.sample_shape
    shape = (None, h, w, c) if loader.layout == "NHWC" else (None, c, h, w)
    images = tf.TensorSpec(shape=shape, dtype=_DTYPES[loader.dtype])
    passes = _Passes(loader)
    if loader.classic:
        spec = (images, tf.TensorSpec(shape=(None,), dtype=tf.int64))
        ds = tf.data.Dataset.from_generator(passes.generate, output_signature=spec)
    else:
        spec = _dict_signature(loader, images, loader.peek())
        ds = tf.data.Dataset.from_generator(_dict_batches(passes.generate, spec),
                                            output_signature=spec)
        ds = ds.map(_ragged_boxes(loader.fields), num_parallel_calls=None)
    ds = _no_injected_prefetch(ds)
    if passes.sized:
        # A sized pass must give exactly this many batches: true from an
        # epoch's start, skips included (a skipped sample is replaced).
        ds = ds.apply(tf.data.experimental.assert_cardinality(len(loader)))
    return _Held(ds, loader, class_names=_compat.folder_classes(loader.source))


class _Held(dataset_ops.DatasetV2):
    """The tf.data.Dataset ssdfeed.tf.dataset and ssdfeed.tf.cache return:
    ``ds`` itself (the same graph: tf sees no extra op) with ``stats()`` of
    what serves it, a Loader or a TfCache. Datasets made from it by
    ``.map``, ``.batch``... are plain tf.data.Datasets, as from any other."""

    def __init__(self, ds: tf.data.Dataset, owner, class_names=None):
        self._ds, self._owner = ds, owner
        self._class_names = class_names
        super().__init__(ds._variant_tensor)

    def _inputs(self):
        return [self._ds]

    @property
    def element_spec(self):
        return self._ds.element_spec

    def stats(self) -> dict:
        """The counters of what serves this dataset: the loader's
        (``Loader.stats()``) for ssdfeed.tf.dataset; for ssdfeed.tf.cache
        its cache entries' (this process's), summed."""
        return self._owner.stats()

    @property
    def loader(self) -> Loader:
        """ssdfeed.tf.dataset's loader, for ``state_dict()`` and
        ``load_state_dict()``."""
        if not isinstance(self._owner, Loader):
            raise AttributeError("a dataset of ssdfeed.tf.cache has no loader")
        return self._owner

    @property
    def class_names(self):
        """A folder source's class names, as image_dataset_from_directory's
        ``class_names``; None for other sources and for ssdfeed.tf.cache."""
        return self._class_names

    @property
    def ssdfeed_loader(self) -> Loader:
        _moved.warn("ds.ssdfeed_loader", "ds.loader, and ds.stats() for its counters")
        return self.loader

    @property
    def ssdfeed_cache(self):
        _moved.warn("ds.ssdfeed_cache", "ds.stats()")
        return self._owner


def _dict_signature(loader: Loader, images: tf.TensorSpec, probe: dict) -> dict:
    """The generator's signature of dict batches: boxes and classes padded
    (made ragged by a map after it)."""
    h, w, _ = loader.sample_shape
    spec = {}
    for name, value in probe.items():
        kind = loader.fields.get(name)  # None for num_boxes
        if kind == "image":
            spec[name] = images
        elif kind == "boxes":
            spec[name] = tf.TensorSpec(shape=(None, None, 4), dtype=tf.float32)
        elif kind == "classes":
            spec[name] = tf.TensorSpec(shape=(None, None), dtype=tf.int64)
        elif kind == "box_floats":
            spec[name] = tf.TensorSpec(shape=(None, None), dtype=tf.float32)
        elif kind == "instance_masks":
            spec[name] = tf.TensorSpec(shape=(None, None, h, w), dtype=tf.uint8)
        elif kind == "bytes":
            spec[name] = tf.TensorSpec(shape=(None,), dtype=tf.string)
        elif kind == "mask":
            spec[name] = tf.TensorSpec(shape=(None, h, w), dtype=tf.as_dtype(value.dtype))
        else:  # labels, counts, arrays: (N, ...) of the sample's rank
            spec[name] = tf.TensorSpec(shape=(None,) + (None,) * (value.ndim - 1),
                                       dtype=tf.as_dtype(value.dtype))
    return spec


def _dict_batches(generate, spec: dict):
    """The loader's dict batches as tf takes them: bytes lists as object
    arrays; a list of arrays (shapes unequal within the batch) refused."""

    def batches():
        for batch in generate():
            out = {}
            for name in spec:
                value = batch[name]
                if isinstance(value, list):
                    if spec[name].dtype != tf.string:
                        raise ValueError(
                            f"ssdfeed.tf: field {name!r} has samples of unequal shapes in one "
                            f"batch ({sorted({v.shape for v in value})}); tf needs one shape "
                            f"per batch: use batch_size=1 or a source of equal shapes")
                    value = np.array(value, dtype=object)
                out[name] = value
            yield out

    return batches


def _ragged_boxes(kinds: dict):
    """Boxes, classes (and per-box values and masks) cut to each image's
    num_boxes."""
    count = _compat.box_count_name(kinds)
    per_box = [n for n, k in kinds.items() if k in _compat.PER_BOX_KINDS]

    def ragged(batch):
        batch = dict(batch)
        for name in per_box:
            batch[name] = tf.RaggedTensor.from_tensor(batch[name], lengths=batch[count])
        return batch

    return ragged if count else (lambda batch: batch)


class _Passes:
    """Starts each pass of the dataset on the loader."""

    def __init__(self, loader: Loader):
        self.loader = loader
        state = loader.state_dict()
        self.sized = not _resumed(state)
        self.started = False  # a pass of this dataset began
        self.lock = threading.Lock()

    def generate(self):
        loader = self.loader
        undo_tf_malloc_patch()  # applied again by tf as this pass's iterator started
        with self.lock:
            # A pass left with batches to go (ds.take(1)) is started again
            # where it began instead of using up its epoch.
            batches = loader.start_pass(replay_left_pass=self.started)
            self.started = True
            if self.sized and _resumed(loader.state_dict()):
                raise ValueError(
                    "this dataset promised tf a full epoch of batches, but the loader was "
                    "set to resume mid-epoch: load the state into the loader before making "
                    "the dataset (loader.load_state_dict(s); ds = ssdfeed.tf.dataset("
                    "loader=loader))")
        yield from batches


def _resumed(state: dict) -> bool:
    # A merged state (ssdfeed.merge_states) starts a new rank at batch 0 of
    # a shorter rest of the epoch: resumed too.
    return (state["batches_consumed"] > 0 or state.get("position", 0) > 0
            or bool(state.get("resumed_from")))


def cache(ds: tf.data.Dataset, *, key: str, cache=True, cache_capacity: int = None,
          shuffle: bool = False, seed: int = 0, group_shared: bool = False,
          capacity: int = None) -> tf.data.Dataset:
    """``ds`` with its elements kept in an ssdfeed cache entry: the drop-in
    for ``ds.cache(filename)``.

    The first pass computes each element through ``ds`` and stores it; later
    passes, in this job or any other on the same cache root, read the stored
    elements (in parallel, in order) and never run ``ds``. Elements are the
    same values in the same order, for any nested structure (dicts, tuples,
    namedtuples) of dense tensors of numbers, bools or strings, ragged and
    sparse tensors. Several jobs may fill and read one cache at once. A pass
    left early or a job killed mid-fill keeps what it stored; the next pass
    reads that back and computes the rest (see docs/python.md for what a
    resumed fill recomputes).

    Args:
        ds: the pipeline to cache (where the code had ``ds.cache(path)``).
        key: names what ``ds`` computes, e.g. ``"parse-v1"``. The cache is
            found by key and element_spec only: change the key when the
            parse code or the data changes, or stale elements are served.
        cache: ``True`` (default): the default root (``$SSDFEED_CACHE``,
            else ``~/.cache/ssdfeed``); a path: that root; ``False``/``None``:
            no cache, ``ds`` is returned as it is.
        cache_capacity: most bytes the cache root may hold, as
            ``ssdfeed.Loader``'s (default None: no bound but the disk's).
            Elements that do not fit are served from ``ds``. ``capacity=``,
            its old name, is deprecated.
        shuffle, seed: once every element is stored, each pass reads them
            in a fresh global permutation (pass e of this dataset: one drawn
            from ``(seed, e)``), instead of a shuffle buffer. A pass that
            still fills serves the upstream order.
        group_shared: the cache root is shared by the members of its group
            (a 2770 directory), as ``ssdfeed.cache(group_shared=)`` and the
            CLI's ``--group-shared``: entries are created 02770/0660 so that
            every member fills and reads them. Default False: a
            group-writable root is refused.

    ``cached.stats()`` sums the entries' counters (this process's).
    """
    cache_capacity = _moved.renamed_argument("ssdfeed.tf.cache", "capacity", "cache_capacity",
                                             capacity, cache_capacity)
    if cache is False or cache is None:
        return ds
    if not isinstance(key, str) or not key:
        raise ValueError(f"ssdfeed.tf.cache: key must be a non-empty str naming what ds "
                         f"computes (e.g. 'parse-v1'), not {key!r}")
    if cache_capacity is not None and (not isinstance(cache_capacity, int) or cache_capacity < 1):
        raise ValueError(f"ssdfeed.tf.cache: cache_capacity must be an int >= 1 (bytes), not "
                         f"{cache_capacity!r}")
    cached = _tf_cache.TfCache(ds, key, _cache_root(cache), cache_capacity, bool(shuffle),
                               int(seed), group_shared=_bool("group_shared", group_shared))
    return _Held(cached.dataset(), cached)
