"""ssdfeed.cache(dataset): cache any map-style dataset's items on local SSD.

``cached = ssdfeed.cache(dataset)`` is a drop-in replacement for ``dataset``
in an unchanged ``torch.utils.data.DataLoader``: ``cached[i]`` equals
``dataset[i]`` (same values, same types) and is computed once, then read
from the cache entry by every process that opens it (DataLoader workers,
other jobs, later runs). The entry is an ordinary ssdfeed entry: capacity,
LRU, checksums, metrics and ``ssdfeed cache ls/verify/gc/rm/export/import``
work for it.
"""

from __future__ import annotations

import hashlib
import inspect
import marshal
import multiprocessing
import multiprocessing.util
import numbers
import os
import re
import sys
import time
import types
import warnings
from typing import Any, Dict, List, Optional, Union

from ssdfeed import _items, _moved, _ssdfeed
from ssdfeed._errors import SkippedItemsError
from ssdfeed.loader import _bool, _cache_root, _int

_ON_ERROR = ("raise", "skip")

# Attributes of a dataset whose values go into the default identity: plain
# settings (a root path, a split name, a size), not data.
_SETTING_TYPES = (str, bytes, bool, int, float, type(None))


# "<function f at 0x7f...>": an address differs from run to run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def cache(dataset, *, key: Optional[str] = None,
          cache: Union[bool, str, os.PathLike] = True, cache_capacity: Optional[int] = None,
          on_error: str = "raise", group_shared: bool = False,
          capacity: Optional[int] = None) -> "CachedDataset":
    """Wraps a map-style dataset (``__len__`` and ``__getitem__``) so that each
    item is computed once and then served from the local SSD cache.

    Args:
        dataset: any object with ``__len__`` and ``__getitem__(int)``: a torch
            ``Dataset``, a torchvision ``ImageFolder``, a list...
        key: names the data. The entry's identity is ``key`` plus
            ``len(dataset)``; changed data under an unchanged key must change
            the key. Default None: the dataset's class (module and qualified
            name), the source code of its class and base classes (so changed
            ``__getitem__`` code never serves stale items), its callable
            attributes (e.g. a torchvision ``transform``: class source and
            repr) and its plain settings (str, int, float, bool attributes
            such as a root path), plus ``len(dataset)``.
        cache: True (default): the default cache root (``$SSDFEED_CACHE``,
            else ``~/.cache/ssdfeed``), as ``ssdfeed.Loader``; a directory
            path; or False: no cache (``cached[i]`` is ``dataset[i]``).
        cache_capacity: most bytes the cache root may hold (int >= 1), as
            ``ssdfeed.Loader``'s; default None: as every other entry (now +
            80% of free space). ``capacity=``, its old name, is deprecated.
        on_error: "raise" (default): an exception in ``dataset[i]``
            propagates as itself with the index added to its message.
            "skip": the item is counted, named on stderr and in
            ``cached.skipped``, and ``cached[i]`` returns the next item that
            does not fail (i+1, i+2, ..., wrapping), so an unchanged
            DataLoader keeps going; ``ssdfeed.ItemLoader(cached)`` drops it.
            An unsupported item type is a TypeError in both modes.
        group_shared: the cache root is shared by the members of its group
            (a 2770 directory, as ``ssdfeed.Loader(group_shared=True)`` and
            the CLI's ``--group-shared``): the entry is created 02770/0660
            so that every member fills and reads it. Default False: a
            group-writable root is refused. Items that members wrote are
            read as data only (see docs/python.md, "What a cached item may
            hold").

    If no entry can be opened or made (the root full of entries other jobs
    use, a lock held by a stopped process), ``cached[i]`` is ``dataset[i]``
    itself: a warning once a process, and the entry is tried again every
    ``CachedDataset.RETRY_OPEN_SECONDS`` (10 s), as the Loader trains from the origin.

    Supported items: numpy arrays and numpy scalars (any dtype but object,
    any shape), CPU torch tensors, PIL images, int, float, complex, bool,
    str, bytes, None, and tuples, lists, dicts (str, int, float, bool,
    bytes, None or tuple keys; order kept) and importable namedtuples of
    these, nested. Anything else is a TypeError naming its place, e.g.
    ``item[1]["boxes"]: set is not supported by ssdfeed.cache``.
    """
    return CachedDataset(dataset, key=key, cache=cache, on_error=on_error,
                         group_shared=group_shared,
                         cache_capacity=_moved.renamed_argument(
                             "ssdfeed.cache", "capacity", "cache_capacity", capacity,
                             cache_capacity))


