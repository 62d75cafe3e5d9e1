#!/usr/bin/env python3
"""When does ``ssdfeed.cache(dataset)`` pay under a plain DataLoader?

One dataset, four ways, in one run (2 DataLoader workers, batch 64,
shuffled; medians of --rounds):

  uncached      DataLoader(dataset): __getitem__ every epoch
  first fill    DataLoader(ssdfeed.cache(dataset)) on an empty entry (a
                fresh key each round): compute + store
  warm          DataLoader(cached) once the entry is full
  Loader(cached)  ssdfeed.torch.ItemLoader(cached): C++ threads read and batch
                the cached items, no Python per item

    python3 bench/cache_dataloader_bench.py [--item cheap|decode] [--count 4000] [--rounds 3]

--item cheap: the founding field report's shape of dataset, a float32
3x32x32 array and an int built from memory per item (~20 us): nothing to
save, so the cache can only add its read. --item decode: a JPEG (375-500 px)
decoded and resized to 256 with PIL per item, as ImageFolder + Resize(256):
the expensive, deterministic part a cache exists for.
"""
import argparse
import io
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import torch
from PIL import Image

import ssdfeed
import ssdfeed.torch


class Cheap(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n
        self.base = np.random.default_rng(0).random((3, 32, 32), dtype=np.float32)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.base + np.float32(i), i % 10


class Decode(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n
        rng = np.random.default_rng(0)
        self.jpegs = []
        for k in range(16):  # 16 distinct JPEGs reused: decode cost without the disk
            h, w = int(rng.integers(375, 501)), int(rng.integers(375, 501))
            arr = rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)
            b = io.BytesIO()
            Image.fromarray(arr).resize((w, h), Image.BILINEAR).save(b, "JPEG", quality=90)
            self.jpegs.append(b.getvalue())

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        img = Image.open(io.BytesIO(self.jpegs[i % len(self.jpegs)])).convert("RGB")
        w, h = img.size
        s = 256 / min(w, h)
        img = img.resize((round(w * s), round(h * s)), Image.BILINEAR)
        return np.asarray(img)[:224, :224].transpose(2, 0, 1).copy(), i % 10


def dataloader_epoch(ds, workers):
    dl = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers)
    t = time.perf_counter()
    n = sum(len(y) for _, y in dl)
    return n / (time.perf_counter() - t)


def loader_epoch(cached, workers):
    loader = ssdfeed.torch.ItemLoader(cached, batch_size=64, shuffle=True, num_workers=workers,
                                  pin_memory=False)
    t = time.perf_counter()
    n = sum(len(y) for _, y in loader)
    rate = n / (time.perf_counter() - t)
    loader.close()
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--item", choices=["cheap", "decode"], default="cheap")
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    dataset = (Cheap if a.item == "cheap" else Decode)(a.count)
    root = tempfile.mkdtemp(prefix="cache-dl-bench-")
    rates = {"uncached": [], "first fill": [], "warm": [], "Loader(cached)": []}
    try:
        for r in range(a.rounds):
            rates["uncached"].append(dataloader_epoch(dataset, a.workers))
            cached = ssdfeed.cache(dataset, key=f"bench-{a.item}-{r}", cache=root)
            rates["first fill"].append(dataloader_epoch(cached, a.workers))
            assert cached.present() == a.count, cached.present()
            rates["warm"].append(dataloader_epoch(cached, a.workers))
            rates["Loader(cached)"].append(loader_epoch(cached, a.workers))
            cached.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    base = med["uncached"]
    print(f"{a.count} items ({a.item}), DataLoader num_workers={a.workers}, batch 64, "
          f"medians of {a.rounds} rounds, {os.cpu_count()} CPUs:")
    for name, rate in med.items():
        spread = ", ".join(f"{x:.0f}" for x in rates[name])
        print(f"  {name:16s} {rate:10.0f} items/s  x{rate / base:5.2f} of uncached  "
              f"(epoch {a.count / rate:6.2f} s; rounds {spread})")


if __name__ == "__main__":
    main()
