"""ssdfeed.warm(): fill a cache entry before training, as ``ssdfeed warm``."""

import os
from typing import Optional, Union

from ssdfeed import _ssdfeed
from ssdfeed.loader import _cache_root, _field_specs, _int
from ssdfeed.prepare import Prepare


def warm(source: Union[str, os.PathLike], *, cache: Union[str, os.PathLike, bool] = True,
         prepare: Prepare = Prepare(), workers: Optional[int] = None, on_error: str = "raise",
         image_key: Optional[str] = None, label_key: Optional[str] = None,
         cache_capacity: Optional[int] = None,
         fields: Optional[dict] = None) -> "_ssdfeed.WarmResult":
    """Prepares every sample of source into the cache entry a
    ``Loader(source, cache=cache, prepare=prepare, ...)`` with the same
    arguments reads, so its first epoch is a warm one. Resumable: a second
    call prepares only what is missing.

    Args: source, cache, prepare, on_error, image_key, label_key, fields
        and cache_capacity as for ``ssdfeed.Loader`` (``cache`` must name a
        root: True, the default, is the default root). workers: threads,
        None or 0 (default): one per core.

    Returns a ``WarmResult``: ``samples_total``, ``samples_present``,
    ``prepared``, ``cache_hits``, ``errors``, ``bytes_prepared``,
    ``skipped`` (with ``on_error="skip"``: ``id``, ``sample``, ``error``),
    ``cache_full``, ``complete`` (every sample stored or skipped), ``dir``.
    A full cache is not an error (``complete`` is False); a bad sample under
    ``on_error="raise"`` raises, naming its file. Ctrl-C stops the workers,
    syncs what was stored and raises KeyboardInterrupt.
    """
    if cache is False or cache is None:
        raise ValueError("warm needs a cache: cache must be True (the default root) or a "
                         "directory path")
    o = _ssdfeed.WarmOptions()
    o.cache.root = _cache_root(cache)
    if not isinstance(prepare, Prepare):
        raise ValueError(f"prepare must be an ssdfeed.Prepare, not {prepare!r}")
    o.prepare = prepare._spec()
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    o.source.on_error = _ssdfeed.OnError[on_error.upper()]
    o.source.image_key = image_key or ""
    o.source.label_key = label_key or ""
    o.source.fields = _field_specs(fields)
    o.cache.capacity_bytes = 0 if cache_capacity is None else _int("cache_capacity",
                                                                    cache_capacity, 1)
    o.workers = 0 if workers is None else _int("workers", workers, 0,
                                               " (0 or None: one per core)")
    return _ssdfeed.warm_with(os.fspath(source), o)
