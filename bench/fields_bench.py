#!/usr/bin/env python3
"""Warm epochs of samples with fields against image-only samples of the
same images, side by side in one run: image+mask pairs (a generated
WebDataset tar with seg.png masks) against the same tar's images and labels
alone, and COCO-style image+boxes (a generated COCO json) against the same
images alone (a files: source over the COCO images folder). Each
configuration is `ssdfeed bench loader` on the same cores and the same
preparation (--resize-short, --crop with flip); the configurations
alternate for --rounds rounds, each run giving --epochs warm epochs, and the
medians and their ratios are printed, by wall clock (images/s) and by the
CPU time the process used (images per CPU-second, which neighbours on a
shared machine skew far less). The first epoch of each run is left out (it
first-touches the batch buffers). The first (cold) epoch of each
configuration is reported too, against decode+prepare on one core times the
cores (--bounds).

    python3 bench/fields_bench.py [--count 2000] [--workers 2] [--rounds 3]

Targets (issue 28): image+mask >= 0.8x and image+boxes >= 0.9x of the
image-only images/s.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

TARGETS = {"image+mask": 0.8, "image+boxes": 0.9}


def cli_json(cli, *args):
    out = subprocess.run([cli, *args, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def datasets(cli, root, count, min_side, max_side):
    """{pair: (image-only args, with-fields args)} over generated datasets."""
    made = {}
    for fmt in ("wds-seg", "coco"):
        d = os.path.join(root, fmt)
        if not os.path.exists(d):
            made[fmt] = cli_json(cli, "make-dataset", d, "--format", fmt, "--count", str(count),
                                 "--min-side", str(min_side), "--max-side", str(max_side))
        else:
            with open(os.path.join(d, "report.json")) as f:
                made[fmt] = json.load(f)
        with open(os.path.join(d, "report.json"), "w") as f:
            json.dump(made[fmt], f)
    # tar:DIR/shard-{...}.tar?image=jpg&mask=seg.png&label=cls&depth=npy&meta=json
    shards = made["wds-seg"]["uri"].split("?", 1)[0]
    coco = made["coco"]["uri"]  # coco:IMAGES?annotations=FILE
    images = coco[len("coco:"):].split("?", 1)[0]
    ext = sorted({os.path.splitext(n)[1] for n in os.listdir(images)})[0]
    return {
        "image+mask": (["--source", shards + "?image=jpg&label=cls"],
                       ["--source", shards + "?image=jpg&label=cls&mask=seg.png"]),
        "image+boxes": (["--source", f"files:{images}?image={{stem}}{ext}"],
                        ["--source", coco]),
    }


def run(cli, args, source_args, epochs, extra=()):
    cmd = [cli, "bench", "loader", *source_args, "--cache", args.cache,
           "--resize-short", str(args.resize_short), "--crop", str(args.crop),
           "--batch", str(args.batch), "--workers", str(args.workers),
           "--epochs", str(epochs), *extra, "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default="build/ssdfeed")
    p.add_argument("--dir", default="/tmp/ssdfeed-fields-bench")
    p.add_argument("--cache", default=None, help="cache root (default DIR/cache)")
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--min-side", type=int, default=300)
    p.add_argument("--max-side", type=int, default=500)
    p.add_argument("--resize-short", type=int, default=256)
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3,
                   help="warm epochs per run (the first is left out)")
    p.add_argument("--pairs", default=",".join(TARGETS),
                   help="comma-separated pairs to run (default: all)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    args.cache = args.cache or os.path.join(args.dir, "cache")
    shutil.rmtree(args.cache, ignore_errors=True)
    pairs = datasets(args.cli, args.dir, args.count, args.min_side, args.max_side)
    pairs = {k: v for k, v in pairs.items() if k in args.pairs.split(",")}

    cold = {}
    for pair, configs in pairs.items():  # fills every entry: later runs are warm
        for which, src in zip(("image-only", pair), configs):
            j = run(args.cli, args, src, 1, ["--bounds"])
            b = j["bounds"]
            cold[(pair, which)] = (j["epochs"][0]["images_per_s"],
                                   b["decode_prepare_per_core"] * b["cores"])
    warm = {k: [] for k in cold}
    per_cpu = {k: [] for k in cold}
    for r in range(args.rounds):
        for pair, configs in pairs.items():
            order = list(zip(("image-only", pair), configs))
            for which, src in order if r % 2 == 0 else reversed(order):
                j = run(args.cli, args, src, args.epochs)
                eps = j["epochs"][1:] or j["epochs"]
                warm[(pair, which)] += [e["images_per_s"] for e in eps]
                per_cpu[(pair, which)] += [e["images_per_s"] * e["seconds"] / e["cpu_seconds"]
                                           for e in eps]
                print(f"round {r} {pair:12s} {which:12s} "
                      + " ".join(f"{e['images_per_s']:7.0f}" for e in eps) + " images/s; "
                      + " ".join(f"{x:6.0f}" for x in per_cpu[(pair, which)][-len(eps):])
                      + " per CPU-s", file=sys.stderr)

    rows = []
    for pair in pairs:
        base = statistics.median(warm[(pair, "image-only")])
        with_fields = statistics.median(warm[(pair, pair)])
        cpu_base = statistics.median(per_cpu[(pair, "image-only")])
        cpu_fields = statistics.median(per_cpu[(pair, pair)])
        rows.append({"pair": pair, "image_only": base, "with_fields": with_fields,
                     "ratio": with_fields / base, "target": TARGETS[pair],
                     "image_only_per_cpu_s": cpu_base, "with_fields_per_cpu_s": cpu_fields,
                     "ratio_per_cpu_s": cpu_fields / cpu_base,
                     "cold_image_only": cold[(pair, "image-only")][0],
                     "cold_with_fields": cold[(pair, pair)][0],
                     "decode_bound": cold[(pair, pair)][1]})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{args.count} samples, --resize-short {args.resize_short} --crop {args.crop} "
          f"--batch {args.batch}, {args.workers} workers; warm: median of "
          f"{args.rounds} x {args.epochs} epochs each")
    print(f"{'':12s} {'image-only':>11s} {'with fields':>11s} {'ratio':>6s} {'target':>6s} | "
          f"{'per CPU-s:':>10s} {'image-only':>10s} {'fields':>7s} {'ratio':>6s} | "
          f"cold: {'image-only':>10s} {'fields':>7s} {'/bound':>7s}")
    for r in rows:
        print(f"{r['pair']:12s} {r['image_only']:11.0f} {r['with_fields']:11.0f} "
              f"{r['ratio']:5.2f}x {r['target']:5.1f}x | {'':10s} "
              f"{r['image_only_per_cpu_s']:10.0f} {r['with_fields_per_cpu_s']:7.0f} "
              f"{r['ratio_per_cpu_s']:5.2f}x | {r['cold_image_only']:16.0f} "
              f"{r['cold_with_fields']:7.0f} {r['cold_with_fields'] / r['decode_bound']:6.2f}x")


if __name__ == "__main__":
    main()
