"""ssdfeed.distributed: the nodes of a torch.distributed job fill each other's
cache entry (peer fill), so the job reads and prepares each sample once.

A node is the set of ranks that share a cache root (found from the root's
node-id file and its st_dev/st_ino, not from host names). One rank per node
(its lowest, the leader) does the node's work:

1. the leaders exchange which samples each node's entry holds;
2. the samples no node holds are dealt among the nodes; each reads its share
   from the origin, prepares and stores it (``PeerEntry.warm_ids``);
3. the leaders exchange prepared records in batches over a gloo group of
   leaders (one sender per record: one of the nodes holding it); each node
   checks and stores what it lacks; a record that fails its checks is
   refused, counted, and sent again in the next round.

A node that joins or restarts therefore reads from the origin only what no
peer holds. The process group is the trust boundary: a batch is checked for
damage (checksums, the entry's fingerprint, ids, lengths, codec and shape),
not for a peer that lies consistently. See docs/multi-node.md.
"""

import os
import threading
import time
import uuid
from typing import Optional

import numpy as np

from ssdfeed import _ssdfeed
from ssdfeed.prepare import Prepare
from ssdfeed._warm import _warm_options


def count_export(r: dict, batch: bytes, records: int, receivers: int) -> None:
    """Adds a batch exported for `receivers` nodes to a node's result dict r:
    sent counts once per receiver, what crossed the fabric."""
    r["records_sent"] += records * receivers
    r["bytes_sent"] += len(batch) * receivers


def count_import(r: dict, rep) -> None:
    """Adds what one received batch did (PeerEntry.import_batch's report) to
    a node's result dict r; the Ray fill counts the same way."""
    r["records_received"] += rep.stored
    r["bytes_received"] += rep.bytes
    r["records_refused"] += rep.refused
    r["not_admitted"] += rep.not_admitted
    if rep.refused and not r["first_refusal"]:
        r["first_refusal"] = rep.first_refusal


# The root's node identity: a random id written once, so two hosts whose
# roots happen to have the same st_dev/st_ino are still two nodes.
NODE_ID_FILE = "node-id"
# Exchange rounds before the leaders give up on refilling what peers hold and
# read the rest from the origin (a peer whose records keep failing checks).
MAX_ROUNDS = 4
# Tags of a batch's two point-to-point messages between leaders: its length,
# then its bytes.
SIZE_TAG, BATCH_TAG = 7301, 7302


def _torch_dist():
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("ssdfeed.distributed needs torch.distributed initialised "
                           "(torch.distributed.init_process_group, as torchrun jobs do)")
    return dist


