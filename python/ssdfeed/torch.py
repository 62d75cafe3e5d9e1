"""PyTorch adapter: the same Loader, yielding torch tensors (zero-copy).

With CUDA present, each batch buffer is page-locked once (cudaHostRegister)
so `.cuda(non_blocking=True)` copies asynchronously; buffers are recycled, so
registration happens only for the few buffers of the pool. The loader
unregisters them when it is closed or collected, while the pool still owns
the memory.
"""

from __future__ import annotations

import torch

from ssdfeed import _ssdfeed
from ssdfeed.loader import Loader as _Loader

# torch.utils.data.DataLoader arguments that have no meaning here, and why.
_NOT_SUPPORTED = {
    "sampler": "the order comes from shuffle/seed/set_epoch, and rank/world_size "
               "(DistributedSampler semantics)",
    "batch_sampler": "batches are cut from the epoch plan; use batch_size and drop_last",
    "collate_fn": "batches are already (images, labels) tensors; transform them in your loop",
    "worker_init_fn": "workers are C++ threads, not Python processes",
    "multiprocessing_context": "workers are C++ threads, not Python processes",
    "generator": "randomness comes from seed (and the epoch)",
    "prefetch_factor": "use prefetch=N (batches prepared ahead, in total)",
    "timeout": "there is no worker timeout; a stuck read shows in stats()['wait_seconds']",
    "pin_memory_device": "pinned memory is registered for the current CUDA device",
    "in_order": "batches always come in plan order",
}


class Loader(_Loader):
    """``ssdfeed.Loader`` yielding ``(images, labels)`` as torch tensors.

    Takes every ``ssdfeed.Loader`` argument, plus the familiar
    ``torch.utils.data.DataLoader`` names:

    Args:
        num_workers: worker threads (``workers``); 0 means one per core,
            since no loading happens in the calling thread either way. Give
            ``workers`` or ``num_workers``, not both.
        pin_memory: page-lock batch buffers for asynchronous ``.cuda()``
            copies. Default: True when CUDA is available.
        drop_last: as ``ssdfeed.Loader`` (and DataLoader): drop a short last
            batch.
        persistent_workers: accepted for compatibility, either value: the
            cache, buffers and open files persist across epochs anyway, and
            worker threads start in microseconds.

    ``sampler``, ``batch_sampler``, ``collate_fn``, ``worker_init_fn``,
    ``generator``, ``prefetch_factor``, ``timeout`` and
    ``multiprocessing_context`` raise a ValueError saying what to use
    instead. rank/world_size default to ``torch.distributed``'s when it is
    initialised. ``.batch_size``, ``.drop_last`` and ``.dataset`` (the source,
    with ``len()``) are there as on a DataLoader.
    """

    def __init__(self, source, *, pin_memory=None, num_workers=None,
                 persistent_workers=False, **kwargs):
        for name in _NOT_SUPPORTED:
            if name in kwargs:
                raise ValueError(f"ssdfeed.torch.Loader does not take {name}: "
                                 f"{_NOT_SUPPORTED[name]}")
        if num_workers is not None:
            if kwargs.get("workers") is not None:
                raise ValueError("give workers or num_workers, not both")
            if isinstance(num_workers, bool) or not isinstance(num_workers, int) \
                    or num_workers < 0:
                raise ValueError(f"num_workers must be an int >= 0 (0: one thread per core), "
                                 f"not {num_workers!r}")
            kwargs["workers"] = num_workers
        if not isinstance(persistent_workers, bool):
            raise ValueError(f"persistent_workers must be True or False, "
                             f"not {persistent_workers!r}")
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            kwargs.setdefault("rank", torch.distributed.get_rank())
            kwargs.setdefault("world_size", torch.distributed.get_world_size())
        super().__init__(source, **kwargs)
        self._pin = torch.cuda.is_available() if pin_memory is None else bool(pin_memory)
        self._pinned = set()  # addresses this loader registered with cudaHostRegister
        self._dataset = None

    @property
    def pin_memory(self) -> bool:
        return self._pin

    @property
    def num_workers(self) -> int:
        """Worker threads actually used."""
        return self._options.workers or _ssdfeed.default_workers()

    @property
    def dataset(self):
        """The source (an ``ssdfeed.Source``: ``len()`` is its sample count,
        ``read(i)`` gives sample i's encoded bytes and label)."""
        if self._dataset is None:
            o = self._options
            self._dataset = _ssdfeed.open_source_with(o.source, o.source_options)
        return self._dataset

    def _pin_buffer(self, array) -> None:
        ptr = array.__array_interface__["data"][0]
        if ptr in self._pinned:
            return
        base = array.base if array.base is not None else array
        nbytes = getattr(base, "nbytes", array.nbytes)
        if torch.cuda.cudart().cudaHostRegister(ptr, nbytes, 0) == 0:
            self._pinned.add(ptr)

    def _unpin_buffers(self) -> None:
        # Before the native loader (and its buffer pool) goes away: memory
        # freed while still registered would stay pinned for the process.
        pinned, self._pinned = getattr(self, "_pinned", None), set()
        if pinned:
            cudart = torch.cuda.cudart()
            for ptr in pinned:
                cudart.cudaHostUnregister(ptr)

    def close(self) -> None:
        """Stops the workers and unregisters the pinned batch buffers."""
        super().close()
        self._unpin_buffers()

    def __del__(self):
        try:
            self._unpin_buffers()
        except Exception:  # interpreter shutdown: torch may be gone already
            pass

    def __iter__(self):
        for images, labels in super().__iter__():
            if self._pin:
                self._pin_buffer(images)
            yield torch.from_numpy(images), torch.from_numpy(labels)
