"""The main job on a built-in default: generate a dataset, then run two epochs
through the loader with a local cache, printing the cold/warm difference;
then the same through `ssdfeed bench loader --report` (a cold and a warm
epoch, then the compute-floor "headspace" one), whose page it names.

    python -m ssdfeed.demo [--dir .demo] [--count 3000] [--epochs 2] [--no-report]
"""

import argparse
import os
import shutil
import subprocess
import time

import ssdfeed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=".demo", help="where the dataset and cache go")
    ap.add_argument("--count", type=int, default=3000, help="images to generate")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--workers", type=int, default=0, help="0: one per core")
    ap.add_argument("--no-report", action="store_true",
                    help="skip the bench report (DIR/report/report.html)")
    args = ap.parse_args(argv)

    data = os.path.join(args.dir, "data")
    stamp = os.path.join(data, f".complete-{args.count}")
    if not os.path.exists(stamp):
        shutil.rmtree(data, ignore_errors=True)
        t0 = time.perf_counter()
        rep = ssdfeed.make_dataset(data, format="folder", count=args.count, classes=10, seed=0)
        open(stamp, "w").close()
        print(f"generated {rep['samples']} JPEGs ({rep['bytes'] / rep['samples'] / 1e3:.0f} KB "
              f"mean) in {time.perf_counter() - t0:.1f} s: {data}")
    # A fresh cache every run, so the first epoch is really cold.
    cache = os.path.join(args.dir, "cache")
    shutil.rmtree(cache, ignore_errors=True)

    loader = ssdfeed.Loader(f"folder:{data}", cache=cache,
                            prepare=ssdfeed.Prepare(resize_short=256),
                            augment=ssdfeed.RandomResizedCrop(224, flip=True),
                            batch_size=args.batch_size, shuffle=True, seed=0,
                            workers=args.workers or None)
    print(f"ssdfeed {ssdfeed.__version__}: {loader.num_samples} samples, batch "
          f"{args.batch_size}, RandomResizedCrop 224 + flip, cache {cache}")
    print(f"{'epoch':>5} {'images/s':>10} {'hit rate':>9} {'wait/batch':>11} {'origin MB':>10}")
    before = loader.stats()
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        t0 = time.perf_counter()
        n = batches = 0
        for images, labels in loader:
            n += len(labels)
            batches += 1
        secs = time.perf_counter() - t0
        s = loader.stats()
        hits = s["cache_hits"] - before["cache_hits"]
        misses = s["cache_misses"] - before["cache_misses"]
        wait = (s["wait_seconds"] - before["wait_seconds"]) / max(1, batches)
        origin = (s["origin_bytes"] - before["origin_bytes"]) / 1e6
        print(f"{epoch:>5} {n / secs:>10.0f} {hits / max(1, hits + misses):>9.0%} "
              f"{wait * 1e3:>9.1f}ms {origin:>10.1f}")
        before = s
    # The bench below starts cold (--fresh removes the entry), which a
    # loader still open holds in use.
    loader.close()
    del loader
    if args.no_report:
        return 0
    return bench_report(args, data, cache)


def bench_report(args, data: str, cache: str) -> int:
    """`ssdfeed bench loader --report`, from a cold cache, with the demo's
    options: its table, then where the page is."""
    exe = os.path.join(os.path.dirname(os.path.abspath(ssdfeed.__file__)), "_bin", "ssdfeed")
    report = os.path.join(args.dir, "report")
    cmd = [exe, "bench", "loader", "--source", f"folder:{data}", "--cache", cache, "--fresh",
           "--epochs", "2", "--resize-short", "256", "--crop", "224",
           "--batch", str(args.batch_size), "--headspace", "--report", report]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    print("\n$ ssdfeed " + " ".join(cmd[1:]))
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    raise SystemExit(main())
