"""Old spellings kept for one release (docs/migrating.md, "Renamed in the
Python API"): each warns with a DeprecationWarning naming the new one.

``ssdfeed.cache`` and ``ssdfeed.warm`` are the functions; their modules are
``ssdfeed._cache`` and ``ssdfeed._warm``. A script that imported from the old
modules (``from ssdfeed.cache import SkippedItemsError``) still finds one:
``install()`` puts a stand-in under the old name in ``sys.modules``, so the
import system hands it out without loading a file and without rebinding the
package's ``cache``/``warm`` attribute, which stays the function.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings


def warn(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new} "
                  f"(docs/migrating.md)", DeprecationWarning, stacklevel=stacklevel)


def _home(old_module: str, name: str, moved: dict):
    """The object holding old name ``name``'s value now and its attribute
    there; warns."""
    module, path, public = moved[name]
    *holder, attr = path.split(".")
    obj = importlib.import_module(module)
    for part in holder:
        obj = getattr(obj, part)
    warn(f"{old_module}.{name}", public, stacklevel=4)
    return obj, attr


def _moved_name(name: str) -> property:
    # A data descriptor (not __getattr__/__setattr__): monkeypatch.setattr
    # then restores the value through it rather than deleting a module entry.
    def get(self):
        obj, attr = _home(self.__name__, name, self._moved)
        return getattr(obj, attr)

    def set_(self, value):
        obj, attr = _home(self.__name__, name, self._moved)
        setattr(obj, attr, value)

    return property(get, set_)


def _moved_module(name: str, moved: dict) -> types.ModuleType:
    """A module object standing for one whose names moved: reading (or
    setting) one warns and goes to its new home; any other name is an
    AttributeError that points to docs/migrating.md."""

    def missing(self, attr: str):
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r} (its names "
                             f"moved: docs/migrating.md)")

    body = {old: _moved_name(old) for old in moved}
    body.update(_moved=moved, __getattr__=missing, __dir__=lambda self: sorted(moved))
    cls = type("MovedModule", (types.ModuleType,), body)
    return cls(name, f"Deprecated: see {', '.join(sorted({v[2] for v in moved.values()}))}.")


# The old modules' public names: where each lives now (module, attribute
# path in it) and its public spelling.
_CACHE = {
    "cache": ("ssdfeed._cache", "cache", "ssdfeed.cache"),
    "CachedDataset": ("ssdfeed._cache", "CachedDataset", "ssdfeed.CachedDataset"),
    "SkippedItemsError": ("ssdfeed._errors", "SkippedItemsError", "ssdfeed.SkippedItemsError"),
    "WarmWorkerError": ("ssdfeed._errors", "WarmWorkerError", "ssdfeed.WarmWorkerError"),
    "RETRY_OPEN_SECONDS": ("ssdfeed._cache", "CachedDataset.RETRY_OPEN_SECONDS",
                           "ssdfeed.CachedDataset.RETRY_OPEN_SECONDS"),
}
_WARM = {
    "warm": ("ssdfeed._warm", "warm", "ssdfeed.warm"),
    "_main": ("ssdfeed._warm", "_main", "ssdfeed._warm._main"),
}


def install() -> None:
    for name, moved in (("ssdfeed.cache", _CACHE), ("ssdfeed.warm", _WARM)):
        sys.modules.setdefault(name, _moved_module(name, moved))


def renamed_argument(where: str, old: str, new: str, old_value, new_value):
    """The value of argument ``new``, taking one given under its old name
    ``old`` (not None) with a warning; both given is a TypeError."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise TypeError(f"{where}: give {new}= only ({old}= is its old name)")
    warn(f"{where}({old}=)", f"{where}({new}=)", stacklevel=4)
    return old_value
