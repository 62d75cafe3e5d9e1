"""ssdfeed.Loader: shuffled, augmented batches from a cached dataset."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from ssdfeed import _ssdfeed
from ssdfeed.prepare import Prepare, _pair


def default_cache_dir() -> str:
    """$SSDFEED_CACHE, then ~/.cache/ssdfeed (as the CLI)."""
    return os.environ.get("SSDFEED_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "ssdfeed")


@dataclass(frozen=True)
class RandomResizedCrop:
    """torchvision's RandomResizedCrop (same size/scale/ratio meaning), plus
    a horizontal flip with probability 1/2 when flip is true. Applied after
    the cache, with randomness keyed by (seed, epoch, sample id)."""

    size: Union[int, Tuple[int, int]]
    scale: Tuple[float, float] = (0.08, 1.0)
    ratio: Tuple[float, float] = (3 / 4, 4 / 3)
    flip: bool = True


class Loader:
    """Iterates (images, labels) numpy batches; see DESIGN.md "Python".

    cache: a directory (the cache root), True for the default root, or None
    to prepare from the origin every epoch. Arrays are views of a pooled
    buffer (no copy); holding on to them is safe: the buffer is recycled only
    once nothing refers to it.
    """

    def __init__(self, source: str, *, cache: Union[str, os.PathLike, bool, None] = None,
                 prepare: Prepare = Prepare(), augment: Optional[RandomResizedCrop] = None,
                 batch_size: int = 1, shuffle: bool = False, seed: int = 0,
                 workers: Optional[int] = None, prefetch: int = 2, rank: int = 0,
                 world_size: int = 1, drop_last: bool = False, on_error: str = "raise",
                 dtype: str = "uint8", layout: str = "NHWC",
                 mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None,
                 image_key: Optional[str] = None, label_key: Optional[str] = None,
                 cache_capacity: Optional[int] = None, metrics: bool = True,
                 metrics_port: Optional[int] = None, metrics_host: str = "127.0.0.1"):
        a = _ssdfeed.LoaderArgs()
        a.source = str(source)
        if cache is True:
            cache = default_cache_dir()
        a.cache = "" if cache in (None, False) else os.fspath(cache)
        a.cache_capacity = int(cache_capacity or 0)
        # metrics: publish counters for `ssdfeed serve-metrics`; metrics_port:
        # also serve this process's own /metrics on metrics_host:metrics_port.
        a.metrics = bool(metrics)
        a.metrics_port = int(metrics_port or 0)
        a.metrics_host = str(metrics_host)
        kw = prepare._kwargs()
        a.resize_short, a.max_long = kw["resize_short"], kw["max_long"]
        a.resize, a.center_crop, a.gray = kw["resize"], kw["center_crop"], kw["gray"]
        if augment is not None:
            a.augment = True
            a.size = _pair(augment.size)
            a.scale = tuple(float(x) for x in augment.scale)
            a.ratio = tuple(float(x) for x in augment.ratio)
            a.flip = bool(augment.flip)
        a.batch_size = int(batch_size)
        a.shuffle = bool(shuffle)
        a.seed = int(seed)
        a.workers = int(workers or 0)
        a.prefetch = int(prefetch)
        a.rank, a.world_size = int(rank), int(world_size)
        a.drop_last = bool(drop_last)
        a.on_error = on_error
        a.dtype, a.layout = dtype, layout
        channels = 1 if prepare.color == "gray" else 3
        if mean is not None:
            a.mean = tuple(float(x) for x in (list(mean) * 3)[:3]) if channels == 1 else tuple(mean)
        if std is not None:
            a.std = tuple(float(x) for x in (list(std) * 3)[:3]) if channels == 1 else tuple(std)
        a.image_key = image_key or ""
        a.label_key = label_key or ""
        self._args = a
        self._prepare, self._augment = prepare, augment
        self._impl = _ssdfeed.NativeLoader.open(a)
        self._epoch = 0
        self._resume = False

    # -- iteration --------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Chooses the epoch (permutation and augmentation) of the next pass."""
        self._epoch = int(epoch)
        self._resume = False
        self._impl.set_epoch(self._epoch)

    def __iter__(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        if not self._resume:
            self._impl.set_epoch(self._epoch)  # a fresh pass over the epoch
        self._resume = False
        impl = self._impl
        while True:
            batch = impl.next()
            if batch is None:
                return
            yield batch

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return self._impl.num_batches()

    @property
    def num_samples(self) -> int:
        return self._impl.num_samples()

    @property
    def sample_shape(self) -> Tuple[Optional[int], Optional[int], int]:
        """(H, W, C) of every sample, None where it varies."""
        c = 1 if self._prepare.color == "gray" else 3
        if self._augment is not None:
            h, w = _pair(self._augment.size)
        elif self._prepare.center_crop is not None:
            h, w = _pair(self._prepare.center_crop)
        elif self._prepare.resize is not None:
            h, w = _pair(self._prepare.resize)
        else:
            h = w = None
        return (h, w, c)

    @property
    def dtype(self) -> str:
        return self._args.dtype

    @property
    def layout(self) -> str:
        return self._args.layout

    def close(self) -> None:
        """Stops the workers (also done when the loader is collected)."""
        self._impl.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- numbers and state ---------------------------------------------------
    def stats(self) -> dict:
        """cache_hits, cache_misses, cache_bytes, origin_bytes, decode_errors,
        corrupt_records, wait_seconds and more (cumulative): the numbers this
        job publishes to `ssdfeed serve-metrics` (docs/metrics.md maps each
        key to its Prometheus metric)."""
        return self._impl.stats()

    def state_dict(self) -> dict:
        """Where iteration stands (epoch, batches consumed) for exact resume."""
        return dict(self._impl.state())

    def load_state_dict(self, state: dict) -> None:
        """The next iteration continues exactly after the saved batch."""
        self._impl.load_state(dict(state))
        self._epoch = int(state["epoch"])
        self._resume = True

