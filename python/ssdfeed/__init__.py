"""ssdfeed: prepare once, cache on local SSD, serve shuffled augmented batches."""

from ssdfeed._ssdfeed import (
    CacheFullError,
    CacheUnavailableError,
    CorruptionError,
    Source,
    __version__,
    make_dataset,
)
from ssdfeed._item_tree import ItemFormatError
from ssdfeed.cache import CachedDataset, cache
from ssdfeed.loader import (Flip, Loader, RandomResizedCrop, ScaleJitterCrop, default_cache_dir,
                             merge_states)
from ssdfeed.prepare import Prepare
from ssdfeed.warm import warm

__all__ = [
    "CacheFullError",
    "CacheUnavailableError",
    "CachedDataset",
    "CorruptionError",
    "ItemFormatError",
    "Loader",
    "Prepare",
    "RandomResizedCrop",
    "Flip",
    "ScaleJitterCrop",
    "default_cache_dir",
    "Source",
    "cache",
    "__version__",
    "make_dataset",
    "merge_states",
    "warm",
]