def node_identity(root: str) -> str:
    """What ranks sharing the cache root have in common: the root's node id
    (ROOT/node-id, made on first use) with its st_dev and st_ino."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, NODE_ID_FILE)
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex}"
        with open(tmp, "w") as f:
            f.write(uuid.uuid4().hex + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails if another rank made it first
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    with open(path) as f:
        node_id = f.read().strip()
    if not node_id or len(node_id) > 64:
        raise ValueError(f"{path}: not a node id (expected one line of hex); remove it")
    st = os.stat(root)
    return f"{node_id}:{st.st_dev}:{st.st_ino}"


def deal(missing: np.ndarray, takers: np.ndarray, node: int) -> np.ndarray:
    """Node's share of the samples no node holds: every k-th of them among
    the nodes that still admit (takers), or nothing if node is not one."""
    if node not in takers:
        return np.empty(0, dtype=np.int64)
    k = int(np.flatnonzero(takers == node)[0])
    return missing[k:: len(takers)]


def senders(present: np.ndarray, wanting: np.ndarray):
    """(ids, sender node of each): every record some wanting node lacks and
    some node holds, sent by one holder, the (id mod holders)-th, so the
    sending is spread over the holders."""
    need = wanting[:, None] & ~present
    needed = np.flatnonzero(need.any(axis=0) & present.any(axis=0))
    holders = present[:, needed]
    pick = needed % holders.sum(axis=0)
    sender = np.array([np.flatnonzero(holders[:, j])[pick[j]] for j in range(needed.size)],
                      dtype=np.int64)
    return needed, sender


def plan(present: np.ndarray, wanting: np.ndarray, batch_records: int) -> list:
    """One round's batches: for each node, the batches it sends, in order,
    each (ids, receivers). Every record some wanting node lacks goes out once,
    from the holder senders() picks, in a batch of records that exactly the
    same nodes lack, and goes to those nodes only: a node never receives a
    record it holds (or any batch, when it holds everything)."""
    needed, sender = senders(present, wanting)
    lacking = wanting[:, None] & ~present[:, needed]  # nodes x needed
    sets, which = np.unique(lacking.T, axis=0, return_inverse=True)
    which = which.reshape(-1)
    out = []
    for k in range(present.shape[0]):
        mine = []
        for g in range(len(sets)):
            ids = needed[(sender == k) & (which == g)]
            receivers = np.flatnonzero(sets[g]).tolist()
            mine += [(ids[i:i + batch_records].tolist(), receivers)
                     for i in range(0, ids.size, batch_records)]
        out.append(mine)
    return out


class _Nodes:
    """Who is who in the job: made on the calling (main) thread, where every
    rank makes the same process groups in the same order (torch's rule); the
    fill itself may then run on a thread (Loader(peer_fill=True))."""

    def __init__(self, root: str):
        dist = _torch_dist()
        self.rank = dist.get_rank()
        world = dist.get_world_size()
        idents = [None] * world
        dist.all_gather_object(idents, node_identity(root))
        order = list(dict.fromkeys(idents))  # nodes in order of their lowest rank
        self.node = order.index(idents[self.rank])
        self.nodes = len(order)
        self.leaders = [idents.index(i) for i in order]
        self.node_of_rank = [order.index(i) for i in idents]
        self.leader = self.leaders[self.node]
        self.is_leader = self.rank == self.leader
        # gloo whatever the job's backend: batches are host bytes, and a group
        # of its own keeps the fill off the training's collectives.
        self.leader_group = dist.new_group(self.leaders, backend="gloo")
        self.all_group = dist.new_group(backend="gloo")

    def ranks_of(self, node: int) -> list:
        return [r for r, k in enumerate(self.node_of_rank) if k == node]


def warm(source, *, prepare: Prepare = Prepare(), cache=True, workers: Optional[int] = None,
         on_error: str = "raise", image_key: Optional[str] = None,
         label_key: Optional[str] = None, fields: Optional[dict] = None,
         cache_capacity: Optional[int] = None, batch_records: int = 256,
         _tamper=None) -> dict:
    """Fills this node's cache entry of (source, prepare) with the job's other
    nodes; every rank of the job calls it (a collective), and it returns when
    this node's entry is complete (or its cache is full). The arguments are
    ``ssdfeed.warm``'s; batch_records (default 256) is how many records a
    node sends in one batch.

    Returns a dict (the same on every rank of a node): ``node``, ``nodes``,
    ``samples_total``, ``samples_present``, ``complete``, ``prepared`` and
    ``origin_bytes`` (this node's reads from the origin), ``records_received``,
    ``bytes_received``, ``records_sent``, ``bytes_sent``, ``records_refused``,
    ``not_admitted``, ``cache_full``, ``warning`` (why the entry stopped
    admitting), ``rounds`` and ``seconds`` (to this node's entry complete).
    """
    o = _warm_options(cache=cache, prepare=prepare, workers=workers, on_error=on_error,
                      image_key=image_key, label_key=label_key,
                      cache_capacity=cache_capacity, fields=fields)
    if isinstance(batch_records, bool) or not isinstance(batch_records, int) \
            or batch_records < 1:
        raise ValueError(f"batch_records must be an int >= 1, not {batch_records!r}")
    nodes = _Nodes(o.cache.root)
    return _fill(os.fspath(source), o, nodes, batch_records, _tamper)


def _fill(uri: str, o, nodes: _Nodes, batch_records: int, tamper=None, reads=None) -> dict:
    """The fill on every rank: leaders work, the others wait for their
    leader's result. reads(n, rank): the ids rank reads first, or None."""
    dist = _torch_dist()
    result, error = None, None
    if nodes.is_leader:
        try:
            result = _NodeFill(uri, o, nodes, batch_records, tamper, reads).run()
        except Exception as e:  # noqa: BLE001: re-raised below on every rank of the node
            error = f"{type(e).__name__}: {e}"
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (result, error), group=nodes.all_group)
    result, error = gathered[nodes.leader]
    if error is not None:
        raise RuntimeError(f"ssdfeed.distributed: node {nodes.node} (rank {nodes.leader}): "
                           f"{error}")
    return result


class _NodeFill:
    """A leader's rounds: gather what every node holds, deal what none holds
    to the origin, exchange what some hold."""

    def __init__(self, uri, o, nodes: _Nodes, batch_records: int, tamper, reads=None):
        self.nodes, self.batch_records, self.tamper = nodes, batch_records, tamper
        self.t0 = time.monotonic()
        self.pe = _ssdfeed.PeerEntry.open(uri, o)
        self.n = self.pe.samples_total
        self.reader = self._readers(reads)
        self.r = dict(node=nodes.node, nodes=nodes.nodes, samples_total=self.n,
                      prepared=0, origin_bytes=0, records_received=0, bytes_received=0,
                      records_sent=0, bytes_sent=0, records_refused=0, not_admitted=0,
                      first_refusal="", rounds=0, seconds=None)
        self.failed = ""  # this leader's error, told to the others before raising
        # Why this node's entry stopped admitting, seen by a warm-up (through
        # its own handle of the entry) or by an import; "" while it admits.
        self.full = ""

    def run(self) -> dict:
        for rnd in range(MAX_ROUNDS + 1):
            present, admitting = self._gather_presence()
            wanting = admitting & ~present.all(axis=1)
            if not wanting.any():
                break
            self.r["rounds"] = rnd + 1
            held = present.any(axis=0)
            missing = np.flatnonzero(~held)
            if rnd == MAX_ROUNDS:  # peers could not deliver: the origin it is
                missing = np.flatnonzero(~present[self.nodes.node])
                if wanting[self.nodes.node] and self._admitting():
                    self._warm(missing.tolist())
                continue
            if missing.size:
                self._warm(self._share(missing, admitting))
                continue  # gather again: the exchange sends what was just stored
            self._exchange(present, wanting)
        return self._finish()

    def _gather_presence(self):
        """(nodes x samples bool, nodes bool admitting) over the leaders."""
        import torch
        import torch.distributed as dist

        held = self._guarded(self.pe.presence)
        row = torch.zeros(self.n + 2, dtype=torch.uint8)
        if held is not None:
            row[: self.n] = torch.from_numpy(np.frombuffer(held, dtype=np.uint8).copy())
        row[self.n] = 1 if self._admitting() else 0
        row[self.n + 1] = 1 if self.failed else 0
        rows = [torch.empty_like(row) for _ in range(self.nodes.nodes)]
        dist.all_gather(rows, row, group=self.nodes.leader_group)
        table = torch.stack(rows).numpy()
        if table[:, self.n + 1].any():  # every leader raises the failing node's error
            said = [None] * self.nodes.nodes
            dist.all_gather_object(said, self.failed, group=self.nodes.leader_group)
            bad = int(np.flatnonzero(table[:, self.n + 1])[0])
            raise RuntimeError(self.failed or f"node {bad} failed: {said[bad]}")
        return table[:, : self.n].astype(bool), table[:, self.n].astype(bool)

    def _readers(self, reads):
        """The node whose ranks read each sample first (-1: none), when the
        fill runs beside a loader whose reads are known: that node then
        reads it from the origin, where its loader would anyway."""
        if reads is None:
            return None
        reader = np.full(self.n, -1, dtype=np.int64)
        for node, leader in enumerate(self.nodes.leaders):
            for rank in self.nodes.ranks_of(node):
                ids = np.asarray(reads(self.n, rank), dtype=np.int64)
                ids = ids[(ids >= 0) & (ids < self.n)]
                reader[ids[reader[ids] < 0]] = node
        return reader

    def _share(self, missing: np.ndarray, admitting: np.ndarray) -> list:
        """This node's share of the samples no node holds: those its ranks'
        loaders read first (beside a loader), and every k-th of the rest
        among the nodes that still admit."""
        takers = np.flatnonzero(admitting)
        if self.nodes.node not in takers:
            return []
        mine = np.empty(0, dtype=np.int64)
        if self.reader is not None:
            owner = self.reader[missing]
            mine = missing[owner == self.nodes.node]
            missing = missing[~np.isin(owner, takers)]  # read by no admitting node
        return np.concatenate([mine, deal(missing, takers, self.nodes.node)]).tolist()

    def _warm(self, ids: list) -> None:
        if not ids:
            return
        w = self._guarded(self.pe.warm_ids, ids)
        if w is None:
            return
        self.r["prepared"] += w.prepared
        self.r["origin_bytes"] += w.origin_bytes
        if w.cache_full:
            self.full = w.warning or "the cache is full"

    def _admitting(self) -> bool:
        if not self.full and not self.pe.admitting:
            self.full = self.pe.warning or "the cache is full"
        return not self.full

    def _exchange(self, present: np.ndarray, wanting: np.ndarray) -> None:
        """One round: every record some admitting node lacks goes out once,
        from one of the nodes holding it, in batches, each sent point to
        point to the nodes that lack its records (plan()). In step s every
        node sends its s-th batch and receives the s-th batches meant for it;
        each node knows the plan, so it knows whom to wait for."""
        batches = plan(present, wanting, self.batch_records)
        me = self.nodes.node
        for step in range(max(len(b) for b in batches)):
            out_ids, to = batches[me][step] if step < len(batches[me]) else ([], [])
            batch = self._export(out_ids, len(to), step) if to and not self.failed else b""
            senders_now = [k for k, b in enumerate(batches)
                           if step < len(b) and me in b[step][1]]
            for got in self._swap(batch, to, senders_now):
                if got and not self.failed:
                    self._import(got)
        self._guarded(self.pe.sync)

    def _guarded(self, fn, *args):
        """fn(*args), an error kept for the next gather: a leader that left
        the exchange's collectives would leave its peers waiting for it."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001: raised on every leader at the next gather
            self.failed = self.failed or f"{type(e).__name__}: {e}"
            return None

    def _export(self, ids: list, receivers: int, step: int) -> bytes:
        out = self._guarded(self.pe.export_batch, ids, receivers)
        if out is None:
            return b""
        batch, records = out
        count_export(self.r, batch, records, receivers)
        return self.tamper(batch, step) if self.tamper is not None else batch

    def _import(self, batch: bytes) -> None:
        rep = self._guarded(self.pe.import_batch, batch)
        if rep is not None:
            count_import(self.r, rep)

    def _swap(self, data: bytes, to: list, senders_from: list) -> list:
        """Sends data to the nodes in to and returns the batch each node in
        senders_from sends here, over the leaders' gloo group, point to
        point: a length, then the bytes (none for an empty batch, one a
        failed export left empty). Every send is posted before any receive
        is waited for, so no order of the nodes' steps can deadlock."""
        import torch
        import torch.distributed as dist

        g, leaders = self.nodes.leader_group, self.nodes.leaders
        size = torch.tensor([len(data)], dtype=torch.int64)
        payload = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else None
        sends = []
        for k in to:
            sends.append(dist.isend(size, leaders[k], group=g, tag=SIZE_TAG))
            if payload is not None:
                sends.append(dist.isend(payload, leaders[k], group=g, tag=BATCH_TAG))
        got = []
        for k in senders_from:
            n = torch.empty(1, dtype=torch.int64)
            dist.irecv(n, leaders[k], group=g, tag=SIZE_TAG).wait()
            if int(n) == 0:
                got.append(b"")
                continue
            buf = torch.empty(int(n), dtype=torch.uint8)
            dist.irecv(buf, leaders[k], group=g, tag=BATCH_TAG).wait()
            got.append(buf.numpy().tobytes())
        for w in sends:
            w.wait()
        return got

    def _finish(self) -> dict:
        if self.failed:  # after the last gather: nobody waits for this leader now
            raise RuntimeError(self.failed)
        present = np.frombuffer(self.pe.presence(), dtype=np.uint8)
        self.r["samples_present"] = int(present.sum())
        self.r["complete"] = self.r["samples_present"] == self.n
        self.r["cache_full"] = not self._admitting()
        self.r["warning"] = self.full
        self.r["dir"] = self.pe.dir
        if self.r["complete"]:
            self.r["seconds"] = time.monotonic() - self.t0
            self.pe.record_complete(self.r["seconds"])
        self.pe.sync()
        return self.r


class PeerFill:
    """A peer fill running on a thread beside training
    (``ssdfeed.torch.Loader(..., peer_fill=True)``): the process groups are
    made now, on the calling thread; ``wait()`` returns the fill's result."""

    def __init__(self, uri: str, o, batch_records: int = 256, reads=None):
        self._nodes = _Nodes(o.cache.root)
        self.result, self.error = None, None
        self._thread = threading.Thread(target=self._run, args=(uri, o, batch_records, reads),
                                        name="ssdfeed-peer-fill", daemon=True)
        self._thread.start()

    def _run(self, uri, o, batch_records, reads):
        try:
            self.result = _fill(uri, o, self._nodes, batch_records, reads=reads)
        except Exception as e:  # noqa: BLE001: wait() raises it
            self.error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: Optional[float] = None) -> dict:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("the peer fill is still running")
        if self.error is not None:
            raise self.error
        return self.result
