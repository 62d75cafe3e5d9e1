#!/usr/bin/env python3
"""Images/s through Ray Data (ssdfeed.ray.read) vs the plain Loader on the
same cores, and the cache hit rate of a second pass with and without locality.

The Ray side runs a real cluster on this machine: a head that only drives
(0 CPUs) and --nodes raylets of --cpus each, every one with its own cache
root. The plain Loader gets the same total threads. Both serve warm passes
(everything cached) unless noted, so the numbers compare the serving paths.
Hit rates: a second pass over the roots the first pass filled, and a pass
over roots where node i holds the i-th slice of the ids (what a restart, a
resize or another job leaves): only locality finds those.

    python bench/ray_bench.py --count 2000 --nodes 2 --cpus 1
"""

import argparse
import json
import os
import tempfile
import time

import ssdfeed


def plain_loader(uri, prep, root, threads, batch):
    with ssdfeed.Loader(uri, cache=root, prepare=prep, batch_size=batch, workers=threads,
                        shuffle=True) as loader:
        for _ in loader:  # epoch 0 fills the cache
            pass
        t = time.perf_counter()
        n = sum(len(labels) for _, labels in loader)
        return n / (time.perf_counter() - t)


def one_pass(uri, prep, root, args, locality):
    import ray
    import ssdfeed.ray as sray

    stats = sray.Stats.remote()
    ds = sray.read(uri, prepare=prep, cache=root, samples_per_task=args.samples_per_task,
                   batch_size=args.batch, locality=locality, stats=stats)
    t = time.perf_counter()
    n = sum(len(b["label"]) for b in ds.iter_batches(batch_size=args.batch))
    dt = time.perf_counter() - t
    s = ray.get(stats.summary.remote())
    return {"images_per_s": round(n / dt, 1), "hit_rate": round(s["hit_rate"], 3),
            "prepared": s["prepared"]}


def warm_slices(uri, prep, root, count):
    """Node i caches the i-th slice of the ids, as after a job whose tasks
    were placed that way (or a restart that placed them differently)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1)
    def warm(lo, hi):
        here = root.replace("{node_id}", ray.get_runtime_context().get_node_id())
        with ssdfeed.Loader(uri, cache=here, prepare=prep, ids=range(lo, hi), workers=1) as l:
            for _ in l:
                pass

    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU")]
    k = len(nodes)
    ray.get([warm.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False))
             .remote(i * count // k, (i + 1) * count // k) for i, n in enumerate(nodes)])


def ray_passes(uri, prep, work, args, locality):
    """A cold pass, then a pass over the same roots (placement as the cold
    pass left it), then a pass over roots each holding one slice."""
    import ssdfeed.ray as sray

    tag = "loc" if locality else "noloc"
    root = os.path.join(work, tag + "-{node_id}")
    out = {"cold": one_pass(uri, prep, root, args, locality),
           "second": one_pass(uri, prep, root, args, locality)}
    sliced = os.path.join(work, tag + "-sliced-{node_id}")
    warm_slices(uri, prep, sliced, args.count)
    out["after_slices"] = one_pass(uri, prep, sliced, args, locality)
    held = sray.cached(uri, prepare=prep, cache=sliced)
    out["after_slices"]["samples_cached_over_nodes"] = sum(
        e - b for r in held.values() for b, e in r)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000, help="samples (default 2000)")
    ap.add_argument("--size", type=int, default=64, help="cached side in pixels (default 64)")
    ap.add_argument("--nodes", type=int, default=2, help="Ray worker nodes (default 2)")
    ap.add_argument("--cpus", type=int, default=1, help="CPUs per Ray node (default 1)")
    ap.add_argument("--samples-per-task", type=int, default=250, help="default 250")
    ap.add_argument("--batch", type=int, default=64, help="batch / block rows (default 64)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    work = args.dir or tempfile.mkdtemp(prefix="ssdfeed-ray-bench-")
    d = ssdfeed.make_dataset(os.path.join(work, "src"), format="tfrecord", count=args.count,
                             classes=10, seed=1, shard_size=500, min_side=args.size * 2,
                             max_side=args.size * 3)
    prep = ssdfeed.Prepare(resize=(args.size, args.size))
    threads = args.nodes * args.cpus
    result = {"count": args.count, "size": args.size, "threads": threads,
              "plain_loader_images_per_s": round(
                  plain_loader(d["uri"], prep, os.path.join(work, "plain"), threads,
                               args.batch), 1)}

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(args.nodes):
        c.add_node(num_cpus=args.cpus, object_store_memory=200 << 20)
    ray.init(address=c.address, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        # Starts the workers (imports, first task) outside the measurements.
        one_pass(d["uri"], prep, os.path.join(work, "start-{node_id}"), args, True)
        result["ray_locality"] = ray_passes(d["uri"], prep, work, args, True)
        result["ray_no_locality"] = ray_passes(d["uri"], prep, work, args, False)
    finally:
        ray.shutdown()
        c.shutdown()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
