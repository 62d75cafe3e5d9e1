#!/usr/bin/env python3
"""Before/after: ssdfeed's cold and warm epochs from two installs, measured
side by side in one run, so a change can show it kept (or gained) speed on a
noisy machine. Each interpreter must have its own ssdfeed installed; rounds
alternate which goes first.

    python3 bench/compare/ab.py --before OLD_VENV/bin/python --after NEW_VENV/bin/python \
        [--count 2000] [--repeat 5] [--work DIR]

Prints a markdown table of medians and the after/before ratio per epoch.
The epochs are the same as `run.py`'s ssdfeed rows (RandomResizedCrop 224 +
flip, batch 128, all cores).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run.py")


def epoch(python, data, cache, n):
    cmd = [python, RUN, "--one", "ssdfeed", "--data", data, "--cache", cache, "--epoch", str(n)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{python}: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["images_per_s"]


def make_data(python, data, count):
    marker = os.path.join(data, f".n{count}")
    if os.path.exists(marker):
        return
    shutil.rmtree(data, ignore_errors=True)
    code = ("import ssdfeed, sys; ssdfeed.make_dataset(sys.argv[1], format='folder', "
            "count=int(sys.argv[2]), classes=10, seed=0)")
    subprocess.run([python, "-c", code, data, str(count)], check=True)
    open(marker, "w").close()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="python with the old ssdfeed")
    ap.add_argument("--after", required=True, help="python with the new ssdfeed")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", default=os.path.join(HERE, "results", "work"))
    args = ap.parse_args()

    data = os.path.join(args.work, "data")
    make_data(args.after, data, args.count)
    rates = {(who, e): [] for who in ("before", "after") for e in ("cold", "warm")}
    for rep in range(args.repeat):
        order = ["before", "after"] if rep % 2 == 0 else ["after", "before"]
        for who in order:
            py = getattr(args, who)
            cache = os.path.join(args.work, f"ab-cache-{who}")
            shutil.rmtree(cache, ignore_errors=True)
            rates[(who, "cold")].append(epoch(py, data, cache, 0))
            rates[(who, "warm")].append(epoch(py, data, cache, 1))
            shutil.rmtree(cache, ignore_errors=True)
        print(f"round {rep + 1}/{args.repeat} done", flush=True)

    print(f"\n| epoch | before images/s (median) | after images/s (median) | after/before |")
    print("|---|---:|---:|---:|")
    for e in ("cold", "warm"):
        b = statistics.median(rates[("before", e)])
        a = statistics.median(rates[("after", e)])
        print(f"| {e} | {b:,.0f} | {a:,.0f} | {a / b:.2f}x |")
    print(f"\n{args.count} images, {args.repeat} rounds, alternating order; "
          f"all runs: {json.dumps({f'{w} {e}': [round(x) for x in v] for (w, e), v in rates.items()})}")


if __name__ == "__main__":
    main()
