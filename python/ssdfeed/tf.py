"""TensorFlow adapter: a tf.data.Dataset over an ssdfeed Loader.

Each pass over the dataset is one epoch; the epoch advances by itself, so
`model.fit(ds, epochs=E)` sees a fresh shuffle and augmentation each epoch.
"""

from __future__ import annotations

import tensorflow as tf

from ssdfeed.loader import Loader

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
    """A tf.data.Dataset of (images, labels) batches over an ssdfeed.Loader.

    Args:
        source: as ssdfeed.Loader (with any of its keyword arguments, which
            are checked the same way), or None when ``loader`` is given.
        loader: an existing ssdfeed.Loader to wrap instead.

    Each pass over the dataset is the next epoch (0, 1, 2, ...), so
    ``model.fit(ds, epochs=E)`` reshuffles and re-augments every epoch. The
    element spec has a fixed H, W when the loader's samples have one shape
    (resize, center_crop or an augment). ``ds.ssdfeed_loader`` is the loader,
    for ``stats()`` and state: after ``ds.ssdfeed_loader.load_state_dict(s)``
    the next pass continues right after the batch ``s`` was saved at.
    """
    if loader is None:
        loader = Loader(source, **kwargs)
    h, w, c = loader.sample_shape
    shape = (None, h, w, c) if loader.layout == "NHWC" else (None, c, h, w)
    spec = (tf.TensorSpec(shape=shape, dtype=_DTYPES[loader.dtype]),
            tf.TensorSpec(shape=(None,), dtype=tf.int64))

    def generate():
        # The Loader picks each pass's epoch itself (the next one, or what
        # set_epoch / load_state_dict chose), so a restored state resumes.
        yield from loader

    # No assert_cardinality(len(loader)): a pass resumed from a saved state
    # is shorter, and the assertion would fail it.
    ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
    ds = _no_injected_prefetch(ds)
    ds.ssdfeed_loader = loader  # for stats() and state
    return ds
