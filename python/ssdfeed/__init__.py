"""ssdfeed: prepare once, cache on local SSD, serve shuffled augmented batches."""

from ssdfeed import _moved
from ssdfeed._cache import CachedDataset, cache
from ssdfeed._errors import SkippedItemsError, WarmWorkerError
from ssdfeed._item_tree import ItemFormatError
from ssdfeed._ssdfeed import (
    CacheFullError,
    CacheUnavailableError,
    CorruptionError,
    Source,
    __version__,
    make_dataset,
)
from ssdfeed._warm import warm
from ssdfeed.loader import (Flip, ItemLoader, Loader, RandomResizedCrop, ScaleJitterCrop,
                             default_cache_dir, merge_states)
from ssdfeed.prepare import Prepare

# ssdfeed.cache and ssdfeed.warm are the functions above; scripts that
# imported from the modules of those names get their names with a warning.
_moved.install()

__all__ = [
    "CacheFullError",
    "CacheUnavailableError",
    "CachedDataset",
    "CorruptionError",
    "ItemFormatError",
    "ItemLoader",
    "Loader",
    "Prepare",
    "RandomResizedCrop",
    "Flip",
    "ScaleJitterCrop",
    "SkippedItemsError",
    "WarmWorkerError",
    "default_cache_dir",
    "Source",
    "cache",
    "__version__",
    "make_dataset",
    "merge_states",
    "warm",
]
