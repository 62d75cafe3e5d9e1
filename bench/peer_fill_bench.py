#!/usr/bin/env python3
"""Peer fill's two figures (docs/multi-node.md): origin egress for N nodes,
and the CPU cost of storing a record received from a peer against preparing
the sample from the origin.

One process, two cache roots: node A prepares every sample from the origin
(ssdfeed's peer entry, one worker thread, CPU seconds from getrusage), then
exports its records in batches as a peer fill sends them; node B checks and
stores those batches (the receiving side, CPU seconds likewise). Egress is
measured as the bytes A read from the origin (D) and printed for N nodes
filling themselves (N x D) and with peer fill (D), with the bytes each node
then receives over the job's fabric.

    python bench/peer_fill_bench.py --count 400 --nodes 3
"""

import argparse
import os
import resource
import tempfile

import ssdfeed
from ssdfeed import _ssdfeed
from ssdfeed._warm import _warm_options


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return r.ru_utime + r.ru_stime


def open_node(uri, root, prepare):
    o = _warm_options(cache=root, prepare=prepare, workers=1, on_error="raise", image_key=None,
                      label_key=None, cache_capacity=None, fields=None)
    return _ssdfeed.PeerEntry.open(uri, o)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=400)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--size", type=int, default=224, help="prepared side (resize to size x size)")
    p.add_argument("--codec", default="raw", help="the preparation's codec (raw, zstd, jpeg)")
    p.add_argument("--batch", type=int, default=256, help="records per batch")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = ssdfeed.make_dataset(os.path.join(tmp, "d"), format="folder", count=a.count,
                                 classes=10, seed=1, min_side=300, max_side=500)
        prepare = ssdfeed.Prepare(resize=(a.size, a.size), codec=a.codec)
        src = open_node(d["uri"], os.path.join(tmp, "a"), prepare)
        dst = open_node(d["uri"], os.path.join(tmp, "b"), prepare)
        ids = list(range(src.samples_total))

        t = cpu_seconds()
        w = src.warm_ids(ids)
        prepare_cpu = cpu_seconds() - t

        batches = []
        t = cpu_seconds()
        for i in range(0, len(ids), a.batch):
            batches.append(src.export_batch(ids[i:i + a.batch])[0])
        export_cpu = cpu_seconds() - t

        stored, record_bytes = 0, sum(len(b) for b in batches)
        t = cpu_seconds()
        for b in batches:
            stored += dst.import_batch(b).stored
        dst.sync()
        store_cpu = cpu_seconds() - t

    n, D = a.nodes, w.origin_bytes
    print(f"{a.count} samples, {D / 2**20:.1f} MiB at the origin, prepared to "
          f"{a.size}x{a.size} {a.codec}: {record_bytes / 2**20:.1f} MiB of records")
    print(f"prepare from the origin: {prepare_cpu / w.prepared * 1e3:.2f} ms CPU per sample "
          f"({w.prepared} prepared)")
    print(f"store a received record: {store_cpu / stored * 1e3:.3f} ms CPU per record "
          f"({stored} stored; export on the sender {export_cpu / stored * 1e3:.3f} ms)")
    print(f"store / prepare: {store_cpu / stored / (prepare_cpu / w.prepared):.3f} "
          f"(target <= 0.1)")
    print(f"egress for {n} nodes: each fills itself {n * D / 2**20:.1f} MiB ({n}x); "
          f"peer fill {D / 2**20:.1f} MiB (1x); each node receives "
          f"{(n - 1) / n * record_bytes / 2**20:.1f} MiB of records from peers")
    # A node prepares and sends its 1/n, and stores the other (n-1)/n.
    per_node = (prepare_cpu + export_cpu) / n + store_cpu * (n - 1) / n
    print(f"cold-epoch CPU per node (the transport's own cost aside): fills itself "
          f"{prepare_cpu:.2f} s; peer fill {per_node:.2f} s ({per_node / prepare_cpu:.2f}x, "
          f"1/n = {1 / n:.2f})")


if __name__ == "__main__":
    main()
