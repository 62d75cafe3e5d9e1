"""ssdfeed.warm(): fill a cache entry before training, as ``ssdfeed warm``;
and ``ssdfeed warm --python``'s entry point (``_main``)."""

import os
from typing import Optional, Union

from ssdfeed import _ssdfeed
from ssdfeed._cache import CachedDataset, cache
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
    o = _warm_options(cache=cache, prepare=prepare, workers=workers, on_error=on_error,
                      image_key=image_key, label_key=label_key, cache_capacity=cache_capacity,
                      fields=fields)
    return _ssdfeed.warm_with(os.fspath(source), o)


def _warm_options(*, cache, prepare, workers, on_error, image_key, label_key, cache_capacity,
                  fields) -> "_ssdfeed.WarmOptions":
    """The native WarmOptions of warm()'s arguments (ssdfeed.distributed's too)."""
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
    return o


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    t = text.strip().upper().rstrip("B").rstrip("I")
    unit = t[-1:] if t[-1:] in _SIZE_UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)]) * _SIZE_UNITS[unit]
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"--capacity: expected a size > 0 such as 500G or 2T, got {text!r}")
    return int(value)


def _untrusted_reason(directory: str):
    """Why another user could plant a module in directory, or None.

    Trusted: owned by you or by root, and writable by neither its group nor
    others. The sticky bit (as on /tmp) does not help: it stops others from
    replacing your files, not from adding their own ``ssdfeed/`` or
    ``numpy/`` beside them."""
    import stat

    st = os.stat(directory)
    if st.st_uid not in (os.geteuid(), 0):
        try:
            import pwd
            owner = pwd.getpwuid(st.st_uid).pw_name
        except (ImportError, KeyError):
            owner = f"uid {st.st_uid}"
        return f"it belongs to {owner}"
    if st.st_mode & stat.S_IWOTH:
        sticky = " (the sticky bit does not stop others adding files)" \
            if st.st_mode & stat.S_ISVTX else ""
        return f"it is world-writable, mode {stat.S_IMODE(st.st_mode):o}{sticky}"
    if st.st_mode & stat.S_IWGRP:
        return f"it is group-writable, mode {stat.S_IMODE(st.st_mode):o}"
    return None


def _add_module_dir(module: str) -> None:
    """Puts the current directory on sys.path when it holds MODULE's
    top-level module or package (``python -m`` would find it there first),
    and only then; refuses a directory other users can write to, whose
    planted modules would run as the user who started ``warm``.

    The bootstrap that ``ssdfeed warm`` runs (``python3 -c``) has already
    taken the current directory off sys.path, before importing ssdfeed: this
    is the one place it comes back."""
    import importlib.machinery
    import sys

    cwd = os.getcwd()
    top = module.split(".")[0]
    if importlib.machinery.PathFinder.find_spec(top, [cwd]) is None:
        return  # an installed module (or none at all: the import says so)
    why = _untrusted_reason(cwd)
    if why is not None:
        raise ValueError(
            f"--python {module}: refusing to import {top} from {cwd}: {why}, so another user "
            f"could plant modules there (ssdfeed/__init__.py, numpy/...) that would run as "
            f"you. Run from a directory only you (or root) can write to, or install the "
            f"module as a package")
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _load_factory(spec: str):
    """MODULE:FACTORY -> the object FACTORY() returns (MODULE imported as
    ``python -m`` would from the current directory, see _add_module_dir)."""
    import importlib

    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"--python: expected MODULE:FACTORY (e.g. mydata:make_dataset), "
                         f"got {spec!r}")
    _add_module_dir(module)
    mod = importlib.import_module(module)
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--python {spec}: module {module} has no {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"--python {spec}: {attr} is not callable")
    return obj()


def _main(argv=None) -> int:
    """``ssdfeed warm --python MODULE:FACTORY``: the C++ CLI hands over here."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(prog="ssdfeed warm --python",
                                description="Fill the cache entry of ssdfeed.cache(FACTORY())")
    p.add_argument("--python", required=True, metavar="MODULE:FACTORY")
    p.add_argument("--key", default=None)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--cache", default=None)
    p.add_argument("--capacity", default=None)
    p.add_argument("--group-shared", action="store_true")
    p.add_argument("--on-error", default="raise", choices=["raise", "skip"])
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    try:
        dataset = _load_factory(a.python)
        capacity = _size(a.capacity) if a.capacity else None
        if isinstance(dataset, CachedDataset):
            # Its root and options are the factory's; a flag it lacks would
            # be silently ignored.
            if a.group_shared and not dataset._group_shared:
                raise ValueError(f"--group-shared: {a.python} returns an ssdfeed.cache(...) "
                                 "without group_shared=True; pass it there")
            cached = dataset
        else:
            cached = cache(dataset, key=a.key, cache=a.cache or True, cache_capacity=capacity,
                           on_error=a.on_error, group_shared=a.group_shared)
        if a.workers < 1:
            raise ValueError(f"--workers must be >= 1, not {a.workers}")
    except (ValueError, TypeError, ImportError) as e:
        print(f"ssdfeed: {e}", file=sys.stderr)
        return 2
    try:
        r = cached.warm(workers=a.workers, progress=not (a.quiet or a.json))
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001: the CLI names the failure, no traceback
        print(f"ssdfeed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    r["uri"] = cached._uri
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{cached._uri}: {r['present']}/{r['items']} items present, {r['computed']} "
              f"computed in {r['seconds']:.1f} s" +
              (f", {r['skipped']} skipped" if r["skipped"] else ""))
    return 0 if r["present"] + r["skipped"] >= r["items"] else 3


if __name__ == "__main__":
    raise SystemExit(_main())
