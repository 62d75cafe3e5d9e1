#!/usr/bin/env python3
"""Images/s of ssdfeed.ray.read against the plain Loader and against Ray
Data's own read_images().map(crop), side by side in one run on one machine.

All three serve the same crops of the same folder of JPEGs to the driver in
batches of --batch (and a fourth, Ray Data's floor, the same bytes made
from nothing: see ray_floor_pass; and a fifth, the plain Loader kept open
between passes, as a training loop keeps it: see kept_pass):
- the plain Loader (workers = --cpus) over a warm cache;
- ssdfeed.ray.read over the same warm cache, on ray.init(num_cpus=--cpus);
- ray.data.read_images(size=...).map(crop), the path a Ray user has without
  ssdfeed: decode and resize every epoch, then a centre crop, files in the
  page cache (a warm pass runs first).
The plain, ssdfeed.ray, floor and kept passes alternate, then Ray Data's
follow (see main for why); each figure is the median of --repeats passes.
A pass is timed from the call that makes the loader or dataset to its last
batch (opening the source is in every figure but the kept Loader's).

    python bench/ray_read.py --count 10000 --repeats 9
"""

import argparse
import json
import os
import statistics
import tempfile
import time

import ssdfeed


def plain_pass(uri, prep, root, args):
    t = time.perf_counter()
    with ssdfeed.Loader(uri, cache=root, prepare=prep, batch_size=args.batch,
                        workers=args.cpus, shuffle=True) as loader:
        n = sum(len(labels) for _, labels in loader)
    return n / (time.perf_counter() - t)


def kept_pass(loader, epoch, args):
    """The plain Loader as a training loop keeps it between epochs
    (set_epoch, no listing of the source): what the listing in every
    other figure costs."""
    t = time.perf_counter()
    loader.set_epoch(epoch)
    n = sum(len(labels) for _, labels in loader)
    return n / (time.perf_counter() - t)


def ssdfeed_ray_pass(uri, prep, root, args):
    import ssdfeed.ray as sray

    t = time.perf_counter()
    ds = sray.read(uri, prepare=prep, cache=root)
    n = sum(len(b["label"]) for b in ds.iter_batches(batch_size=args.batch))
    return n / (time.perf_counter() - t)


