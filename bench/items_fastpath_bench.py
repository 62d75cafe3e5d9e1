#!/usr/bin/env python3
"""A cached Python dataset served three ways, in one run: the C++ loader
(``ssdfeed.ItemLoader(cached)``: no Python per cached item), ``cached[i]`` item
by item in this process (one ItemEntry.get and decode each, as a DataLoader
worker does, stacked into batches of 256), and a torch DataLoader over ``cached`` with 2 workers. Items are a float32
array and an int label; the entry is filled first, then each way reads one
shuffled warm epoch (median of --rounds).

    python3 bench/items_fastpath_bench.py [--count 20000] [--shape 8] [--rounds 3]

Prints items/s of each and the ratios. A shape of 3,64,64 gives 48 KiB
items, where the copies (page cache -> record -> batch) bound all three.
"""
import argparse
import statistics
import tempfile
import time

import numpy as np

import ssdfeed


class Items:
    def __init__(self, n, shape):
        self.n, self.shape = n, shape

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full(self.shape, i, np.float32), i


def timed(fn):
    t = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--shape", default="8", help="item array shape, e.g. 3,64,64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    root = tempfile.mkdtemp(prefix="items-bench-")
    cached = ssdfeed.cache(Items(a.count, shape), key=f"items-bench-{a.shape}", cache=root)
    cached.warm(workers=1, progress=False)

    def fast():
        loader = ssdfeed.ItemLoader(cached, batch_size=256, shuffle=True, workers=a.workers)
        return sum(len(b[1]) for b in loader)

    def per_item():  # in this process, batched as the loader does
        order = np.random.permutation(a.count)
        for k in range(0, a.count, 256):
            items = [cached[int(i)] for i in order[k:k + 256]]
            np.stack([x for x, _ in items]), np.array([y for _, y in items])
        return a.count

    def dataloader():
        import torch

        dl = torch.utils.data.DataLoader(cached, batch_size=256, shuffle=True,
                                         num_workers=a.workers)
        return sum(len(b[1]) for b in dl)

    ways = {"ssdfeed.Loader(cached)": fast, "cached[i] + np.stack, 1 process": per_item}
    try:
        import torch  # noqa: F401

        ways[f"DataLoader(cached, num_workers={a.workers})"] = dataloader
    except ImportError:
        pass
    rates = {name: statistics.median(timed(fn) for _ in range(a.rounds))
             for name, fn in ways.items()}
    base = rates["ssdfeed.Loader(cached)"]
    print(f"{a.count} items of float32 {shape} + int, warm, shuffled, batch 256:")
    for name, r in rates.items():
        print(f"  {name:36s} {r:12.0f} items/s   fast path x{base / r:.1f}")


if __name__ == "__main__":
    main()
