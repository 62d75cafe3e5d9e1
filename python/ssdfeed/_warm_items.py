"""CachedDataset.warm(workers=N): N processes fill a cache entry.

Worker w computes items w, w+N, w+2N, ...; an item another process (another
worker, another job) already stored is a cache hit, one it is computing is
waited for (the entry's claims), so concurrent fills share the work. Each
stored item is kept whatever happens next: a rerun computes only the rest.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback

from ssdfeed import _items


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _worker(cached, w: int, n: int, counters, errors) -> None:
    done, computed, skipped = counters
    entry = None
    try:
        def compute(i):
            fields = cached._compute_fields(i)
            with computed.get_lock():
                computed.value += 1
            return fields

        entry = cached._new_entry(compute)
        for i in range(w, len(cached), n):
            try:
                entry.get(i)
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
        if entry is not None:
            entry.close()


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
    seconds = time.monotonic() - start
    if progress:
        _bar(counters[0].value, len(cached), seconds, True)
    return {"items": len(cached), "present": cached.present(), "computed": counters[1].value,
            "skipped": counters[2].value, "seconds": round(seconds, 3)}


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
