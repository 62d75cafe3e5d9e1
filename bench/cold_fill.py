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

With --vs-decode it instead holds the Python Loader's cold epoch (resize_short
256, RandomResizedCrop 224, an empty cache root each round) to the
libjpeg-turbo full-decode bound (build/bench/decode_bench: TurboJPEG's
decode to RGB at full size, per CPU-second of one thread), the two measured
alternately in one run, and prints their medians and ratio: per wall second
against the bound times the cores the loader uses, and per CPU-second the
loader's process used (what a shared, busy machine does not disturb).

    python3 bench/cold_fill.py --source folder:DIR --vs-decode [--repeat 5]

Each run starts after a sync (no dirty pages of the last run left to write
back). The origin's files are read from the page cache when they fit (as a
dataset just generated is), so the ratios show the CPU's work, not the
origin's latency; --drop-caches (root) drops the page cache before each run
instead.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

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


# The cold epoch through the Python Loader, in a process of its own.
COLD_CHILD = r"""
import json, resource, sys, time
import ssdfeed
source, cache, workers, resize_short, crop = sys.argv[1:6]
it = ssdfeed.Loader(source, cache=cache, prepare=ssdfeed.Prepare(resize_short=int(resize_short)),
                    augment=ssdfeed.RandomResizedCrop(int(crop)), batch_size=64, shuffle=True,
                    seed=0, workers=int(workers) or None)
ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
n = sum(int(labels.shape[0]) for _, labels in it)
t1, ru1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
print(json.dumps({"images": n, "seconds": t1 - t0, "cpu": cpu, "hits": it.stats().get("cache_hits", 0)}))
"""


def source_files(source):
    kind, _, path = source.partition(":")
    if not os.path.isdir(path):
        return [path] if os.path.isfile(path) else []
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


def warm_page_cache(source):
    """Reads the origin's files once, so each cold epoch is decode-bound."""
    for f in source_files(source):
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass


def decode_bound(args):
    out = subprocess.run([args.decode_bench, "--source", args.source, "--limit",
                          str(args.bound_images), "--rounds", "1", "--resize-short",
                          str(args.resize_short), "--json"],
                         check=True, capture_output=True, text=True).stdout
    rows = {r["name"]: r["images_per_s"] for r in json.loads(out)["rows"]}
    return {"full_decode": rows["libjpeg-turbo full decode (bound)"],
            "prepare": rows["ssdfeed decode+prepare (DCT scaling)"]}


def cold_epoch(args):
    root = tempfile.mkdtemp(prefix="ssdfeed-cold-fill-", dir=args.cache_parent)
    try:
        out = subprocess.run([sys.executable, "-c", COLD_CHILD, args.source, root,
                              str(args.workers), str(args.resize_short), str(args.crop)],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def vs_decode(args):
    warm_page_cache(args.source)
    cores = max(1, min(args.workers or os.cpu_count(), len(os.sched_getaffinity(0))))
    bounds, colds = [], []
    for r in range(args.repeat):
        steps = [("bound", decode_bound), ("cold", cold_epoch)]
        for name, fn in steps if r % 2 == 0 else steps[::-1]:
            subprocess.run(["sync"], check=True)
            res = fn(args)
            (bounds if name == "bound" else colds).append(res)
            if name == "bound":
                print(f"round {r} bound: full decode {res['full_decode']:.0f}/CPU-s, "
                      f"decode+prepare {res['prepare']:.0f}/CPU-s", file=sys.stderr)
            else:
                print(f"round {r} cold: {res['images'] / res['seconds']:.0f} images/s, "
                      f"{res['images'] / res['cpu']:.0f}/CPU-s, {res['cpu'] / res['seconds']:.2f} "
                      f"cores busy", file=sys.stderr)
    med = statistics.median
    bound = med(b["full_decode"] for b in bounds)
    prep = med(b["prepare"] for b in bounds)
    wall = med(c["images"] / c["seconds"] for c in colds)
    per_cpu = med(c["images"] / c["cpu"] for c in colds)
    busy = med(c["cpu"] / c["seconds"] for c in colds)
    print(f"cold fill vs the full-decode bound, medians of {args.repeat} alternating rounds "
          f"({args.source}, {colds[0]['images']} images, Python Loader, resize_short "
          f"{args.resize_short}, RandomResizedCrop {args.crop}, {args.workers or 'default'} "
          f"workers, {cores} cores, source files in the page cache, empty cache root)")
    print(f"libjpeg-turbo full decode (bound): {bound:.0f} images/s per core, "
          f"{bound * cores:.0f} for {cores} cores; ssdfeed decode+prepare {prep:.0f} per core")
    print(f"cold epoch: {wall:.0f} images/s ({busy:.2f} cores busy), {per_cpu:.0f} images per "
          f"CPU-second")
    print(f"cold / bound: {wall / (bound * cores):.2f}x per wall second for {cores} cores, "
          f"{per_cpu / bound:.2f}x per CPU-second")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True)
    p.add_argument("--cache", default="/tmp/ssdfeed-cold-fill")
    p.add_argument("--cli", default="build/ssdfeed")
    p.add_argument("--resize-short", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--drop-caches", action="store_true")
    p.add_argument("--vs-decode", action="store_true",
                   help="the Python Loader's cold epoch against the full-decode bound instead")
    p.add_argument("--decode-bench", default="build/bench/decode_bench")
    p.add_argument("--bound-images", type=int, default=300,
                   help="samples the bound decodes (the source's first)")
    p.add_argument("--crop", type=int, default=224)
    args = p.parse_args()
    if args.vs_decode:
        args.cache_parent = os.path.dirname(os.path.abspath(args.cache))
        return vs_decode(args)
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
