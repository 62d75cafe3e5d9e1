"""A small Keras model trained on the generated dataset through ssdfeed.tf.

    ssdfeed make-dataset /tmp/ssdfeed-data --count 2000
    python examples/train_keras.py /tmp/ssdfeed-data
"""

import sys

import tensorflow as tf

import ssdfeed
import ssdfeed.tf

data = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ssdfeed-data"

# Instead of tf.data's list_files/map(decode)/cache()/shuffle()/batch():
ds = ssdfeed.tf.dataset(
    f"folder:{data}", cache=True,
    prepare=ssdfeed.Prepare(resize_short=144),
    augment=ssdfeed.RandomResizedCrop(128, flip=True),
    batch_size=64, shuffle=True, seed=0,
    # scale=1.0: pixels in [0, 1], as the ImageNet mean/std below assume
    # (the tf default is Keras' [0, 255]).
    dtype="float32", scale=1.0, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))

model = tf.keras.Sequential([
    tf.keras.Input((128, 128, 3)),
    tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
    tf.keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(10),
])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(ds, epochs=2)
print("loader stats:", {k: v for k, v in ds.stats().items()
                        if k in ("cache_hits", "cache_misses", "wait_seconds")})
