"""One DDP rank for test_ddp_skip.py, started by torch.distributed.run.

argv: dataset uri, output path. For each seed and worker count, serves an
epoch with on_error="skip", all-reducing once per batch as DDP's gradient
sync does (a rank with an extra batch would wait forever in it; the gloo
timeout turns that into an error). Rank 0 writes what every rank saw.
"""

import datetime
import json
import sys

import torch
import torch.distributed as dist

import ssdfeed
from ssdfeed.torch import Loader


def epoch(src, seed, workers, rank, world):
    kw = dict(cache=False, prepare=ssdfeed.Prepare(resize=(8, 8)), batch_size=4, shuffle=True,
              seed=seed, rank=rank, world_size=world, workers=workers, on_error="skip")
    with Loader(src, **kw) as loader:
        labels, batches, synced = [], 0, 0
        for _, y in loader:
            labels += y.tolist()
            batches += 1
            step = torch.ones(1)
            dist.all_reduce(step)  # both ranks reach it, or this one waits
            synced += int(step.item()) == world
        return dict(batches=batches, synced=synced, samples=len(labels), len=len(loader),
                    skipped=loader.stats()["skipped"], labels=labels)


def main():
    src, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = {f"{seed}/{workers}": epoch(src, seed, workers, rank, world)
            for seed in range(4) for workers in (1, 3)}
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(everyone, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
