"""One rank for test_stage_time.py, started by torch.multiprocessing (gloo).

argv-free: run(rank, world, slow_uri, fast_uri, slow_rank, out). Every rank
serves the same number of batches and all-reduces once per step, as DDP's
gradient sync does; the slow rank reads large JPEGs from the origin with
one worker (its input is slower on purpose), the others small ones. With
rank_wait_every=4 the loader gathers every rank's per-step waits; rank 0
writes stats()["ranks"] of every rank.
"""

import datetime
import json
import os

import torch
import torch.distributed as dist

import ssdfeed
from ssdfeed.torch import Loader


def run(rank, world, port, slow_uri, fast_uri, slow_rank, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    slow = rank == slow_rank
    kw = dict(cache=False, prepare=ssdfeed.Prepare(resize=(16, 16)), batch_size=4,
              workers=1, prefetch=1, rank=0, world_size=1, rank_wait_every=4)
    with Loader(slow_uri if slow else fast_uri, **kw) as loader:
        for _ in loader:
            step = torch.ones(1)
            dist.all_reduce(step)  # the step's gradient sync: ranks go at the slowest's pace
        ranks = loader.stats()["ranks"]
    everyone = [None] * world
    dist.all_gather_object(everyone, ranks)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(everyone, f)
    dist.destroy_process_group()
