"""TensorFlow adapter: a tf.data.Dataset over an ssdfeed Loader.

Each pass over the dataset is one epoch; the epoch advances by itself, so
`model.fit(ds, epochs=E)` sees a fresh shuffle and augmentation each epoch.
"""

from __future__ import annotations

import tensorflow as tf

from ssdfeed.loader import Loader

_DTYPES = {"uint8": tf.uint8, "float32": tf.float32, "float16": tf.float16}


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
    for ``stats()`` and state.
    """
    if loader is None:
        loader = Loader(source, **kwargs)
    h, w, c = loader.sample_shape
    shape = (None, h, w, c) if loader.layout == "NHWC" else (None, c, h, w)
    spec = (tf.TensorSpec(shape=shape, dtype=_DTYPES[loader.dtype]),
            tf.TensorSpec(shape=(None,), dtype=tf.int64))
    epoch = {"next": 0}

    def generate():
        loader.set_epoch(epoch["next"])
        epoch["next"] += 1
        yield from loader

    ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
    # A known length lets Keras size its epochs without a warning.
    ds = ds.apply(tf.data.experimental.assert_cardinality(len(loader)))
    ds.ssdfeed_loader = loader  # for stats() and state
    return ds
