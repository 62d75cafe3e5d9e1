"""ssdfeed.ray.warm on a real 3-raylet Ray cluster on this machine, each
raylet a node with its own cache root, reading the S3 origin of
test_peer_fill (moto_server behind a proxy that counts the bytes it
serves): the same egress and prepare-once figures as the torch.distributed
fill, a batch only to the nodes lacking its records, and a node whose actor
is killed mid-exchange refilled from its peers only."""

import os

import pytest

ray = pytest.importorskip("ray", reason="ssdfeed.ray needs ray[data] (pip install 'ray[data]')")
pytest.importorskip("ray.data", reason="ssdfeed.ray needs ray[data]")

import ssdfeed.ray as sray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from test_peer_fill import (CREDS, N, SIZE, entries, keep_all_half_none, origin,  # noqa: E402,F401
                            peer_entry, records_of, verify_clean)

import ssdfeed  # noqa: E402

pytestmark = pytest.mark.serial  # a local cluster: its own ports and /tmp/ray

PREP = ssdfeed.Prepare(resize=(SIZE, SIZE))
MB = 1 << 20


@pytest.fixture(scope="module")
def cluster(origin):
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=1, object_store_memory=80 * MB)
    # Every actor reads the origin through the counting proxy.
    env = dict(CREDS, AWS_ENDPOINT_URL=origin[2].url, SSDFEED_S3_BACKOFF_MS="1")
    ray.init(address=c.address, log_to_driver=False, runtime_env={"env_vars": env})
    yield c
    ray.shutdown()
    c.shutdown()


def node_roots(cache):
    """Each node's root, in the order warm numbers the nodes."""
    return [cache.replace("{node_id}", n["NodeID"]) for n in ray.nodes()
            if n["Alive"] and n["Resources"].get("CPU", 0) > 0]


def warm(origin, cache, **kw):
    """(warm's result, its nodes' results in node order, bytes the origin served)."""
    proxy = origin[2]
    proxy.served_bytes = 0
    r = sray.warm(origin[0], prepare=PREP, cache=cache, workers=1, **kw)
    nodes = [r["nodes"][os.path.basename(root).split("cache-", 1)[1]]
             for root in node_roots(cache)]
    return r, nodes, proxy.served_bytes


def same_records(roots, tmp_path):
    for root in roots:
        verify_clean(root)
    recs = [records_of(root, tmp_path) for root in roots]
    assert recs[0] and recs[0] == recs[1] == recs[2]


def test_one_call_warms_every_node_reading_and_preparing_each_sample_once(
        cluster, origin, tmp_path, monkeypatch):
    dataset_bytes = origin[1]
    cache = str(tmp_path / "cache-{node_id}")
    r, nodes, served = warm(origin, cache, batch_records=16)
    print(f"origin served {served} bytes for a {dataset_bytes}-byte dataset "
          f"({served / dataset_bytes:.3f}x) to 3 raylets")
    assert len(nodes) == 3 and r["complete"]
    assert served <= 1.05 * dataset_bytes
    assert r["prepared"] == N  # once, across the cluster
    assert r["origin_bytes"] <= served
    for n in nodes:
        assert n["prepared"] > 0 and n["records_received"] == N - n["prepared"]
        assert n["records_sent"] == 2 * n["prepared"] and n["records_refused"] == 0
    assert sum(n["bytes_sent"] for n in nodes) == sum(n["bytes_received"] for n in nodes)
    roots = node_roots(cache)
    same_records(roots, tmp_path)

    # Node 0 keeps everything, node 1 the first half, node 2 nothing (a
    # replaced node): nothing is read from the origin, and a batch goes only
    # to the nodes lacking its records.
    keep_all_half_none(origin, roots, monkeypatch)
    again, nodes, served = warm(origin, cache, batch_records=16)
    assert again["complete"] and again["prepared"] == 0 and again["origin_bytes"] == 0
    assert served < 0.05 * dataset_bytes  # the listings, no sample
    assert [n["records_received"] for n in nodes] == [0, N - N // 2, N]
    assert nodes[0]["bytes_received"] == 0
    assert sum(n["records_sent"] for n in nodes) == N + N - N // 2
    assert sum(n["bytes_sent"] for n in nodes) == sum(n["bytes_received"] for n in nodes)
    same_records(roots, tmp_path)


def test_a_node_killed_mid_exchange_refills_only_what_it_lacks_from_peers(
        cluster, origin, tmp_path):
    dataset_bytes = origin[1]
    cache = str(tmp_path / "cache-{node_id}")
    with pytest.raises(ray.exceptions.RayError):
        warm(origin, cache, batch_records=4, _die_at=(2, 1))
    roots = node_roots(cache)
    (before,) = entries(roots[2])
    lacking = before["samples_total"] - before["samples_present"]
    assert 0 < lacking < N
    r, nodes, served = warm(origin, cache, batch_records=4)
    assert r["complete"]
    assert r["prepared"] == 0 and r["origin_bytes"] == 0  # peers hold every record
    assert served < 0.05 * dataset_bytes
    assert nodes[2]["records_received"] == lacking
    same_records(roots, tmp_path)
