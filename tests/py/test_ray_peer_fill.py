"""ssdfeed.ray.warm on a real 3-raylet Ray cluster on this machine, each
raylet a node with its own cache root: one call warms every node, each
sample prepared once, the nodes filling each other through the object
store; a node whose root was wiped refills from its peers only."""

import os
import shutil

import pytest

ray = pytest.importorskip("ray", reason="ssdfeed.ray needs ray[data] (pip install 'ray[data]')")
pytest.importorskip("ray.data", reason="ssdfeed.ray needs ray[data]")

import ssdfeed  # noqa: E402
import ssdfeed.ray as sray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from test_peer_fill import records_of, verify_clean  # noqa: E402

pytestmark = pytest.mark.serial  # a local cluster: its own ports and /tmp/ray

N = 60
PREP = ssdfeed.Prepare(resize=(32, 32))
MB = 1 << 20


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=1, object_store_memory=80 * MB)
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def test_one_call_warms_every_node_preparing_each_sample_once(cluster, tmp_path):
    d = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=N, classes=N, seed=4,
                             min_side=200, max_side=300)
    src = d["uri"].split(":", 1)[1]
    dataset_bytes = sum(os.path.getsize(os.path.join(dp, f))
                        for dp, _, fs in os.walk(src) for f in fs)
    cache = str(tmp_path / "cache-{node_id}")
    r = sray.warm(d["uri"], prepare=PREP, cache=cache, workers=1, batch_records=16)
    nodes = r["nodes"]
    assert len(nodes) == 3 and r["complete"]
    assert r["prepared"] == N  # once, across the cluster
    assert r["origin_bytes"] <= 1.05 * dataset_bytes
    assert all(n["prepared"] > 0 and n["records_received"] == N - n["prepared"]
               for n in nodes.values())
    roots = [cache.replace("{node_id}", nid) for nid in nodes]
    for root in roots:
        verify_clean(root)
    recs = [records_of(root, tmp_path) for root in roots]
    assert recs[0] == recs[1] == recs[2]

    # A node's root wiped (a replaced node): it receives everything from its
    # peers; nothing is read from the origin.
    shutil.rmtree(roots[2])
    again = sray.warm(d["uri"], prepare=PREP, cache=cache, workers=1, batch_records=16)
    assert again["complete"] and again["prepared"] == 0 and again["origin_bytes"] == 0
    wiped = list(nodes)[2]
    assert again["nodes"][wiped]["records_received"] == N
