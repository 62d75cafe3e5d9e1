"""The field report's tf.data pipeline with ssdfeed.tf.cache in place of
ds.cache(path): one line changes.

    python examples/cache_tfdata.py [DATA_DIR] [CACHE_DIR]

Makes a small TFRecord dataset in DATA_DIR if it is not there (as
``ssdfeed make-dataset DATA_DIR --format tfrecord --count 512``), then
trains a small Keras model for 3 epochs: the first parses and decodes every
record and stores the elements, the others read them from the cache, in a
fresh global order each epoch. Run it twice: the second run (or a second job
at the same time) parses nothing.
"""

import glob
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import ssdfeed  # noqa: E402
import ssdfeed.tf  # noqa: E402

tmp = tempfile.gettempdir()
data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tmp, "ssdfeed-tfrecords")
cache_root = sys.argv[2] if len(sys.argv) > 2 else True  # True: $SSDFEED_CACHE or ~/.cache/ssdfeed
if not glob.glob(os.path.join(data, "*.tfrecord*")):
    ssdfeed.make_dataset(data, format="tfrecord", count=512, classes=10, seed=0,
                         min_side=96, max_side=160)


def parse(record):
    f = tf.io.parse_single_example(record, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    img = tf.io.decode_jpeg(f["image/encoded"], channels=3)
    img = tf.image.resize(tf.cast(img, tf.float32) / 255.0, (96, 96))
    return img, f["image/class/label"]


files = sorted(glob.glob(os.path.join(data, "*.tfrecord*")))
ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
# Was: ds = ds.cache("/mnt/ssd_cache/train").shuffle(1000)
cached = ssdfeed.tf.cache(ds, key="parse-v1", cache=cache_root, shuffle=True, seed=0)
ds = cached.batch(64).prefetch(tf.data.AUTOTUNE)

model = tf.keras.Sequential([
    tf.keras.Input((96, 96, 3)),
    tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(10),
])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(ds, epochs=3)
stats = cached.stats()
print("elements read from the cache:", stats.get("cache_hits", 0))
