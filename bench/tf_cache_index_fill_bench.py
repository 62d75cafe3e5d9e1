#!/usr/bin/env python3
"""What filling ssdfeed.tf.cache by index costs against a plain fill.

Where a pipeline allows random access (``from_tensor_slices(...).map(...)``),
a fill computes each missing element under its claim, by index, so two jobs
filling at once share the parsing; the plain fill (a pipeline without
random access, a TFRecordDataset) runs the upstream in order. One pipeline
(--parse jpeg: JPEG bytes in memory -> decode -> resize to 224x224; --parse
cheap: a 64-float vector per element, where the per-element cost of
computing by index shows most), four ways (medians of --rounds, each on an
empty cache):

  uncached      one pass of the pipeline itself
  plain fill    tf.cache's first pass, the upstream run in order
  index fill    tf.cache's first pass, each element computed by index
  warm          a pass over the complete cache

    .venv/bin/python bench/tf_cache_index_fill_bench.py [--parse jpeg|cheap] [--count 500] [--rounds 3]

Prints ms per element for each, and index fill / plain fill.
"""

import argparse
import io
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402

import ssdfeed.tf  # noqa: E402
from ssdfeed import _tf_cache  # noqa: E402


def jpegs(count):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        h, w = rng.integers(300, 500, 2)
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (h, w, 3), np.uint8)).save(buf, "JPEG")
        out.append(buf.getvalue())
    return out


def parse(data):
    img = tf.io.decode_jpeg(data, channels=3)
    return tf.cast(tf.image.resize(img, [224, 224]), tf.uint8)


def cheap(i):
    return tf.fill([64], tf.cast(i, tf.float32) / 255.0)


PARSE = {"jpeg": parse, "cheap": cheap}
_parse = parse


def pipeline(data):
    return tf.data.Dataset.from_tensor_slices(data).map(_parse)


def timed(ds):
    t = time.perf_counter()
    n = sum(1 for _ in ds)
    return (time.perf_counter() - t) * 1000 / n


def fill(data, root, by_index):
    c = _tf_cache.TfCache(pipeline(data), "bench", root, None, False, 0)
    if not by_index:
        c._random_access = False  # as a TFRecordDataset: the upstream in order
    ds = c.dataset()
    ms = timed(ds)
    assert c.store.complete()
    return ms, timed(ds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parse", choices=sorted(PARSE), default="jpeg")
    args = ap.parse_args()
    global _parse
    _parse = PARSE[args.parse]
    data = tf.constant(jpegs(args.count) if args.parse == "jpeg" else list(range(args.count)))
    times = {"uncached": [], "plain fill": [], "index fill": [], "warm": []}
    for r in range(args.rounds):
        times["uncached"].append(timed(pipeline(data)))
        for name, by_index in (("plain fill", False), ("index fill", True)):
            root = tempfile.mkdtemp(prefix="tf_index_fill_")
            try:
                ms, warm = fill(data, root, by_index)
            finally:
                shutil.rmtree(root)
            times[name].append(ms)
            times["warm"].append(warm)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:>12}: {v:7.3f} ms/element")
    print(f"index fill / plain fill: {med['index fill'] / med['plain fill']:.2f}x "
          f"({args.parse}, {args.count} elements, {args.rounds} rounds)")


if __name__ == "__main__":
    main()
