"""The exceptions of the Python package's own (the C++ core's are
``CorruptionError`` and ``CacheUnavailableError``, from the extension; the
item parser's is ``ItemFormatError``). All are exported as ``ssdfeed.X``.
This module imports nothing of the package, so every module may raise them
without an import cycle."""


class SkippedItemsError(RuntimeError):
    """Every item of a dataset failed under ``on_error="skip"``."""


class WarmWorkerError(RuntimeError):
    """A ``warm()`` worker died (killed by a signal: the OOM killer, kill -9)
    before its items were done; what the workers stored stays."""
