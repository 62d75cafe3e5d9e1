"""ssdfeed: prepare once, cache on local SSD, serve shuffled augmented batches."""

from ssdfeed._ssdfeed import __version__

__all__ = ["__version__"]
