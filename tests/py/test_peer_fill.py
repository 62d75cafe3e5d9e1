"""Peer fill (ssdfeed.distributed.warm, Loader(peer_fill=True)): nodes of a
torch.distributed job, each a process (or two) with its own cache root, over
gloo on loopback, reading an S3 origin (moto_server) through a proxy that
counts the bytes it serves."""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

import ssdfeed
from s3_util import FaultProxy, MotoServer, free_port, upload_tree

pytest.importorskip("torch")
boto3 = pytest.importorskip("boto3", reason="boto3 not installed (pip install boto3)")
pytest.importorskip("moto.server", reason="moto[server] not installed (pip install 'moto[server]')")

pytestmark = pytest.mark.serial  # several processes each, with ports picked then bound

HERE = os.path.dirname(os.path.abspath(__file__))
N, SIZE = 60, 32
BUCKET = "data"
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
         "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """(uri, dataset bytes, proxy, sorted labels of all samples): N samples
    in an S3 bucket behind a byte-counting proxy."""
    d = ssdfeed.make_dataset(str(tmp_path_factory.mktemp("peer") / "d"), format="folder",
                             count=N, classes=N, seed=4, min_side=400, max_side=600)
    server = MotoServer()
    s3 = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=BUCKET)
    root = d["uri"].split(":", 1)[1]
    upload_tree(s3, BUCKET, root, "peer/")
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(root) for f in fs)
    proxy = FaultProxy(server.port, lambda *a: None)
    local = ssdfeed.Source(d["uri"])
    labels = sorted(local.read(i)[1] for i in range(len(local)))
    yield f"folder:s3://{BUCKET}/peer", total, proxy, labels
    proxy.close()
    server.close()


def run_job(origin, roots, mode, tmp, tag, per_rank=None, expect_ok=True, **common):
    """One job: rank r uses roots[r] (ranks sharing a root are one node).
    Returns (results by rank, exit codes, bytes the origin served)."""
    uri, _, proxy, _ = origin
    proxy.served_bytes = 0
    env = dict(os.environ, **CREDS, AWS_ENDPOINT_URL=proxy.url, SSDFEED_S3_BACKOFF_MS="1")
    env.pop("AWS_SESSION_TOKEN", None)
    port = free_port()
    procs, outs = [], []
    for rank, root in enumerate(roots):
        out = str(tmp / f"{tag}-{rank}.json")
        cfg = dict(rank=rank, world_size=len(roots), port=port, root=str(root), uri=uri,
                   size=SIZE, out=out, mode=mode, **common, **(per_rank or {}).get(rank, {}))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "peer_fill_worker.py"),
                                       json.dumps(cfg)], env=env, stderr=subprocess.PIPE,
                                      text=True))
        outs.append(out)
    codes, errs = [], []
    for p in procs:
        _, err = p.communicate(timeout=400)
        codes.append(p.returncode)
        errs.append(err)
    run_job.stderr = errs  # what the ranks said, for a test of a failing job
    if expect_ok:
        assert codes == [0] * len(roots), "\n".join(errs)
    results = []
    for out in outs:
        if os.path.exists(out):
            with open(out) as f:
                results.append(json.load(f))
        else:
            results.append(None)
    return results, codes, proxy.served_bytes


def cli(*args):
    r = subprocess.run(["ssdfeed", *args], capture_output=True, text=True)
    return r


def entries(root):
    r = cli("cache", "ls", "--cache", str(root), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def verify_clean(root):
    r = cli("cache", "verify", "--cache", str(root), "--json")
    assert r.returncode == 0, r.stdout + r.stderr


def records_of(root, tmp):
    """The entry's records as an export carries them, ascending ids."""
    (e,) = entries(root)
    path = tmp / f"export-{os.path.basename(str(root))}.tar"
    r = cli("cache", "export", e["entry"], "--cache", str(root), "--to", str(path))
    assert r.returncode == 0, r.stderr
    with tarfile.open(path) as t:
        return b"".join(t.extractfile(m).read() for m in t.getmembers()
                        if m.name.startswith("records/"))


def test_three_nodes_read_and_prepare_each_sample_once(origin, tmp_path):
    roots = [tmp_path / f"node{i}" for i in range(3)]
    results, _, served = run_job(origin, roots, "warm+epoch", tmp_path, "once")
    dataset_bytes = origin[1]
    print(f"origin served {served} bytes for a {dataset_bytes}-byte dataset "
          f"({served / dataset_bytes:.3f}x) to 3 nodes")
    assert served <= 1.05 * dataset_bytes
    warms = [r["warm"] for r in results]
    assert sum(w["prepared"] for w in warms) == N  # each sample prepared once, on one node
    assert all(w["complete"] and w["samples_present"] == N for w in warms)
    assert all(w["prepared"] > 0 for w in warms)  # the origin reads were shared
    for w in warms:  # what a node did not prepare it received, from peers
        assert w["records_received"] == N - w["prepared"]
        assert w["records_refused"] == 0 and w["seconds"] is not None
    # Each record went out once, from the node that prepared it, to both
    # peers (sent counts once per receiver: what crossed the fabric).
    assert [w["records_sent"] for w in warms] == [2 * w["prepared"] for w in warms]
    assert sum(w["bytes_sent"] for w in warms) == sum(w["bytes_received"] for w in warms)
    # The epoch after: global shuffle over 3 ranks, every sample served once,
    # none read or prepared again.
    labels = sorted(lb for r in results for lb in r["labels"])
    assert labels == origin[3]
    assert all(r["stats"]["prepared"] == 0 and r["stats"]["origin_bytes"] == 0 for r in results)
    for root in roots:
        verify_clean(root)
    recs = [records_of(root, tmp_path) for root in roots]
    assert recs[0] and recs[0] == recs[1] == recs[2]
    # cache ls says where the entry came from.
    r = cli("cache", "ls", "--cache", str(roots[0]))
    assert "peer fill:" in r.stdout and "received" in r.stdout, r.stdout


