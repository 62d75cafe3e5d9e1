"""Where a training step's data time goes, seen from the training job:
Loader.stats()'s per-step wait and stage breakdown (docs/metrics.md,
"Where a step's data time goes"), the max over torch.distributed ranks,
and the exporter's and dashboard's families for them."""

import json
import os
import pathlib
import socket
import sys

import pytest

import ssdfeed

REPO = pathlib.Path(__file__).resolve().parents[2]
STAGES = ["origin_read", "decode", "prepare", "cache_write", "cache_read", "record_decode",
          "augment", "collate", "handoff"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("stage")
    return ssdfeed.make_dataset(str(d / "data"), format="tfrecord", count=64, classes=4,
                                seed=2, min_side=160, max_side=240)["uri"]


def _epoch(loader):
    return sum(1 for _ in loader)


def _minus(a, b):
    return {k: a[k] - b[k] for k in a}


def _check_workers(before, after, epoch):
    assert len(after["workers"]) == 2
    for w, (b, a) in enumerate(zip(before["workers"] or [None] * 2, after["workers"])):
        busy = a["busy_seconds"] - (b["busy_seconds"] if b else 0)
        stages = _minus(a["stages"], b["stages"]) if b else a["stages"]
        assert busy > 0, (epoch, w)
        assert abs(sum(stages.values()) - busy) <= 0.05 * busy, (epoch, w, busy, stages)


def test_stats_give_step_waits_and_stages_that_add_up_to_busy_time(data, tmp_path):
    loader = ssdfeed.Loader(data, cache=str(tmp_path / "c"), batch_size=8, workers=2,
                            shuffle=True, prepare=ssdfeed.Prepare(resize_short=128, codec="zstd"),
                            augment=ssdfeed.RandomResizedCrop(96))
    none = loader.stats()
    assert none["step_wait_steps"] == 0 and none["workers"] == [{"busy_seconds": 0.0,
                                                                 "stages": dict.fromkeys(
                                                                     STAGES, 0.0)}] * 2
    assert _epoch(loader) == 8
    cold = loader.stats()
    _check_workers(none, cold, "cold")
    assert cold["cache_misses"] == 64
    for s in ("origin_read", "decode", "prepare", "cache_write", "augment"):
        assert cold["stages"][s] > 0, s
        assert cold[s + "_seconds"] == cold["stages"][s]
    assert _epoch(loader) == 8
    warm = loader.stats()
    _check_workers(cold, warm, "warm")
    grew = _minus(warm["stages"], cold["stages"])
    assert grew["origin_read"] == 0 and grew["cache_write"] == 0
    assert grew["cache_read"] > 0 and grew["record_decode"] > 0 and grew["augment"] > 0
    assert warm["step_wait_steps"] == 16
    assert 0 <= warm["step_wait_p50_seconds"] <= warm["step_wait_p99_seconds"]
    assert warm["step_wait_last_seconds"] <= warm["step_wait_p99_seconds"]
    assert warm["step_seconds"] > 0 and warm["worker_busy_seconds"] > 0
    assert set(warm["stages"]) == set(STAGES)
    loader.close()


def test_torch_loader_rank_wait_every_is_checked(data):
    torch = pytest.importorskip("torch")
    from ssdfeed.torch import Loader
    with pytest.raises(ValueError, match="rank_wait_every must be an int >= 0"):
        Loader(data, cache=False, rank_wait_every=-1)
    # One process, no process group: its own waits, gathered over itself.
    with Loader(data, cache=False, batch_size=16, workers=1, rank_wait_every=2,
                prepare=ssdfeed.Prepare(resize=(16, 16))) as loader:
        assert loader.stats()["ranks"]["slowest_rank"] is None
        assert sum(1 for _ in loader) == 4
        r = loader.stats()["ranks"]
    assert r["steps"] == 4 and r["slowest_rank"] == 0 and len(r["wait_seconds"]) == 1
    assert r["max_wait_seconds"] > 0
    assert torch is not None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.torchrun
@pytest.mark.parametrize("slow_rank", [0, 1])
def test_max_over_ranks_names_the_rank_slowed_on_purpose(tmp_path, slow_rank):
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available():
        pytest.skip("this torch build has no torch.distributed")
    import torch.multiprocessing as mp
    # The same number of samples: every rank serves 12 batches of 4.
    slow = ssdfeed.make_dataset(str(tmp_path / "slow"), format="tfrecord", count=48, classes=3,
                                seed=1, min_side=900, max_side=1000)["uri"]
    fast = ssdfeed.make_dataset(str(tmp_path / "fast"), format="tfrecord", count=48, classes=3,
                                seed=1, min_side=24, max_side=32)["uri"]
    out = tmp_path / "ranks.json"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import rank_wait_worker
    finally:
        sys.path.pop(0)
    mp.spawn(rank_wait_worker.run, nprocs=2, join=True,
             args=(2, _free_port(), slow, fast, slow_rank, str(out)))
    ranks = json.loads(out.read_text())
    for r in ranks:  # every rank gathered the same numbers
        assert r["slowest_rank"] == slow_rank, ranks
        assert r["steps"] == 12
        assert r["wait_seconds"] == ranks[0]["wait_seconds"]
    waits = ranks[0]["wait_seconds"]
    assert waits[slow_rank] > waits[1 - slow_rank]
    # The max over ranks of each step's wait is at least the slow rank's own.
    assert ranks[0]["max_wait_seconds"] >= waits[slow_rank]


def test_stage_families_alert_and_panels_are_there(data, tmp_path):
    cache = tmp_path / "c"
    loader = ssdfeed.Loader(data, cache=str(cache), batch_size=16, workers=1,
                            prepare=ssdfeed.Prepare(resize=(16, 16)))
    _epoch(loader)
    import subprocess
    text = subprocess.run(["ssdfeed", "serve-metrics", "--cache", str(cache), "--once"],
                          capture_output=True, text=True, check=True).stdout
    loader.close()
    for s in STAGES:
        assert f'ssdfeed_stage_seconds_total{{entry="' in text
        assert f'stage="{s}"' in text, s
    for name in ("ssdfeed_worker_busy_seconds_total", "ssdfeed_step_seconds_total",
                 "ssdfeed_rank_max_wait_seconds_total"):
        assert f"# TYPE {name} counter" in text, name
        assert name in (REPO / "docs" / "metrics.md").read_text(), name
    assert "ssdfeed_stage_seconds_total{stage}" in (REPO / "docs" / "metrics.md").read_text()
    exprs = [t["expr"] for p in json.loads((REPO / "deploy/grafana/ssdfeed.json").read_text())
             ["panels"] for t in p["targets"]]
    for name in ("ssdfeed_stage_seconds_total", "ssdfeed_rank_max_wait_seconds_total",
                 "ssdfeed_step_seconds_total", "ssdfeed_worker_busy_seconds_total"):
        assert any(name in e for e in exprs), f"no dashboard panel shows {name}"
    assert "alert: SsdfeedInputStallHigh" in (REPO / "deploy/prometheus/alerts.yml").read_text()
