"""Caching your own PyTorch dataset with one line: ssdfeed.cache(dataset).

The dataset below is a user's own (decode + resize in __getitem__, returning
a PIL image and a class index, as torchvision's ImageFolder with a Resize
transform does). Wrapped with ssdfeed.cache, the unchanged DataLoader reads
each item from the local SSD cache after the first epoch; the random crop
and flip stay after the cache, different every epoch.

    python examples/cache_pytorch.py [DATA_DIR] [EPOCHS]

Without DATA_DIR a small ImageNet-like dataset is generated in a temporary
directory, and the cache goes there too (pass a DATA_DIR to keep both; the
cache then lives in $SSDFEED_CACHE or ~/.cache/ssdfeed).
"""

import os
import random
import sys
import tempfile
import time

import numpy as np
import torch
from PIL import Image

import ssdfeed


class MyImages(torch.utils.data.Dataset):
    """class-folder/*.jpg -> (PIL image, shorter side 144, class index)."""

    def __init__(self, root):
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.samples = [(os.path.join(root, c, f), k) for k, c in enumerate(classes)
                        for f in sorted(os.listdir(os.path.join(root, c)))]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        img = Image.open(path).convert("RGB")
        w, h = img.size
        s = 144 / min(w, h)
        return img.resize((round(w * s), round(h * s)), Image.BILINEAR), label


class RandomCropFlip(torch.utils.data.Dataset):
    """The per-epoch augmentation, after the cache: 128x128 crop, flip, to tensor."""

    def __init__(self, base):
        self.base = base

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        img, label = self.base[i]
        w, h = img.size
        x, y = random.randint(0, w - 128), random.randint(0, h - 128)
        img = img.crop((x, y, x + 128, y + 128))
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float() / 255, label


def main():
    tmp = None
    if len(sys.argv) > 1:
        data, cache = sys.argv[1], True
    else:
        tmp = tempfile.TemporaryDirectory(prefix="ssdfeed-cache-example-")
        data, cache = os.path.join(tmp.name, "data"), os.path.join(tmp.name, "cache")
        ssdfeed.make_dataset(data, format="folder", count=256, classes=4, min_side=160,
                             max_side=240)
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3

    dataset = MyImages(data)
    dataset = ssdfeed.cache(dataset, cache=cache)  # the one-line change
    loader = torch.utils.data.DataLoader(RandomCropFlip(dataset), batch_size=32, shuffle=True,
                                         num_workers=2)
    for epoch in range(epochs):
        t0, seen = time.perf_counter(), 0
        for images, labels in loader:
            seen += len(labels)
        dt = time.perf_counter() - t0
        print(f"epoch {epoch}: {seen} images in {dt:.2f} s ({seen / dt:.0f} images/s), "
              f"{dataset.present()}/{len(dataset)} items cached")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