def ray_floor_pass(args):
    """A Ray Data read of the same bytes that reads nothing: each of --cpus
    read tasks yields one block of its share of rows, made from nothing
    (np.ones). What any Ray Data read pays to move a pass's bytes through
    the executor and the object store to the driver: ssdfeed.ray.read's
    floor on this machine."""
    import numpy as np
    import ray
    from ray.data.block import BlockAccessor
    from ray.data.datasource import Datasource, ReadTask

    from ssdfeed.ray import _metadata

    rows, shape = -(-args.count // args.cpus), (args.size, args.size, 3)
    sample = args.size * args.size * 3

    def read():
        yield BlockAccessor.batch_to_block({"image": np.ones((rows, *shape), np.uint8),
                                            "label": np.zeros(rows, np.int64),
                                            "id": np.zeros(rows, np.int64)})

    class Nothing(Datasource):
        def estimate_inmemory_data_size(self):
            return args.count * sample

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            return [ReadTask(read, _metadata(rows, rows * sample)) for _ in range(args.cpus)]

    t = time.perf_counter()
    ds = ray.data.read_datasource(Nothing(), override_num_blocks=args.cpus)
    # As ssdfeed.ray.read sets it: with Ray Data's resource reservation on,
    # the tasks ran one at a time.
    ds.context.op_resource_reservation_enabled = False
    n = sum(len(b["label"]) for b in ds.iter_batches(batch_size=args.batch))
    return n / (time.perf_counter() - t)


def ray_data_pass(folder, args):
    import ray

    side, crop = args.size + args.size // 8, args.size
    off = (side - crop) // 2

    def centre_crop(row):
        row["image"] = row["image"][off:off + crop, off:off + crop]
        return row

    t = time.perf_counter()
    ds = ray.data.read_images(folder, size=(side, side), mode="RGB").map(centre_crop)
    n = sum(len(b["image"]) for b in ds.iter_batches(batch_size=args.batch))
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=10000, help="samples (default 10000)")
    ap.add_argument("--size", type=int, default=64, help="served side in pixels (default 64)")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs for each side (default 2)")
    ap.add_argument("--batch", type=int, default=256, help="batch rows (default 256)")
    ap.add_argument("--repeats", type=int, default=5, help="passes of each (default 5)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = ap.parse_args()

    import ray

    work = args.dir or tempfile.mkdtemp(prefix="ssdfeed-ray-read-")
    folder = os.path.join(work, "src")
    d = ssdfeed.make_dataset(folder, format="folder", count=args.count, classes=10, seed=1,
                             min_side=args.size * 2, max_side=args.size * 3)
    side = args.size + args.size // 8
    prep = ssdfeed.Prepare(resize=(side, side), center_crop=args.size)
    root = os.path.join(work, "cache")
    plain_pass(d["uri"], prep, root, args)  # fills the cache: every later pass is warm

    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
             object_store_memory=1 << 30)
    ray.data.DataContext.get_current().enable_progress_bars = False
    runs = {"plain_loader": [], "ssdfeed_ray_read": [], "ray_data_floor": [],
            "plain_loader_kept_open": [], "ray_data_read_images_map_crop": []}
    kept = ssdfeed.Loader(d["uri"], cache=root, prepare=prep, batch_size=args.batch,
                          workers=args.cpus, shuffle=True)
    try:
        kept_pass(kept, 0, args)
        # Starts Ray's workers and warms the page cache outside the measurements.
        ssdfeed_ray_pass(d["uri"], prep, root, args)
        ray_floor_pass(args)
        for _ in range(args.repeats):
            runs["plain_loader"].append(plain_pass(d["uri"], prep, root, args))
            runs["ssdfeed_ray_read"].append(ssdfeed_ray_pass(d["uri"], prep, root, args))
            runs["ray_data_floor"].append(ray_floor_pass(args))
            epoch = len(runs["ray_data_floor"])
            runs["plain_loader_kept_open"].append(kept_pass(kept, epoch, args))
        ray_data_pass(folder, args)  # warms the page cache and Ray Data's workers
        # After the others: a read_images pass slows the passes that follow it
        # in the same Ray session (ssdfeed.ray.read measured 9,000 img/s right
        # after one, 21,000 without), and it is 20-60x slower than both, so
        # drift in the machine's load moves its ratio little.
        for _ in range(args.repeats):
            runs["ray_data_read_images_map_crop"].append(ray_data_pass(folder, args))
    finally:
        kept.close()
        ray.shutdown()
    med = {k: round(statistics.median(v), 1) for k, v in runs.items()}
    result = {"count": args.count, "size": args.size, "cpus": args.cpus, "batch": args.batch,
              "repeats": args.repeats, "median_images_per_s": med,
              "ssdfeed_ray_vs_plain": round(med["ssdfeed_ray_read"] / med["plain_loader"], 2),
              "ssdfeed_ray_vs_ray_data": round(
                  med["ssdfeed_ray_read"] / med["ray_data_read_images_map_crop"], 1),
              # Each ssdfeed.ray pass against the plain pass just before it:
              # the machine's load drifts less within a pair than over a run.
              "ray_data_floor_vs_plain": round(med["ray_data_floor"] / med["plain_loader"], 2),
              "ssdfeed_ray_vs_plain_kept_open": round(
                  med["ssdfeed_ray_read"] / med["plain_loader_kept_open"], 2),
              "ssdfeed_ray_vs_plain_per_run": [
                  round(r / p, 2) for p, r in zip(runs["plain_loader"], runs["ssdfeed_ray_read"])],
              "runs": {k: [round(x, 1) for x in v] for k, v in runs.items()}}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
