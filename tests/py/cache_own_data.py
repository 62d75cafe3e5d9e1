"""Datasets for test_cache_own.py: importable by spawn workers, by separate
jobs (subprocesses) and by ``ssdfeed warm --python cache_own_data:FACTORY``.

Each computation leaves a file in $CACHE_OWN_COUNTER (the directory is read
at call time, not stored in the dataset, so two jobs with two counters still
share one cache entry): counting computations across processes needs no
shared memory.
"""

import collections
import os
import time
import uuid

import numpy as np
import torch
from PIL import Image

N = 24


def count(i: int) -> None:
    d = os.environ.get("CACHE_OWN_COUNTER")
    if d:
        with open(os.path.join(d, f"{i}.{os.getpid()}.{uuid.uuid4().hex}"), "x"):
            pass


def counts(directory) -> dict:
    """{index: computations} from a counter directory."""
    out: dict = {}
    for name in os.listdir(directory):
        i = int(name.split(".")[0])
        out[i] = out.get(i, 0) + 1
    return out


def block_if_asked(i: int) -> None:
    """With $CACHE_OWN_BLOCK_AT=k, item k announces itself (a file in
    $CACHE_OWN_COUNTER's parent named "blocked", holding the pid of the
    process computing it, renamed into place whole) and never returns: the
    test then kills or interrupts the job mid-fill."""
    at = os.environ.get("CACHE_OWN_BLOCK_AT")
    if at is not None and int(at) == i:
        parent = os.path.join(os.environ["CACHE_OWN_COUNTER"], "..")
        with open(os.path.join(parent, "blocked.tmp"), "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.path.join(parent, "blocked.tmp"), os.path.join(parent, "blocked"))
        while True:
            time.sleep(3600)


class MixedDataset(torch.utils.data.Dataset):
    """A user's dataset: an image, arrays, a tensor, numbers, text, bytes."""

    def __init__(self, n: int = N):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        block_if_asked(i)
        count(i)
        rng = np.random.default_rng(i)
        image = Image.fromarray(rng.integers(0, 256, (6 + i % 3, 8, 3), dtype=np.uint8))
        return {
            "image": image,
            "mask": rng.integers(0, 5, (6, 8)).astype(np.uint8),
            "feats": torch.from_numpy(rng.standard_normal(4).astype(np.float32)),
            "label": i % 5,
            "weight": float(i) / 3,
            "caption": f"item {i} ✓",
            "raw": bytes([i % 256]) * 3,
            "extra": (None, [True, np.float64(i)]),
        }


Sample = collections.namedtuple("Sample", "x label")


class NamedDataset(torch.utils.data.Dataset):
    """Items of a namedtuple class this module defines (loaded wherever the
    dataset is unpickled, as in spawn workers)."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return Sample(np.full(3, i, dtype=np.int32), i)


class ArrayDataset(torch.utils.data.Dataset):
    """Fixed-shape items that the default collate stacks."""

    def __init__(self, n: int = N):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        count(i)
        return np.full((3, 2), i, dtype=np.float32), i


class SizedDataset(torch.utils.data.Dataset):
    """n items of `size` bytes each (item i: `size` bytes of value i % 251,
    and i): fills a small cache root as fast as the test wants."""

    def __init__(self, n: int, size: int):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full(self.size, i % 251, dtype=np.uint8), i


def sized_item_ok(item, i: int, size: int) -> bool:
    a, j = item
    return j == i and a.shape == (size,) and a.dtype == np.uint8 and bool((a == i % 251).all())


class FailingDataset(torch.utils.data.Dataset):
    def __init__(self, n: int = 8, bad=(3,)):
        self.n, self.bad = n, tuple(bad)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        count(i)
        if i in self.bad:
            raise ValueError(f"corrupt file for {i}")
        return np.array([i])


class SetDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return (i, {"boxes": {1, 2}})


def make_mixed():
    return MixedDataset()


def make_cached_mixed():
    import ssdfeed

    return ssdfeed.cache(MixedDataset(), key="mixed-from-factory")