class CachedDataset:
    """A dataset's items served from an ssdfeed cache entry (see ``ssdfeed.cache``).

    Picklable (DataLoader ``spawn`` workers): the dataset and the options
    travel; each process opens the entry itself on first use."""

    # How long a cache that could not be opened (root full of entries in use,
    # a lock held by a stopped process) is left alone before the next try;
    # items are computed from the dataset meanwhile. Read when used, so a
    # caller may change it (on the class: every cached dataset).
    RETRY_OPEN_SECONDS = 10.0

    def __init__(self, dataset, *, key=None, cache=True, cache_capacity=None, on_error="raise",
                 group_shared=False, capacity=None):
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise TypeError(f"ssdfeed.cache needs a map-style dataset (with __len__ and "
                            f"__getitem__), not {type(dataset).__qualname__}")
        if key is not None and (not isinstance(key, str) or not key):
            raise ValueError(f"key must be a non-empty str or None, not {key!r}")
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.dataset = dataset
        self._key = key
        self._cache_root = _cache_root(cache)
        cache_capacity = _moved.renamed_argument("ssdfeed.CachedDataset", "capacity",
                                                 "cache_capacity", capacity, cache_capacity)
        self._capacity = 0 if cache_capacity is None else _int("cache_capacity",
                                                               cache_capacity, 1)
        self._on_error = on_error
        self._group_shared = _bool("group_shared", group_shared)
        self._size = len(dataset)
        self._uri = "python:" + (key or _class_path(type(dataset)))
        self._identity = f"key={key}" if key else _code_identity(dataset)
        self.skipped: Dict[int, str] = {}  # this process's skipped items: index -> error
        self._entry = None
        self._pid = None
        self._unavailable = None  # (pid, monotonic time of the next try) while it is

    # -- what the C++ fast path (ssdfeed.ItemLoader(cached)) needs
    def _compute_fields(self, i: int):
        """dataset[i] as record fields (the ItemEntry compute callback)."""
        return _items.encode(self.dataset[i])

    def _open_entry(self):
        """This process's ItemEntry, opened on first use (never the one a
        parent process opened before a fork: that one belongs to the parent)."""
        if self._entry is None or self._pid != os.getpid():
            self._entry = self._new_entry(self._compute_fields)
            self._pid = os.getpid()
        return self._entry

    def _entry_or_none(self):
        """This process's ItemEntry, or None while no entry can be opened or
        made (``CacheUnavailableError``: the root full of entries in use, a
        lock held by a stopped process). Warns once a process, as the Loader
        does when it trains from the origin, and tries again every
        ``CachedDataset.RETRY_OPEN_SECONDS``."""
        if self._entry is not None and self._pid == os.getpid():
            return self._entry
        mine = self._unavailable is not None and self._unavailable[0] == os.getpid()
        if mine and time.monotonic() < self._unavailable[1]:
            return None
        try:
            entry = self._open_entry()
        except _unavailable_error() as e:
            if not mine:
                warnings.warn(f"ssdfeed.cache: {e}; items of {self._uri} are computed from the "
                              f"dataset, not cached (tried again every "
                              f"{CachedDataset.RETRY_OPEN_SECONDS:g} s)", stacklevel=3)
            self._unavailable = (os.getpid(), time.monotonic() + CachedDataset.RETRY_OPEN_SECONDS)
            return None
        self._unavailable = None
        return entry

    def _new_entry(self, compute):

        entry = _ssdfeed.ItemEntry(self._cache_root, self._uri, self._identity, self._size,
                                   compute, capacity_bytes=self._capacity,
                                   group_shared=self._group_shared, on_error="raise")
        # DataLoader and warm workers leave through os._exit, which runs no
        # destructor: close (sync what was stored to the device) from
        # multiprocessing's exit hook, which such workers do run; only in the
        # process that opened it.
        multiprocessing.util.Finalize(None, _close_if_mine, (entry, os.getpid()),
                                      exitpriority=10)
        return entry

    # -- the dataset protocol
    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index):
        i = self._index(index)
        if self._on_error == "raise":
            return self._get(i)
        for step in range(self._size):
            j = (i + step) % self._size
            if j in self.skipped:
                continue
            try:
                return self._get(j)
            except _items.UnsupportedItemError:
                raise
            except Exception as e:  # noqa: BLE001 (on_error="skip" skips any failure)
                self._skip(j, e)
        raise SkippedItemsError(f"ssdfeed.cache: every item of {self._uri} failed "
                                f"(on_error='skip'); first: {next(iter(self.skipped.values()))}")

    def _get(self, i: int):
        if not self._cache_root:
            return self._from_dataset(i)
        entry = self._entry_or_none()
        if entry is None:
            return self._from_dataset(i)
        try:
            return _items.decode(entry.get(i))
        except _items.ItemFormatError as e:
            # Which entry holds the bad item, so that it can be removed.
            where = entry.stats().get("cache_dir", self._cache_root)
            raise _items.ItemFormatError(f"{self._uri} item {i} (cache entry {where}): {e}") \
                from None

    def _from_dataset(self, i: int):
        """dataset[i] itself: no cache, or none to be had now."""
        try:
            return self.dataset[i]
        except Exception as e:
            _add_index(e, i)
            raise

    def _skip(self, i: int, e: BaseException) -> None:
        self.skipped[i] = f"{type(e).__name__}: {e}"
        print(f"ssdfeed.cache: skipped item {i} of {self._uri}: {self.skipped[i]}",
              file=sys.stderr, flush=True)

    def _index(self, index) -> int:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"ssdfeed.cache datasets are indexed by int, not "
                            f"{type(index).__qualname__}")
        i = int(index)
        if i < 0:
            i += self._size
        if not 0 <= i < self._size:
            raise IndexError(f"index {index} out of range for a dataset of {self._size} items")
        return i

    # -- pickling (spawn workers): never the open entry
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_entry"] = None
        state["_pid"] = None
        state["_unavailable"] = None
        return state

    def __repr__(self) -> str:
        where = self._cache_root or "no cache"
        return f"CachedDataset({self._uri}, {self._size} items, {where})"

    def stats(self) -> dict:
        """This process's entry counters (hits, misses, stores, ...); {}
        without a cache or while none can be opened."""
        entry = self._entry_or_none() if self._cache_root else None
        return dict(entry.stats()) if entry is not None else {}

    def present(self) -> int:
        """How many items the entry holds (0 while none can be opened)."""
        entry = self._entry_or_none() if self._cache_root else None
        return entry.present() if entry is not None else 0

    def close(self) -> None:
        """Lets go of this process's entry (``ssdfeed cache rm`` refuses an
        entry in use); a later ``cached[i]`` opens it again."""
        if self._entry is not None and self._pid == os.getpid():
            self._entry.close()
        self._entry = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def warm(self, workers: int = 1, *, progress: bool = True) -> dict:
        """Fills the entry with ``workers`` processes (fork where the platform
        has it); shows a progress bar on stderr. Ctrl-C stops the workers,
        keeps what they stored and raises KeyboardInterrupt; a rerun computes
        only what is missing. Returns {"items", "present", "computed",
        "skipped", "seconds"}."""
        from ssdfeed import _warm_items

        return _warm_items.warm(self, _int("workers", workers, 1), progress)


