"""on_error="skip" under DDP: ranks with different numbers of bad samples
must still serve the same number of batches, or the gradient all-reduce of
the rank with one more hangs. Real ranks under torchrun (gloo, CPU)."""

import json
import os
import subprocess
import sys

import pytest

import ssdfeed

pytestmark = pytest.mark.torchrun

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))


def test_ranks_serve_len_batches_whatever_is_skipped(tmp_path):
    if not torch.distributed.is_available():
        pytest.skip("this torch build has no torch.distributed")
    # 10% corrupt, 30 samples a rank: 8 batches of 4 (the last one of 2).
    src = ssdfeed.make_dataset(str(tmp_path / "d"), format="tfrecord", count=60, classes=7,
                               seed=1, corrupt=0.1, min_side=32, max_side=48)["uri"]
    out = tmp_path / "ranks.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # --local-addr: in a container whose hostname does not resolve (buildah's
    # chroot, some CI runners) torchrun's rendezvous on the hostname hangs.
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                        "--standalone", "--local-addr=127.0.0.1",
                        os.path.join(HERE, "ddp_skip_worker.py"), src,
                        str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    ranks = json.loads(out.read_text())
    uneven = False
    for key, r0 in ranks[0].items():
        r1 = ranks[1][key]
        for r in (r0, r1):
            assert r["len"] == 8 and r["batches"] == 8 and r["synced"] == 8, (key, r)
            assert r["samples"] == 30, (key, r)  # skipped samples replaced, not dropped
        uneven = uneven or r0["skipped"] != r1["skipped"]
        seed = key.split("/")[0]
        # The substitutes do not depend on the worker count.
        assert r0["labels"] == ranks[0][f"{seed}/1"]["labels"], key
    assert uneven, "no seed gave the ranks different numbers of bad samples"
