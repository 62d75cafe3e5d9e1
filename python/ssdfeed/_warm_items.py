"""CachedDataset.warm(workers=N): N processes fill a cache entry.

Worker w computes items w, w+N, w+2N, ...; an item another process (another
worker, another job) already stored is a cache hit, one it is computing is
waited for (the entry's claims), so concurrent fills share the work. Each
stored item is kept whatever happens next: a rerun computes only the rest.
A worker that cannot open the entry (the root full of entries in use, a lock
held by a stopped process) warns, computes its items without storing them
and tries the entry again every ``CachedDataset.RETRY_OPEN_SECONDS``. A worker that
dies (the OOM killer, kill -9) fails the warm-up, naming it and its signal,
once the others are done; what was stored stays.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
import warnings

from ssdfeed import _items, _ssdfeed
from ssdfeed._errors import WarmWorkerError



class _Entry:
    """A worker's ItemEntry, or None while none can be opened; warns once
    and tries again every ``CachedDataset.RETRY_OPEN_SECONDS``."""

    def __init__(self, cached, compute):
        self.cached, self.compute = cached, compute
        self.entry = None
        self.retry_at = 0.0
        self.warned = False

    def get(self):
        if self.entry is None and time.monotonic() >= self.retry_at:
            try:
                self.entry = self.cached._new_entry(self.compute)
            except _ssdfeed.CacheUnavailableError as e:
                if not self.warned:
                    self.warned = True
                    warnings.warn(f"ssdfeed warm: {e}; this worker computes its items without "
                                  f"storing them (tried again every "
                                  f"{self.cached.RETRY_OPEN_SECONDS:g} s)", stacklevel=2)
                self.retry_at = time.monotonic() + self.cached.RETRY_OPEN_SECONDS
        return self.entry


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _worker(cached, w: int, n: int, counters, errors) -> None:
    done, computed, skipped = counters
    opened = None
    try:
        def compute(i):
            fields = cached._compute_fields(i)
            with computed.get_lock():
                computed.value += 1
            return fields

        opened = _Entry(cached, compute)
        for i in range(w, len(cached), n):
            try:
                entry = opened.get()
                if entry is not None:
                    entry.get(i)
                else:
                    compute(i)  # no cache to be had now: checked, not stored
            except _items.UnsupportedItemError:
                raise
            except Exception as e:  # noqa: BLE001
                if cached._on_error == "raise":
                    raise
                cached._skip(i, e)
                with skipped.get_lock():
                    skipped.value += 1
            with done.get_lock():
                done.value += 1
    except KeyboardInterrupt:
        pass  # the parent reports; what was stored stays
    except BaseException as e:  # noqa: BLE001
        try:
            errors.put(e)
        except Exception:  # an exception that does not pickle
            errors.put(RuntimeError("".join(traceback.format_exception_only(type(e), e)).strip()))
    finally:
        if opened is not None and opened.entry is not None:
            opened.entry.close()


def _bar(done: int, total: int, elapsed: float, final: bool) -> None:
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (total - done) / rate if rate > 0 else 0.0
    width = 30
    filled = width * done // total if total else width
    sys.stderr.write(f"\rwarm [{'#' * filled}{' ' * (width - filled)}] {done}/{total}  "
                     f"{rate:.0f} items/s  ETA {eta:.0f}s   " + ("\n" if final else ""))
    sys.stderr.flush()


def warm(cached, workers: int, progress: bool) -> dict:
    if not cached._cache_root:
        raise ValueError("warm needs a cache: this dataset was wrapped with cache=False")
    ctx = _context()
    counters = tuple(ctx.Value("q", 0) for _ in range(3))
    errors = ctx.Queue()
    n = min(workers, max(len(cached), 1))
    procs = [ctx.Process(target=_worker, args=(cached, w, n, counters, errors), daemon=True)
             for w in range(n)]
    start = time.monotonic()
    tty = sys.stderr.isatty()
    try:
        for p in procs:
            p.start()
        last = 0.0
        while any(p.is_alive() for p in procs):
            for p in procs:
                p.join(0.25 / len(procs))
            now = time.monotonic() - start
            if progress and now - last > (0.25 if tty else 5):
                _bar(counters[0].value, len(cached), now, False)
                last = now
            if not errors.empty():
                break
    except KeyboardInterrupt:
        _stop(procs, signal.SIGINT)
        present = cached.present()
        sys.stderr.write(f"\nssdfeed: interrupted: {present}/{len(cached)} items stored; "
                         "rerun warm to resume\n")
        raise
    if not errors.empty():
        error = errors.get()
        _stop(procs, signal.SIGTERM)
        raise error
    _check_exits(cached, procs)
    seconds = time.monotonic() - start
    if progress:
        _bar(counters[0].value, len(cached), seconds, True)
    return {"items": len(cached), "present": cached.present(), "computed": counters[1].value,
            "skipped": counters[2].value, "seconds": round(seconds, 3)}


def _check_exits(cached, procs) -> None:
    """A worker that died (the OOM killer, kill -9) left its items undone:
    say which, and how, rather than report a complete warm-up."""
    dead = [(w, p) for w, p in enumerate(procs) if p.exitcode != 0]
    if not dead:
        return
    how = []
    for w, p in dead:
        if p.exitcode is not None and p.exitcode < 0:
            try:
                name = signal.Signals(-p.exitcode).name
            except ValueError:
                name = f"signal {-p.exitcode}"
            how.append(f"worker {w} (pid {p.pid}) was killed by {name}")
        else:
            how.append(f"worker {w} (pid {p.pid}) exited with status {p.exitcode}")
    raise WarmWorkerError(f"ssdfeed warm: {'; '.join(how)}; {cached.present()}/"
                                 f"{len(cached)} items stored (kept); rerun warm to fill the rest")


def _stop(procs, sig) -> None:
    """Stops the workers (a Ctrl-C at a terminal has reached them already);
    what they stored stays."""
    for p in procs:
        if p.is_alive() and p.pid is not None:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass
    for p in procs:
        p.join()