def _unavailable_error():
    return _ssdfeed.CacheUnavailableError


def _close_if_mine(entry, pid: int) -> None:
    if os.getpid() == pid:
        entry.close()


def _add_index(e: BaseException, i: int) -> None:
    note = f"(item {i})"
    if hasattr(e, "add_note") and note not in getattr(e, "__notes__", []):
        e.add_note(note)


def _class_path(cls) -> str:
    """module.qualname, with a script's module named after its file: the
    training script sees its classes in ``__main__``, ``ssdfeed warm
    --python train:factory`` in ``train``, and both must find one entry."""
    module = cls.__module__
    if module in ("__main__", "__mp_main__"):
        path = getattr(sys.modules.get(module), "__file__", None)
        if path:
            module = os.path.splitext(os.path.basename(path))[0]
    return f"{module}.{cls.__qualname__}"


def _code_text(obj) -> bytes:
    """The source of a class or function; its compiled code when there is
    no source (a class defined in ``python -c``, a notebook cell)."""
    try:
        return inspect.getsource(obj).encode()
    except (OSError, TypeError):
        pass
    if isinstance(obj, types.FunctionType):
        return marshal.dumps(obj.__code__)
    out = []
    for name, value in sorted(vars(obj).items()):
        fn = getattr(value, "__func__", value)
        if isinstance(fn, types.FunctionType):
            out.append(name.encode() + marshal.dumps(fn.__code__))
    return b"\0".join(out)


def _code_identity(dataset) -> str:
    """The default identity: the dataset's classes' code, its callable
    attributes and plain settings, as one digest."""
    h = hashlib.sha256()
    for cls in type(dataset).__mro__:
        if cls.__module__ not in ("builtins", "typing", "abc"):
            h.update(_class_path(cls).encode() + b"\0" + _code_text(cls) + b"\0")
    for name, value in sorted(getattr(dataset, "__dict__", {}).items()):
        if isinstance(value, _SETTING_TYPES):
            h.update(f"{name}={value!r}\0".encode())
        elif callable(value):
            h.update(name.encode() + b"\0" + _callable_text(value) + b"\0")
    return f"code={h.hexdigest()[:32]}"


def _callable_text(fn) -> bytes:
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        return _code_text(getattr(fn, "__func__", fn))
    if isinstance(fn, types.BuiltinFunctionType):
        return repr(fn).encode()
    # An object such as torchvision's Compose([Resize(256), ...]): its class
    # code and its repr, which names its settings.
    return _code_text(type(fn)) + _ADDRESS.sub("", repr(fn)).encode()
