#!/usr/bin/env python3
"""The cold epoch's fill modes side by side: `ssdfeed bench loader --fresh
--epochs 1 --bounds` run with --fill-write buffered, --fill-write direct and
--no-cache (no writes at all: the ceiling), in alternating order, for
--repeat rounds. Prints each mode's median images/s and its ratios to the
one-core bounds: decode+prepare (what the cache saves a warm epoch) and
decode+prepare+crop+resize (all a cold sample needs). Every run measures
the bounds after its epoch; the ratios use the median of the bounds of the
direct and no-cache runs, since a bound is the machine's and the dataset's,
not the mode's, and one run's can be caught by a neighbour's burst. A
buffered run's bound is left out: the kernel is still reclaiming the pages
its fill dirtied while the bound runs (on 20,000 images its bounds were
637-795 images/s against 892-956), which would flatter every ratio.

    python3 bench/cold_fill.py --source folder:DIR [--cache C] [--repeat 5]

Each run starts after a sync (no dirty pages of the last run left to write
back). The origin's files are read from the page cache when they fit (as a
dataset just generated is), so the ratios show the CPU's work, not the
origin's latency; --drop-caches (root) drops the page cache before each run
instead.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

MODES = {
    "buffered": ["--fill-write", "buffered"],
    "direct": ["--fill-write", "direct"],
    "no cache": ["--no-cache"],
}


def run(cli, args, mode):
    subprocess.run(["sync"], check=True)
    if args.drop_caches:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    cmd = [cli, "bench", "loader", "--source", args.source, "--cache", args.cache,
           "--resize-short", str(args.resize_short), "--workers", str(args.workers),
           "--fresh", "--epochs", "1", "--bounds", "--json"] + MODES[mode]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    e, b = j["epochs"][0], j["bounds"]
    st = e["stats"]
    return {
        "images_per_s": e["images_per_s"],
        "per_core": e["images_per_s"] / b["cores"],
        "per_cpu": e["images_per_s"] * e["seconds"] / e["cpu_seconds"],
        "dp": b["decode_prepare_per_core"], "aug": b["augment_per_core"],
        "direct_writes": st.get("cache_direct_writes", 0), "puts": st.get("cache_puts", 0),
        "write_mb_s": e.get("device", {}).get("write_mb_s", 0),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True)
    p.add_argument("--cache", default="/tmp/ssdfeed-cold-fill")
    p.add_argument("--cli", default="build/ssdfeed")
    p.add_argument("--resize-short", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--drop-caches", action="store_true")
    args = p.parse_args()
    results = {m: [] for m in MODES}
    order = list(MODES)
    for r in range(args.repeat):
        for m in order if r % 2 == 0 else reversed(order):
            res = run(args.cli, args, m)
            results[m].append(res)
            print(f"round {r} {m:9s} {res['images_per_s']:7.0f} images/s  "
                  f"(its bound: decode+prepare {res['dp']:.0f} images/s)", file=sys.stderr)
    med = lambda m, k: statistics.median(x[k] for x in results[m])
    runs = [x for m in MODES if m != "buffered" for x in results[m]]
    dp = statistics.median(x["dp"] for x in runs)
    both = 1 / (1 / dp + 1 / statistics.median(x["aug"] for x in runs))
    own = ", ".join(f"{m} {statistics.median(x['dp'] for x in results[m]):.0f}" for m in MODES)
    print(f"cold epoch, medians of {args.repeat} alternating rounds ({args.source}, "
          f"--resize-short {args.resize_short}, {args.workers} workers)")
    print(f"bounds on one core, medians of the {len(runs)} direct and no-cache runs: "
          f"decode+prepare {dp:.0f} images/s, with crop+resize {both:.0f} images/s")
    print(f"(decode+prepare bound measured after each mode's runs: {own})")
    print(f"{'mode':10s} {'images/s':>9s} {'dev wMB/s':>10s} | {'of decode+prepare':>21s} | "
          f"{'of decode+prepare+crop':>24s} | written direct")
    print(f"{'':10s} {'':>9s} {'':>10s} | {'per core':>10s} {'per CPU-s':>10s} | "
          f"{'per core':>11s} {'per CPU-s':>12s} |")
    for m in MODES:
        direct = sum(x["direct_writes"] for x in results[m])
        puts = sum(x["puts"] for x in results[m])
        core, cpu = med(m, "per_core"), med(m, "per_cpu")
        print(f"{m:10s} {med(m, 'images_per_s'):9.0f} {med(m, 'write_mb_s'):10.0f} | "
              f"{core / dp:9.2f}x {cpu / dp:9.2f}x | "
              f"{core / both:10.2f}x {cpu / both:11.2f}x | "
              f"{direct:.0f} of {puts:.0f}")
    b, d = med("buffered", "images_per_s"), med("direct", "images_per_s")
    print(f"direct / buffered: {d / b:.2f}x")


if __name__ == "__main__":
    main()