def test_flipped_byte_in_a_received_record_is_refused_and_refilled(origin, tmp_path):
    # Ranks 0 and 1 share a root: one node of two ranks, whose leader (rank 0)
    # sends its first batch with a byte of its first record flipped.
    roots = [tmp_path / "a", tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    results, _, served = run_job(origin, roots, "warm", tmp_path, "flip",
                                 per_rank={0: {"flip_at": 0}})
    warms = [r["warm"] for r in results]
    assert [w["nodes"] for w in warms] == [3] * 4
    assert warms[0]["node"] == warms[1]["node"] == 0 and warms[0] == warms[1]
    assert warms[2]["records_refused"] == 1 and warms[3]["records_refused"] == 1
    assert "checksum" in warms[2]["first_refusal"], warms[2]["first_refusal"]
    assert all(w["complete"] for w in warms)
    assert sum(w["prepared"] for w in warms[1:]) == N  # refilled from the peer, not the origin
    assert served <= 1.05 * origin[1]
    for root in set(roots):
        verify_clean(root)
    recs = [records_of(root, tmp_path) for root in (roots[0], roots[2], roots[3])]
    assert recs[0] == recs[1] == recs[2]


def test_a_batch_goes_only_to_the_nodes_that_lack_its_records(origin, tmp_path, monkeypatch):
    dataset_bytes = origin[1]
    roots = [tmp_path / f"node{i}" for i in range(3)]
    run_job(origin, roots, "warm", tmp_path, "first")
    keep_all_half_none(origin, roots, monkeypatch)
    results, _, served = run_job(origin, roots, "warm", tmp_path, "second")
    warms = [r["warm"] for r in results]
    assert all(w["complete"] for w in warms)
    assert [w["prepared"] for w in warms] == [0, 0, 0] and served < 0.05 * dataset_bytes
    assert [w["records_received"] for w in warms] == [0, N - N // 2, N]
    # The node holding everything got nothing over the fabric but the
    # gathers that plan the rounds (less than one record's bytes).
    record = SIZE * SIZE * 3 + 92
    assert warms[0]["bytes_received"] == 0
    assert results[0]["arrived"] < record, results[0]["arrived"]
    # Every record sent was one its receiver lacked: what went out is what
    # was stored, and what arrived at a node is what it stored.
    assert sum(w["records_sent"] for w in warms) == N + N - N // 2
    assert sum(w["bytes_sent"] for w in warms) == sum(w["bytes_received"] for w in warms)
    for r in results[1:]:
        assert r["warm"]["bytes_received"] <= r["arrived"] < r["warm"]["bytes_received"] + record
    for root in roots:
        verify_clean(root)
    recs = [records_of(root, tmp_path) for root in roots]
    assert recs[0] == recs[1] == recs[2]


def test_node_killed_mid_exchange_restarts_filling_only_what_it_lacks_from_peers(
        origin, tmp_path):
    roots = [tmp_path / f"node{i}" for i in range(3)]
    _, codes, _ = run_job(origin, roots, "warm", tmp_path, "killed", expect_ok=False,
                          per_rank={2: {"die_at": 1}}, batch_records=4)
    assert codes[2] == 17 and codes[0] != 0 and codes[1] != 0  # the job died with it
    (before,) = entries(roots[2])
    lacking = before["samples_total"] - before["samples_present"]
    assert 0 < lacking < N
    results, _, served = run_job(origin, roots, "warm", tmp_path, "restarted", batch_records=4)
    warms = [r["warm"] for r in results]
    assert all(w["complete"] for w in warms)
    # Nothing read or prepared again: node 2 got exactly what it lacked, from peers.
    assert [w["prepared"] for w in warms] == [0, 0, 0]
    assert [w["origin_bytes"] for w in warms] == [0, 0, 0]
    assert warms[2]["records_received"] == lacking
    lacked = [N - e["samples_present"] for e in (entries(roots[0])[0], entries(roots[1])[0])]
    print(f"restart: node 2 lacked {lacking} of {N}; origin served {served} bytes (listings)")
    assert served < 0.05 * origin[1]  # the listing, no sample
    assert lacked == [0, 0]
    for root in roots:
        verify_clean(root)


def test_one_full_node_keeps_what_fits_and_the_others_are_unaffected(origin, tmp_path):
    roots = [tmp_path / f"node{i}" for i in range(3)]
    record = SIZE * SIZE * 3 + 92
    results, _, served = run_job(origin, roots, "warm", tmp_path, "full",
                                 per_rank={2: {"capacity": N * record // 2 + (64 << 10)}})
    warms = [r["warm"] for r in results]
    assert warms[0]["complete"] and warms[1]["complete"]
    assert not warms[2]["complete"] and warms[2]["cache_full"]
    assert warms[2]["warning"]  # says why it stopped admitting
    assert 0 < warms[2]["samples_present"] < N
    assert served <= 1.1 * origin[1]
    for root in roots:
        verify_clean(root)
    recs = [records_of(root, tmp_path) for root in roots[:2]]
    assert recs[0] == recs[1]


def test_loader_peer_fill_trains_while_the_nodes_fill_each_other(origin, tmp_path):
    roots = [tmp_path / f"node{i}" for i in range(3)]
    results, _, served = run_job(origin, roots, "loader", tmp_path, "loader")
    labels = sorted(lb for r in results for lb in r["labels"])
    assert labels == origin[3]  # every sample served once in the epoch
    assert all(r["warm"]["complete"] for r in results)
    # Each node's origin share is what its ranks read in the first epoch, so
    # a sample is prepared once across the nodes, by the fill or the loader
    # (whichever claimed it first), and read from the origin once.
    prepared = sum(r["warm"]["prepared"] + r["stats"]["prepared"] for r in results)
    assert prepared == N
    read = sum(r["warm"]["origin_bytes"] + r["stats"]["origin_bytes"] for r in results)
    assert read <= 1.05 * origin[1]
    for root in roots:
        verify_clean(root)
    # The proxy also counts the listings and the loader's size estimate of a
    # cold entry (a few samples per node): large beside 60 samples only.
    print(f"peer_fill Loader: samples read {read / origin[1]:.2f}x the dataset; the origin "
          f"served {served / origin[1]:.2f}x with listings and estimates")


def keep_all_half_none(origin, roots, monkeypatch):
    """Of three filled nodes' roots, node 0 keeps everything, node 1 only
    the first half (refilled from the origin) and node 2 nothing."""
    uri, _, proxy, _ = origin
    shutil.rmtree(roots[1])
    shutil.rmtree(roots[2])
    with monkeypatch.context() as m:
        for k, v in dict(CREDS, AWS_ENDPOINT_URL=proxy.url).items():
            m.setenv(k, v)
        half = peer_entry(uri, roots[1])
        half.warm_ids(list(range(N // 2)))
        half.sync()
        del half


def peer_entry(uri, root, size=SIZE):
    from ssdfeed import _ssdfeed
    from ssdfeed._warm import _warm_options
    o = _warm_options(cache=str(root), prepare=ssdfeed.Prepare(resize=(size, size)), workers=1,
                      on_error="raise", image_key=None, label_key=None, cache_capacity=None,
                      fields=None)
    return _ssdfeed.PeerEntry.open(uri, o)


def test_a_batch_is_checked_before_anything_is_stored(tmp_path):
    # In one process, no transport: what import_batch refuses, and why.
    d = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=8, classes=2, seed=1,
                             min_side=40, max_side=60)
    a, b = peer_entry(d["uri"], tmp_path / "a"), peer_entry(d["uri"], tmp_path / "b")
    assert a.fingerprint == b.fingerprint
    a.warm_ids(list(range(8)))
    batch, records = a.export_batch([1, 2, 3])
    assert records == 3 and batch.startswith(b"ssdfeed-peer-records 1 " + a.fingerprint.encode())
    other = peer_entry(d["uri"], tmp_path / "c", size=SIZE + 1)  # another preparation
    r = other.import_batch(batch)
    assert (r.stored, r.refused) == (0, 1) and "another entry" in r.first_refusal
    r = b.import_batch(batch[:-5])  # the last record cut short
    assert (r.stored, r.refused) == (2, 1) and "runs past the batch" in r.first_refusal
    r = b.import_batch(batch)
    assert (r.stored, r.already_present, r.refused) == (1, 2, 0)
    assert list(b.presence()) == [0, 1, 1, 1, 0, 0, 0, 0]


def test_a_bad_sample_on_one_node_fails_every_rank_naming_it_not_a_hang(origin, tmp_path):
    d = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=30, classes=3, seed=2,
                             corrupt=0.02, min_side=40, max_side=60)
    assert d["corrupt"] == 1  # in one node's share: the other two must hear of it
    local = (d["uri"],) + origin[1:]
    roots = [tmp_path / f"node{i}" for i in range(3)]
    results, codes, _ = run_job(local, roots, "warm", tmp_path, "bad", expect_ok=False)
    assert all(c != 0 for c in codes) and results == [None] * 3
    # Every rank names the failing node's error: the bad sample's file.
    assert all("ssdfeed.distributed: node" in e and ".jpg" in e for e in run_job.stderr), \
        run_job.stderr
