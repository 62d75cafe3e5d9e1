#!/usr/bin/env python3
"""What tf.data's own ``ds.cache(filename)`` does when two jobs share it, and
after a job killed mid-fill: the two failures docs/python.md names as the
reason to switch, reproduced with the tensorflow installed here.

    .venv/bin/python bench/tf_cache_failures.py [--dir DIR] [--json]

Each job is a separate Python process (``--job``) that makes the same
pipeline, ``range(N).map(slow).cache(PATH)``, and reads one whole pass. The
steps wait on files, never on a clock:

1. concurrent: job A starts filling; once A's lockfile exists, job B starts
   on the same PATH; B is let run to its end, then A is released (a file
   it waits for between elements) and finishes its pass. Prints each job's
   exit status and its error.
2. killed: job A starts filling and is SIGKILLed (what a scheduler's
   preemption or an OOM kill does) once it holds element 0, then once it
   holds element N/2; after each kill the job is run again three times, as
   reruns after a crash would be. Prints each rerun's exit status and error,
   and whether a lockfile is left after it.
"""

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

N = 64  # elements a pass


def job(path: str, gate: str, hold_at: int) -> int:
    """One job: a pass over range(N).map(slow).cache(path). While `gate`
    names a file that does not exist yet, element `hold_at` and those after
    it wait for it (announcing so with `gate`.held), so the fill stays open
    until the caller releases it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    def slow(i):
        if gate and i >= hold_at:
            open(gate + ".held", "a").close()
            while not os.path.exists(gate):
                time.sleep(0.01)  # polling a file the parent creates, not timing
        return np.full((64, 64, 3), i, np.float32)

    ds = tf.data.Dataset.range(N).map(
        lambda i: tf.numpy_function(slow, [i], tf.float32)).cache(path)
    n = 0
    try:
        for _ in ds:
            n += 1
    except Exception as e:  # noqa: BLE001: report what tf.data raised, whatever it is
        print(json.dumps({"elements": n, "error": f"{type(e).__name__}: {e}".splitlines()[0]}))
        return 1
    print(json.dumps({"elements": n, "error": None}))
    return 0


def start(path: str, gate: str = "", hold_at: int = 0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--job", path, "--gate", gate,
                             "--hold-at", str(hold_at)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(pattern: str, proc: subprocess.Popen, limit_s: float = 120) -> None:
    """Until a file matching pattern exists (or proc ended: then say why)."""
    deadline = time.monotonic() + limit_s
    while not glob.glob(pattern):
        if proc.poll() is not None:
            raise SystemExit(f"job ended before its lockfile appeared: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"no {pattern} after {limit_s} s")
        time.sleep(0.01)


def outcome(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate()
    last = out.strip().splitlines()[-1] if out.strip() else "{}"
    r = {"exit": proc.returncode, **json.loads(last)}
    if proc.returncode not in (0, 1):
        r["stderr"] = err.strip().splitlines()[-1:] if err.strip() else []
    return r


def concurrent(d: str) -> dict:
    path, gate = os.path.join(d, "shared"), os.path.join(d, "release-a")
    a = start(path, gate)
    wait_for(path + "*.lockfile", a)
    b = outcome(start(path))  # B runs its whole pass while A's fill is open
    open(gate, "w").close()
    return {"job A (first)": outcome(a), "job B (second, while A fills)": b}


def killed(d: str, hold_at: int) -> dict:
    path, gate = os.path.join(d, f"killed-at-{hold_at}"), os.path.join(d, f"never-{hold_at}")
    a = start(path, gate, hold_at)
    wait_for(gate + ".held", a)  # hold_at elements are through the cache's writer
    wait_for(path + "*.lockfile", a)
    a.send_signal(signal.SIGKILL)
    a.wait()
    res = {"killed job": {"exit": a.returncode, "elements before the kill": hold_at}}
    for k in (1, 2, 3):
        res[f"rerun {k}"] = outcome(start(path))
        res[f"rerun {k}"]["lockfile after"] = bool(glob.glob(path + "*.lockfile"))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="where the caches go (default: a temporary directory)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--gate", default="", help=argparse.SUPPRESS)
    ap.add_argument("--hold-at", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.job:
        sys.exit(job(a.job, a.gate, a.hold_at))
    d = a.dir or tempfile.mkdtemp(prefix="tf-cache-failures-")
    os.makedirs(d, exist_ok=True)
    import tensorflow as tf

    report = {"tensorflow": tf.__version__, "two jobs on one cache": concurrent(d),
              "a job killed at its first element": killed(d, 0),
              "a job killed half way": killed(d, N // 2)}
    if a.json:
        print(json.dumps(report, indent=1))
        return
    print(f"tensorflow {report['tensorflow']}, ds.cache(filename), {N} elements")
    for case in [k for k in report if k != "tensorflow"]:
        print(f"\n{case}:")
        for who, r in report[case].items():
            print(f"  {who}: {r}")


if __name__ == "__main__":
    main()
