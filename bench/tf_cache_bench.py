#!/usr/bin/env python3
"""ssdfeed.tf.cache against tf.data's own ds.cache(filename), on the field
report's pipeline: TFRecordDataset -> map(parse: parse_single_example,
decode_jpeg, cast/255) -> cache.

Both caches are filled once (the cold pass, timed too), then warm passes of
each alternate, in rounds, in this one process; the figure is the ratio of
the median warm pass times (tf.data's / ssdfeed's, > 1: ssdfeed faster),
plus each cache's size on disk (du) against the TFRecords'.

    .venv/bin/python bench/tf_cache_bench.py [--count 1000] [--rounds 5] [--dir DIR]

The data are ImageNet-like JPEGs (sides 300-500) made by
``ssdfeed make-dataset DIR --format tfrecord``; a pass consumes the elements
in the graph (a reduce over them), so the figure is the pipeline's, not a
Python loop's.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import ssdfeed.tf  # noqa: E402
from ssdfeed import _ssdfeed  # noqa: E402


def make_data(d, count):
    if not os.path.isdir(d):
        _ssdfeed.make_dataset(d, "tfrecord", count, 100, 0, 0.0, 250, 300, 500)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if ".tfrecord" in f)


def parse(record):
    f = tf.io.parse_single_example(record, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    img = tf.io.decode_jpeg(f["image/encoded"], channels=3)
    return tf.cast(img, tf.float32) / 255.0, f["image/class/label"]


def pipeline(files):
    return tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def timed_pass(ds):
    """(elements, wall seconds, CPU seconds of this process). Consumed in
    the graph: the pass's cost is the pipeline's alone. On shared cores
    the CPU time is the steadier figure."""
    t0, c0 = time.perf_counter(), time.process_time()
    n = ds.prefetch(tf.data.AUTOTUNE).reduce(
        tf.constant(0, tf.int64), lambda acc, el: acc + tf.cast(tf.size(el[0]) > 0, tf.int64))
    return int(n), time.perf_counter() - t0, time.process_time() - c0


def du(path):
    out = subprocess.run(["du", "-sb", path], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    a = ap.parse_args()
    work = a.dir or tempfile.mkdtemp(prefix="tf_cache_bench_")
    try:
        files = make_data(os.path.join(work, "data"), a.count)
        for d in ("tfdata", "ssdfeed"):
            shutil.rmtree(os.path.join(work, d), ignore_errors=True)
            os.makedirs(os.path.join(work, d))
        tf_ds = pipeline(files).cache(os.path.join(work, "tfdata", "cache"))
        sf_ds = ssdfeed.tf.cache(pipeline(files), key="bench-parse-v1",
                                 cache=os.path.join(work, "ssdfeed"))
        cold = {"tf.data cache": timed_pass(tf_ds), "ssdfeed.tf.cache": timed_pass(sf_ds)}
        warm = {"tf.data cache": [], "ssdfeed.tf.cache": []}
        cpu = {"tf.data cache": [], "ssdfeed.tf.cache": []}
        runs = [("tf.data cache", tf_ds), ("ssdfeed.tf.cache", sf_ds)]
        for r in range(a.rounds):
            for name, ds in (runs if r % 2 == 0 else runs[::-1]):
                n, s, c = timed_pass(ds)
                assert n == a.count, (name, n)
                warm[name].append(s)
                cpu[name].append(c)
        med = {k: statistics.median(v) for k, v in warm.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        size = {"tfrecords": sum(os.path.getsize(f) for f in files),
                "tf.data cache": du(os.path.join(work, "tfdata")),
                "ssdfeed.tf.cache": du(os.path.join(work, "ssdfeed"))}
        print("command:", " ".join([os.path.basename(sys.executable)] + sys.argv))
        print(f"{a.count} elements (float32 HWC images, sides 300-500), {a.rounds} rounds, "
              f"{os.cpu_count()} CPUs")
        for k in warm:
            print(f"  {k:18s} cold {cold[k][1]:7.2f} s   warm median {med[k]:6.3f} s "
                  f"({a.count / med[k]:7.0f} el/s), CPU {med_cpu[k]:6.3f} s  all: "
                  + " ".join(f"{s:.3f}" for s in warm[k]))
        ratio = med["tf.data cache"] / med["ssdfeed.tf.cache"]
        cpu_ratio = med_cpu["tf.data cache"] / med_cpu["ssdfeed.tf.cache"]
        print(f"  warm epoch: ssdfeed.tf.cache {ratio:.2f}x tf.data cache(filename); "
              f"per CPU-second of the process {cpu_ratio:.2f}x")
        mib = {k: v / 2**20 for k, v in size.items()}
        print(f"  on disk: TFRecords {mib['tfrecords']:.0f} MiB, tf.data cache "
              f"{mib['tf.data cache']:.0f} MiB, ssdfeed {mib['ssdfeed.tf.cache']:.0f} MiB "
              f"({size['ssdfeed.tf.cache'] / size['tf.data cache']:.3f}x tf.data's)")
        print(json.dumps({"count": a.count, "warm_median_s": med, "warm_ratio": ratio,
                          "warm_cpu_median_s": med_cpu, "cpu_ratio": cpu_ratio,
                          "cold_s": {k: v[1] for k, v in cold.items()}, "bytes": size}))
    finally:
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
