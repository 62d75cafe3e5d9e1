"""The fast path of a cached dataset: ``ssdfeed.ItemLoader(cached)`` and
``ssdfeed.torch.ItemLoader(cached)`` serve ``ssdfeed.cache(dataset)`` with
the C++ workers (``Loader(cached)`` still does, with a DeprecationWarning).
A cached item is read, checked and collated with no Python per
sample; a missing one is computed by ``cached._compute_fields(i)`` (under
the GIL, from a worker thread) and stored, as ``cached[i]`` would.

What a cached dataset gives this module (duck-typed, so no import cycle):
``_uri``, ``_identity``, ``__len__``, ``_compute_fields(i)`` (the item's
record fields), ``_cache_root`` (None or "" for no cache), ``_capacity``
(0: the default), ``_open_entry()`` (its ``ItemEntry``) and optionally
``_group_shared`` (default False) and ``_entry_or_none()`` (the entry, or
None while none can be had: then item 0 is computed, not stored).

Batches have the structure of item 0 (``_items.tree_of``), each leaf
replaced by the batch of that leaf: numbers, numpy arrays, tensors and PIL
images of array modes stacked into one array (N, ...) when every item's has
one shape and dtype, else a list of per-item arrays; str and bytes leaves a
list. ``ssdfeed.torch.Loader`` gives torch tensors where the numpy loader
gives arrays (as DataLoader's default collate: ints int64, floats float64).
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any, Dict, Optional


from ssdfeed import _ssdfeed

# Loaders whose C++ workers may call into Python: stopped before the
# interpreter finalizes, when a worker could no longer take the GIL.
_live = weakref.WeakSet()


def track(loader) -> None:
    _live.add(loader)


@atexit.register
def _stop_live_loaders() -> None:
    for loader in list(_live):
        try:
            loader.close()
        except Exception:  # noqa: BLE001 (exiting: nothing to report to)
            pass


def is_cached_dataset(x) -> bool:
    """True for what ``ssdfeed.cache()`` returns."""
    return hasattr(x, "_compute_fields") and hasattr(x, "_uri") and hasattr(x, "_identity")


def require_cached_dataset(x, who: str) -> None:
    """ItemLoader's source is a cached dataset and nothing else."""
    if not is_cached_dataset(x):
        raise TypeError(f"{who} takes what ssdfeed.cache(dataset) returns, not "
                        f"{type(x).__name__}; a source URI or directory goes to Loader")


def _first_fields(cached, skip: bool = False) -> list:
    """The first item's fields (item 0's, or with skip the first that
    computes): from the entry (stored there if missing), else computed."""
    tries = min(len(cached), 256) if skip else 1
    for i in range(tries):
        try:
            entry = _entry_if_any(cached) if cached._cache_root else None
            if entry is not None:
                return entry.get(i)
            return cached._compute_fields(i)
        except Exception:  # noqa: BLE001 (on_error="skip": the next item gives the structure)
            if i + 1 == tries:
                raise
    raise AssertionError("unreachable")


def _entry_if_any(cached):
    """The cached dataset's entry, or None while none can be had."""
    maybe = getattr(cached, "_entry_or_none", None)
    return maybe() if maybe is not None else cached._open_entry()


def refuse_image_options(given: Dict[str, Any]) -> None:
    """A cached dataset's items are served as they are: no image options."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(
                f"ssdfeed.ItemLoader(cached dataset) does not take {name}=: items are served as "
                f"the dataset gave them (no decoding, augmentation or pixel conversion); "
                f"transform the batches in your loop")


def fill_options(o, cached, cache, cache_capacity: Optional[int], on_error: str) -> None:
    """LoaderOptions reading the cached dataset's entry through an ItemSource."""
    from ssdfeed import _items

    if not len(cached):
        raise ValueError(f"{cached._uri} has no items")
    first = _first_fields(cached, on_error == "skip")
    _checked_tree(cached, first)  # a clear error for a non-item dataset or a bad tree
    fields = [(f[0], int(f[1])) for f in first]
    o.source = cached._uri
    o.source_object = _ssdfeed.ItemSource(len(cached), cached._uri, cached._identity,
                                          fields, cached._compute_fields, on_error=on_error)
    if cache is not True and cache is not None:
        raise ValueError("ssdfeed.ItemLoader(cached dataset) uses the dataset's own cache "
                         "(ssdfeed.cache(dataset, cache=...)); leave cache= out")
    o.cache.root = cached._cache_root or ""
    o.cache.group_shared = getattr(cached, "_group_shared", False)
    capacity = cache_capacity if cache_capacity is not None else cached._capacity
    o.cache.capacity_bytes = int(capacity or 0)
    o.source_options.on_error = _ssdfeed.OnError.parse(on_error)


class ItemBatches:
    """Turns the native loader's batch dicts into the items' structure."""

    def __init__(self, cached, tensors: bool = False, skip: bool = False):
        from ssdfeed import _items

        fields = _first_fields(cached, skip)
        self._tree = _checked_tree(cached, fields)
        self._tree_bytes = bytes(_tree_field(fields))
        self._nodes = _items.leaf_nodes(self._tree)
        self._uri = cached._uri
        self.tensors = tensors

    def convert(self, batch: dict):
        from ssdfeed import _items

        for t in batch.get(_items.TREE, ()):
            if bytes(t) != self._tree_bytes:
                raise ValueError(
                    f"{self._uri}: items of different structures in one batch (item 0's is "
                    f"{self._tree_bytes[:200]!r}, another's {bytes(t)[:200]!r}): the fast "
                    f"path serves items of one structure; use a torch DataLoader over the "
                    f"cached dataset instead")
        leaves = {n["L"]: _items.batch_leaf(n, batch[n["L"]], self.tensors)
                  for n in self._nodes}
        return _items.unflatten(self._tree, leaves)


def _checked_tree(cached, fields):
    """The first item's tree, checked (every later item's tree must be the
    same bytes); a bad one is refused naming the dataset."""
    from ssdfeed import _items

    try:
        return _items.tree_of(fields)
    except _items.ItemFormatError as e:
        raise _items.ItemFormatError(f"{cached._uri} (first item): {e}") from None


def _tree_field(fields) -> bytes:
    from ssdfeed import _items

    for f in fields:
        if f[0] == _items.TREE:
            return f[2] if len(f) == 3 else f[4]
    raise ValueError("the item's fields have no __tree__ field")
