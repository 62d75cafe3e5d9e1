"""glibc's malloc settings that tf.data's generator datasets change, put
back. Used by both tf.data adapters (ssdfeed.tf.dataset over a Loader and
ssdfeed.tf.cache), so it lives below both of them."""

from __future__ import annotations

import ctypes
import platform

# glibc's mallopt parameters.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def undo_tf_malloc_patch() -> None:
    """tf's generator dataset calls mallopt(M_TRIM_THRESHOLD, 128 KiB) when
    its iterator starts ("Memory patch applied" in its log). That also
    freezes glibc's mmap threshold, so the workers' per-sample buffers
    (decoded images of 100 KiB to MiBs) are mmapped and unmapped, or trimmed
    and refaulted, at every sample: page faults and the process-wide mmap
    lock serialise the workers, and the cold epoch ran on one core, at one
    of two speeds depending on where the threshold froze. These are the
    values glibc's own dynamic threshold grows to."""
    if platform.libc_ver()[0] != "glibc":
        return
    libc = ctypes.CDLL(None)
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)
