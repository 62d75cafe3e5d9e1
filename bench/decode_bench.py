#!/usr/bin/env python3
"""Decode + prepare throughput per core: ssdfeed vs the libjpeg-turbo bound
vs Pillow (Image.draft + resize), on the same generated files, one run.

    python3 bench/decode_bench.py [--count 400] [--resize-short 256] [--build build]

Needs: the ssdfeed Python package installed in this interpreter (`make build`
then `pip install .`, or `make test`), Pillow, and the C++ bench program
build/bench/decode_bench (`make build`, or `cmake --build build`; --build
names another build directory).
"""

import argparse
import io
import json
import os
import statistics
import subprocess
import tempfile
import time

from PIL import Image

import ssdfeed


def pillow_rate(files, short, rounds):
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for data in files:
            im = Image.open(io.BytesIO(data))
            w, h = im.size
            s = short / min(w, h)
            size = (round(w * s), round(h * s))
            im.draft("RGB", size)
            im.convert("RGB").resize(size, Image.Resampling.BILINEAR, reducing_gap=None)
        rates.append(len(files) / (time.perf_counter() - t0))
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--resize-short", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rep = ssdfeed.make_dataset(os.path.join(d, "ds"), format="tfrecord", count=args.count,
                                   classes=10, seed=0)
        out = subprocess.run(
            [os.path.join(args.build, "bench", "decode_bench"), "--source", rep["uri"],
             "--resize-short", str(args.resize_short), "--rounds", str(args.rounds), "--json"],
            check=True, capture_output=True, text=True).stdout
        res = json.loads(out)
        src = ssdfeed.Source(rep["uri"])
        files = [src.read(i)[0] for i in range(len(src))]
        mp = sum(Image.open(io.BytesIO(f)).size[0] * Image.open(io.BytesIO(f)).size[1]
                 for f in files) / 1e6
        pil = pillow_rate(files, args.resize_short, args.rounds)
    rows = res["rows"] + [{"name": "Pillow draft + resize", "images_per_s": pil,
                           "mpix_per_s": pil * mp / len(files)}]
    bound = rows[0]["images_per_s"]
    print(f"{res['images']} generated JPEGs ({mp / len(files):.2f} MP mean, "
          f"{sum(map(len, files)) / len(files) / 1000:.0f} KB mean), "
          f"resize_short={args.resize_short}, one core, median of {args.rounds} rounds")
    print(f"| {'path':40s} | {'images/s':>9s} | {'MP/s':>7s} | {'vs bound':>8s} |")
    print(f"|{'-' * 42}|{'-' * 11}|{'-' * 9}|{'-' * 10}|")
    for r in rows:
        print(f"| {r['name']:40s} | {r['images_per_s']:9.1f} | {r['mpix_per_s']:7.1f} | "
              f"{r['images_per_s'] / bound:7.2f}x |")


if __name__ == "__main__":
    main()
