#!/usr/bin/env python3
"""ssdfeed.tf.cache against tf.data's own ds.cache(filename), on two
pipelines, each with one line changed (the cache):

- "plain": TFRecordDataset -> map(parse: parse_single_example,
  decode_jpeg, cast/255) -> cache, consumed element by element;
- "field report": the field report's whole pipeline, TFRecordDataset ->
  map(parse: decode_jpeg, resize to 224x224, cast/255) -> cache ->
  shuffle(10000) -> batch(64) -> prefetch(AUTOTUNE). The shuffle buffer
  holds every element of the pass (and keeps its memory alive).

Every cache is filled once (the cold pass, timed too), then warm passes of
each alternate, in rounds, in this one process; the figures are the ratios
of the median warm pass times (tf.data's / ssdfeed's, > 1: ssdfeed faster),
the page faults of a warm pass (getrusage minflt, medians), plus each
plain cache's size on disk (du) against the TFRecords'.

    .venv/bin/python bench/tf_cache_bench.py [--count 1000] [--rounds 5] [--dir DIR]

The data are ImageNet-like JPEGs (sides 300-500) made by
``ssdfeed make-dataset DIR --format tfrecord``; a pass consumes the elements
in the graph (a reduce over them), so the figure is the pipeline's, not a
Python loop's.
"""

import argparse
import json
import os
import resource
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


def parse(record, size=None):
    f = tf.io.parse_single_example(record, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    img = tf.io.decode_jpeg(f["image/encoded"], channels=3)
    if size is not None:  # nearest keeps uint8: the cast/255 that follows is k/255
        img = tf.image.resize(img, [size, size], method="nearest")
    return tf.cast(img, tf.float32) / 255.0, f["image/class/label"]


def pipeline(files, size=None):
    return tf.data.TFRecordDataset(files).map(lambda r: parse(r, size),
                                              num_parallel_calls=tf.data.AUTOTUNE)


def field_report_tail(ds):
    """What follows the cache in the field report."""
    return ds.shuffle(10000).batch(64).prefetch(tf.data.AUTOTUNE)


def timed_pass(ds):
    """(elements, wall seconds, CPU seconds of this process, page faults).
    Consumed in the graph: the pass's cost is the pipeline's alone. On
    shared cores the CPU time is the steadier figure."""
    t0, c0 = time.perf_counter(), time.process_time()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    n = ds.prefetch(tf.data.AUTOTUNE).reduce(
        tf.constant(0, tf.int64), lambda acc, el: acc + tf.shape(el[0], out_type=tf.int64)[0]
        if el[0].shape.rank == 4 else acc + 1)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    return int(n), time.perf_counter() - t0, time.process_time() - c0, faults


def du(path):
    out = subprocess.run(["du", "-sb", path], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


TF, SF = "tf.data cache", "ssdfeed.tf.cache"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    a = ap.parse_args()
    work = a.dir or tempfile.mkdtemp(prefix="tf_cache_bench_")
    try:
        files = make_data(os.path.join(work, "data"), a.count)
        for d in ("tfdata", "ssdfeed", "tfdata-fr", "ssdfeed-fr"):
            shutil.rmtree(os.path.join(work, d), ignore_errors=True)
            os.makedirs(os.path.join(work, d))
        runs = {
            ("plain", TF): pipeline(files).cache(os.path.join(work, "tfdata", "cache")),
            ("plain", SF): ssdfeed.tf.cache(pipeline(files), key="bench-parse-v1",
                                            cache=os.path.join(work, "ssdfeed")),
            # The field report's pipeline with its one line changed.
            ("field report", TF): field_report_tail(
                pipeline(files, 224).cache(os.path.join(work, "tfdata-fr", "cache"))),
            ("field report", SF): field_report_tail(
                ssdfeed.tf.cache(pipeline(files, 224), key="bench-field-report-v1",
                                 cache=os.path.join(work, "ssdfeed-fr"))),
        }
        cold = {k: timed_pass(ds) for k, ds in runs.items()}
        warm = {k: [] for k in runs}
        order = list(runs)
        for r in range(a.rounds):
            for k in (order if r % 2 == 0 else order[::-1]):
                n, s, c, f = timed_pass(runs[k])
                assert n == a.count, (k, n)
                warm[k].append((s, c, f))
        med = {k: [statistics.median(x[j] for x in v) for j in range(3)] for k, v in warm.items()}
        size = {"tfrecords": sum(os.path.getsize(f) for f in files),
                TF: du(os.path.join(work, "tfdata")), SF: du(os.path.join(work, "ssdfeed"))}
        print("command:", " ".join([os.path.basename(sys.executable)] + sys.argv))
        print(f"{a.count} elements, {a.rounds} rounds, {os.cpu_count()} CPUs; plain: float32 HWC "
              f"images, sides 300-500; field report: 224x224, shuffle(10000).batch(64)")
        report = {"count": a.count}
        for p in ("plain", "field report"):
            print(f"{p}:")
            for c in (TF, SF):
                s, cpu, f = med[(p, c)]
                print(f"  {c:18s} cold {cold[(p, c)][1]:7.2f} s   warm median {s:6.3f} s "
                      f"({a.count / s:7.0f} el/s), CPU {cpu:6.3f} s, {f:8.0f} page faults  all: "
                      + " ".join(f"{x[0]:.3f}" for x in warm[(p, c)]))
            ratio = med[(p, TF)][0] / med[(p, SF)][0]
            cpu_ratio = med[(p, TF)][1] / med[(p, SF)][1]
            print(f"  warm pass: ssdfeed.tf.cache {ratio:.2f}x tf.data cache(filename); "
                  f"per CPU-second of the process {cpu_ratio:.2f}x")
            report[p] = {"warm_median_s": {c: med[(p, c)][0] for c in (TF, SF)},
                         "warm_cpu_median_s": {c: med[(p, c)][1] for c in (TF, SF)},
                         "warm_page_faults": {c: med[(p, c)][2] for c in (TF, SF)},
                         "cold_s": {c: cold[(p, c)][1] for c in (TF, SF)},
                         "warm_ratio": ratio, "cpu_ratio": cpu_ratio}
        mib = {k: v / 2**20 for k, v in size.items()}
        print(f"  on disk (plain): TFRecords {mib['tfrecords']:.0f} MiB, tf.data cache "
              f"{mib[TF]:.0f} MiB, ssdfeed {mib[SF]:.0f} MiB ({size[SF] / size[TF]:.3f}x tf.data's)")
        report["bytes"] = size
        print(json.dumps(report))
    finally:
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
