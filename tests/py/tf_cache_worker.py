"""The pipelines test_tf_cache.py caches, and a worker that runs one in a
process of its own (concurrent jobs, a killed fill).

Every parse appends its element's index to a count file (O_APPEND lines, so
processes can share one), which is how the tests see what was computed.

    python tf_cache_worker.py ROOT KIND SRC KEY COUNTS OUT [--meet DIR NAME]

prints each element's index as it is served (flushed), and writes the
served elements (normalised to lists) as JSON to OUT at the end. With
--meet, the parse of element MEET_AT waits until the other worker (the
other name in DIR) has got there too, so two fills overlap for sure. With
--together DIR NAME, the worker starts its pass only once the other one is
ready to start its own (a fill that takes claims never parses what the
other is parsing, so it could not meet it at an element).
"""

import collections
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

Pair = collections.namedtuple("Pair", "index weight")
MEET_AT = 5


def write_records(path, n):
    with tf.io.TFRecordWriter(path) as w:
        for i in range(n):
            feat = {"i": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
            w.write(tf.train.Example(features=tf.train.Features(feature=feat))
                    .SerializeToString())


def _counter(counts, meet):
    def note(i):
        i = int(i)
        with open(counts, "a") as f:
            f.write(f"{i}\n")
        if meet is not None and i == MEET_AT:
            _meet(*meet)
        return np.int64(i)
    return note


def _meet(d, name):
    open(os.path.join(d, name), "w").close()
    deadline = time.monotonic() + 120
    while len(os.listdir(d)) < 2:  # waits for a state, not for a time
        if time.monotonic() > deadline:
            raise TimeoutError("the other worker never reached the meeting point")
        time.sleep(0.01)


def element(i):
    """Element i: nested dict, dense numbers and strings, ragged, namedtuple."""
    f = tf.cast(i, tf.float32)
    n = tf.cast(i % 4, tf.int32)
    return {
        "image": tf.cast(tf.fill([4 + i % 3, 5, 3], i % 251), tf.uint8),
        "name": tf.strings.join(["item-", tf.strings.as_string(i)]),
        "words": tf.strings.split(tf.strings.reduce_join(
            tf.repeat(tf.constant(["ab "]), n + 1))),
        "tags": tf.RaggedTensor.from_row_lengths(
            tf.range(n * (n + 1) // 2) * tf.cast(i, tf.int32), tf.range(n + 1)),
        "pair": Pair(i, f * 0.5),
    }


def tfrecord_pipeline(src, counts, meet=None):
    """TFRecordDataset -> map(parse): skip() runs parse for what it skips."""
    note = _counter(counts, meet)

    def parse(record):
        i = tf.io.parse_single_example(record, {"i": tf.io.FixedLenFeature([], tf.int64)})["i"]
        i = tf.numpy_function(note, [i], tf.int64)
        i.set_shape([])
        return element(i)
    return tf.data.TFRecordDataset(src).map(parse)


def files_pipeline(n, counts, meet=None):
    """from_tensor_slices(list).map(load): tf allows access by index."""
    note = _counter(counts, meet)

    def load(i):
        i = tf.numpy_function(note, [i], tf.int64)
        i.set_shape([])
        return element(i)
    return tf.data.Dataset.from_tensor_slices(np.arange(n, dtype=np.int64)).map(load)


def normalise(el):
    """An element as JSON-able lists, component by component."""
    return [plain(np.asarray(c.numpy()).tolist())
            for c in tf.nest.flatten(el, expand_composites=True)]


def plain(x):
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, list):
        return [plain(v) for v in x]
    return x


def main():
    import ssdfeed.tf

    root, kind, src, key, counts, out = sys.argv[1:7]
    how = sys.argv[7] if len(sys.argv) > 7 else None
    meet = (sys.argv[8], sys.argv[9]) if how == "--meet" else None
    ds = (tfrecord_pipeline(src, counts, meet) if kind == "tfrecord"
          else files_pipeline(int(src), counts, meet))
    ds = ssdfeed.tf.cache(ds, key=key, cache=root)
    if how == "--together":
        _meet(sys.argv[8], sys.argv[9])
    got = []
    for el in ds:
        got.append(normalise(el))
        print(len(got) - 1, flush=True)
    with open(out, "w") as f:
        json.dump(got, f)


if __name__ == "__main__":
    main()
