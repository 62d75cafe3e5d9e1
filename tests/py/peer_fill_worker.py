"""One rank of a peer-fill job for tests/py/test_peer_fill.py: joins a gloo
process group on loopback, runs ssdfeed.distributed.warm (or a
Loader(peer_fill=True) epoch), and writes what it did as JSON.

argv[1]: a JSON config: rank, world_size, port, root, uri, size, out, mode
("warm" | "warm+epoch" | "loader"), and optionally flip_at (flip a byte of
the first record of this rank's batch number flip_at, once), die_at (exit at once,
without cleanup, before sending batch number die_at), capacity (bytes).
The JSON written has "arrived": the bytes of tensors that reached this rank
from other ranks through the torch.distributed calls ssdfeed.distributed
makes (counted here, at the transport, whatever ssdfeed counts itself)."""

import datetime
import json
import os
import sys

import torch.distributed as dist

import ssdfeed
import ssdfeed.distributed
import ssdfeed.torch

HEADER = len(b"ssdfeed-peer-records 1 ") + 64 + 1  # a batch's header line
RECORD_HEADER = 40


def tamper_for(cfg):
    flip_at, die_at = cfg.get("flip_at"), cfg.get("die_at")
    if flip_at is None and die_at is None:
        return None

    flipped = []

    def tamper(batch, step):
        if step == die_at:
            os._exit(17)  # killed mid-exchange: no cleanup, no goodbye to the group
        if step == flip_at and not flipped and len(batch) > HEADER + RECORD_HEADER:
            flipped.append(step)  # once: the refill that follows goes out intact
            b = bytearray(batch)
            b[HEADER + RECORD_HEADER] ^= 0x40  # the first record's first payload byte
            return bytes(b)
        return batch

    return tamper


ARRIVED = [0]


def count_arrivals():
    """Wraps torch.distributed's all_gather, recv and irecv (as the peer
    fill calls them, through the package) to add up the bytes each brings
    here from other ranks."""
    real = {name: getattr(dist, name) for name in ("all_gather", "recv", "irecv")}

    def nbytes(t):
        return t.numel() * t.element_size()

    def all_gather(outs, t, group=None, async_op=False):
        me = dist.get_rank(group)
        ARRIVED[0] += sum(nbytes(o) for i, o in enumerate(outs) if i != me)
        return real["all_gather"](outs, t, group=group, async_op=async_op)

    def receiver(name):
        def recv(tensor, *args, **kwargs):
            ARRIVED[0] += nbytes(tensor)
            return real[name](tensor, *args, **kwargs)
        return recv

    dist.all_gather = all_gather
    dist.recv, dist.irecv = receiver("recv"), receiver("irecv")


def main():
    cfg = json.loads(sys.argv[1])
    count_arrivals()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{cfg['port']}",
                            rank=cfg["rank"], world_size=cfg["world_size"],
                            timeout=datetime.timedelta(seconds=60))
    prepare = ssdfeed.Prepare(resize=(cfg["size"], cfg["size"]))
    out = {"rank": cfg["rank"]}
    if cfg["mode"] in ("warm", "warm+epoch"):
        out["warm"] = ssdfeed.distributed.warm(
            cfg["uri"], prepare=prepare, cache=cfg["root"], workers=1,
            cache_capacity=cfg.get("capacity"), batch_records=cfg.get("batch_records", 16),
            _tamper=tamper_for(cfg))
    if cfg["mode"] in ("warm+epoch", "loader"):
        loader = ssdfeed.torch.Loader(cfg["uri"], prepare=prepare, cache=cfg["root"],
                                      batch_size=4, shuffle=True, seed=1, num_workers=1,
                                      pin_memory=False, peer_fill=cfg["mode"] == "loader",
                                      cache_capacity=cfg.get("capacity"))
        labels = []
        for _, y in loader:
            labels += [int(v) for v in y]
        out["labels"] = labels
        out["stats"] = {k: v for k, v in loader.stats().items() if isinstance(v, (int, float))}
        if loader.peer_fill is not None:
            out["warm"] = loader.peer_fill.wait(timeout=240)
        loader.close()
    out["arrived"] = ARRIVED[0]
    with open(cfg["out"], "w") as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
