"""PyTorch adapter: the same Loader, yielding torch tensors (zero-copy).

With CUDA present, each batch buffer is page-locked once (cudaHostRegister)
so `.cuda(non_blocking=True)` copies asynchronously; buffers are recycled, so
registration happens only for the few buffers of the pool.
"""

from __future__ import annotations

import torch

from ssdfeed.loader import Loader as _Loader


class Loader(_Loader):
    """ssdfeed.Loader yielding (images, labels) as torch tensors.

    rank/world_size default to torch.distributed's when it is initialised.
    """

    def __init__(self, source, *, pin_memory=None, **kwargs):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            kwargs.setdefault("rank", torch.distributed.get_rank())
            kwargs.setdefault("world_size", torch.distributed.get_world_size())
        super().__init__(source, **kwargs)
        self._pin = torch.cuda.is_available() if pin_memory is None else bool(pin_memory)
        self._pinned = set()

    def _pin_buffer(self, array) -> None:
        ptr = array.__array_interface__["data"][0]
        if ptr in self._pinned:
            return
        base = array.base if array.base is not None else array
        nbytes = getattr(base, "nbytes", array.nbytes)
        if torch.cuda.cudart().cudaHostRegister(ptr, nbytes, 0) == 0:
            self._pinned.add(ptr)

    def __iter__(self):
        for images, labels in super().__iter__():
            if self._pin:
                self._pin_buffer(images)
            yield torch.from_numpy(images), torch.from_numpy(labels)
