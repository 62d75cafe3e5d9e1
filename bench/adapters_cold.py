"""The cold epoch through each Python adapter: numpy (ssdfeed.Loader),
ssdfeed.torch and ssdfeed.tf, on the same settings, each in a fresh process
with a fresh cache root, in alternating order. Prints images/s and the
process's CPU seconds per wall second (how many cores it kept busy).

    python bench/adapters_cold.py --source folder:DIR [--repeat 3] [--workers N]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, resource, sys, time
import ssdfeed
adapter, source, cache, workers, batch = sys.argv[1:6]
kw = dict(cache=cache, prepare=ssdfeed.Prepare(resize_short=256),
          augment=ssdfeed.RandomResizedCrop(224), batch_size=int(batch), shuffle=True, seed=0,
          workers=int(workers) or None)
if adapter == "numpy":
    it = ssdfeed.Loader(source, **kw)
elif adapter == "torch":
    import ssdfeed.torch
    it = ssdfeed.torch.Loader(source, pin_memory=False, **kw)
else:
    import ssdfeed.tf
    it = ssdfeed.tf.dataset(source, **kw)
ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
n = sum(int(labels.shape[0]) for _, labels in it)
t1, ru1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
print(json.dumps({"images": n, "seconds": t1 - t0, "cpu": cpu}))
"""


def one(adapter, source, workers, batch):
    root = tempfile.mkdtemp(prefix="ssdfeed-cold-")
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, adapter, source, root, str(workers),
                            str(batch)], capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--adapters", default="numpy,torch,tf")
    a = ap.parse_args()
    names = a.adapters.split(",")
    got = {n: [] for n in names}
    for r in range(a.repeat):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            res = one(n, a.source, a.workers, a.batch)
            got[n].append(res)
            print(f"round {r} {n}: {res['images'] / res['seconds']:.0f} images/s, "
                  f"{res['cpu'] / res['seconds']:.2f} cores", flush=True)
    for n in names:
        rates = sorted(x["images"] / x["seconds"] for x in got[n])
        cores = statistics.median(x["cpu"] / x["seconds"] for x in got[n])
        print(f"{n}: median {statistics.median(rates):.0f} images/s "
              f"(range {rates[0]:.0f}-{rates[-1]:.0f}), {cores:.2f} cores")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
