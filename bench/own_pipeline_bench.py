#!/usr/bin/env python3
"""The PyTorch ImageNet recipe with and without ssdfeed.cache, in one run.

The recipe: an ImageFolder whose transform decodes and resizes
(``Resize(256)``), then per epoch a random crop (``RandomResizedCrop(224)``
with --crop rrc, ``RandomCrop(224)`` with --crop random) and a horizontal
flip, ``ToTensor``, and a DataLoader with 2 workers, batch 64, shuffled.
Cached, the one line ``ssdfeed.cache(ImageFolder(root, transform=Resize(256)))``
stores the resized PIL images; the random crop, flip and ToTensor stay after
the cache (a different crop every epoch).

The dataset is ImageNet-like JPEGs (``ssdfeed.make_dataset`` folder format,
sides 375..500 as ImageNet's typical 500x375). The cache is filled first
(``cached.warm``); then uncached and warm cached epochs alternate for
--rounds rounds, and the medians and their ratio are printed (images/s by
wall clock, and per CPU-second of this process and its workers, which
neighbours on a shared machine skew less).

    python3 bench/own_pipeline_bench.py [--count 2000] [--workers 2] [--rounds 3]

Target (issue 29): a warm cached epoch >= 4x the uncached one.

torchvision's ImageFolder and transforms are used when torchvision imports;
otherwise the same steps written with PIL (same decode, same bilinear
antialiased resize, same crops) stand in, and the report says so.
"""
import argparse
import math
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
from PIL import Image

import ssdfeed

TARGET = 4.0


# ---------------------------------------------------------------- the recipe
def _torchvision():
    try:
        import torchvision  # noqa: F401
        from torchvision import datasets, transforms

        return datasets, transforms
    except Exception:  # noqa: BLE001 (a broken install raises RuntimeError)
        return None


class PilImageFolder(torch.utils.data.Dataset):
    """torchvision's ImageFolder: class folders, images opened with PIL and
    converted to RGB, (image, class index) items."""

    def __init__(self, root, transform=None):
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.samples = [(os.path.join(root, c, f), k) for k, c in enumerate(classes)
                        for f in sorted(os.listdir(os.path.join(root, c)))]
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, target = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        if self.transform is not None:
            img = self.transform(img)
        return img, target


class PilResize:
    """transforms.Resize(size): shorter side to size, bilinear, antialiased."""

    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        if w <= h:
            nw, nh = self.size, int(self.size * h / w)
        else:
            nw, nh = int(self.size * w / h), self.size
        return img.resize((nw, nh), Image.BILINEAR)

    def __repr__(self):
        return f"PilResize(size={self.size})"


class PilRandomResizedCrop:
    """transforms.RandomResizedCrop(size) (scale 0.08..1, ratio 3/4..4/3)."""

    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        area = w * h
        for _ in range(10):
            target = area * random.uniform(0.08, 1.0)
            ratio = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
            cw, ch = int(round(math.sqrt(target * ratio))), int(round(math.sqrt(target / ratio)))
            if 0 < cw <= w and 0 < ch <= h:
                x, y = random.randint(0, w - cw), random.randint(0, h - ch)
                break
        else:
            cw, ch = min(w, h), min(w, h)
            x, y = (w - cw) // 2, (h - ch) // 2
        return img.resize((self.size, self.size), Image.BILINEAR, box=(x, y, x + cw, y + ch))


class PilRandomCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        x, y = random.randint(0, w - self.size), random.randint(0, h - self.size)
        return img.crop((x, y, x + self.size, y + self.size))


def pil_flip(img):
    return img.transpose(Image.FLIP_LEFT_RIGHT) if random.random() < 0.5 else img


def pil_to_tensor(img):
    return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float().div_(255)


def recipe(crop):
    """(ImageFolder class, Resize(256), the after-cache transform, what)."""
    tv = _torchvision()
    if tv is not None:
        datasets, T = tv
        after = T.Compose([T.RandomResizedCrop(224) if crop == "rrc" else T.RandomCrop(224),
                           T.RandomHorizontalFlip(), T.ToTensor()])
        return datasets.ImageFolder, T.Resize(256), after, "torchvision"
    steps = [PilRandomResizedCrop(224) if crop == "rrc" else PilRandomCrop(224), pil_flip,
             pil_to_tensor]

    def after(img):
        for s in steps:
            img = s(img)
        return img

    return PilImageFolder, PilResize(256), after, "PIL stand-ins (torchvision does not import)"


class Augmented(torch.utils.data.Dataset):
    """The per-epoch transform, after the (cached) dataset."""

    def __init__(self, base, transform):
        self.base, self.transform = base, transform

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        img, target = self.base[i]
        return self.transform(img), target


# ---------------------------------------------------------------- measuring
def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def epoch(dataset, workers, batch):
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True,
                                         num_workers=workers)
    t0, c0, n = time.perf_counter(), cpu_seconds(), 0
    for x, _ in loader:
        n += x.shape[0]
    return n / (time.perf_counter() - t0), n / max(cpu_seconds() - c0, 1e-9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--crop", choices=["rrc", "random"], default="rrc")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    a = ap.parse_args()

    work = a.dir or tempfile.mkdtemp(prefix="own-pipeline-bench-")
    data_dir, cache_dir = os.path.join(work, "data"), os.path.join(work, "cache")
    if not os.path.isdir(data_dir):
        ssdfeed.make_dataset(data_dir, format="folder", count=a.count, classes=a.classes, seed=1,
                             min_side=375, max_side=500)
    folder, resize, after, what = recipe(a.crop)
    plain = Augmented(folder(data_dir, transform=resize), after)
    cached_base = ssdfeed.cache(folder(data_dir, transform=resize), cache=cache_dir)
    cached = Augmented(cached_base, after)  # the one-line change is cached_base

    t0 = time.perf_counter()
    fill = cached_base.warm(workers=a.workers, progress=False)
    fill_s = time.perf_counter() - t0
    print(f"recipe: {what}; {len(plain)} JPEGs (sides 375..500), Resize(256) cached, "
          f"{'RandomResizedCrop' if a.crop == 'rrc' else 'RandomCrop'}(224)+flip+ToTensor after, "
          f"DataLoader workers={a.workers} batch={a.batch} shuffle")
    print(f"fill: {fill['computed']} items in {fill_s:.1f} s ({fill['computed'] / fill_s:.0f}/s), "
          f"{fill['present']}/{fill['items']} present")
    epoch(cached, a.workers, a.batch)  # first-touch of the page cache and the workers' imports
    rows = {"uncached": [], "cached": []}
    for r in range(a.rounds):
        for name, ds in (("uncached", plain), ("cached", cached)):
            rows[name].append(epoch(ds, a.workers, a.batch))
            wall, cpu = rows[name][-1]
            print(f"  round {r + 1} {name:9s} {wall:8.0f} images/s  {cpu:8.0f} images/CPU-s",
                  flush=True)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in rows.items()}
    ratio, cpu_ratio = (med["cached"][0] / med["uncached"][0],
                        med["cached"][1] / med["uncached"][1])
    print(f"median uncached {med['uncached'][0]:.0f} images/s, warm cached "
          f"{med['cached'][0]:.0f} images/s: {ratio:.2f}x (per CPU-second {cpu_ratio:.2f}x); "
          f"target >= {TARGET}x: {'met' if ratio >= TARGET else 'NOT met'}")
    print("command: python3 bench/own_pipeline_bench.py " + " ".join(sys.argv[1:]))
    if a.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
