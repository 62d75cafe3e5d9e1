"""Elastic resume: merge_states() of one world's ranks, resumed by a world of
another size, each rank a real process (through the plain, torch and tf
loaders)."""

import collections
import hashlib
import json
import os
import subprocess
import sys

import pytest

import ssdfeed

HERE = os.path.dirname(os.path.abspath(__file__))
N, BATCH, SEED = 50, 3, 5


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = ssdfeed.make_dataset(str(tmp_path_factory.mktemp("elastic") / "d"), format="tfrecord",
                             count=N, classes=N, seed=2, shard_size=20, min_side=32, max_side=48)
    return d["uri"]


def sample_ids(src):
    """sha1 of each sample's served bytes -> its id (all distinct)."""
    with ssdfeed.Loader(src, cache=False, prepare=ssdfeed.Prepare(resize=(8, 8)),
                        batch_size=N, workers=1) as l:
        (images, _), = list(l)
    ids = {hashlib.sha1(x.tobytes()).hexdigest(): i for i, x in enumerate(images)}
    assert len(ids) == N
    return ids


def run_world(src, tmp, tag, world_size, stops, shard, adapter, state=None):
    """Runs every rank of a world at once, each in its own process."""
    procs, outs = [], []
    for rank in range(world_size):
        out = str(tmp / f"{tag}-{rank}.json")
        cfg = dict(src=src, rank=rank, world_size=world_size, stop=stops[rank], shard=shard,
                   adapter=adapter, state=state, out=out, batch_size=BATCH, seed=SEED,
                   on_error="raise")
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "elastic_worker.py"),
                                       json.dumps(cfg)], stderr=subprocess.PIPE, text=True))
        outs.append(out)
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    results = []
    for out in outs:
        with open(out) as f:
            results.append(json.load(f))
    return results


def check_once(ids, old, new, max_repeats):
    """Every sample read over old and new ranks; the new ranks read none the
    old ones read, and repeat only their padding (new world size - 1 at
    most)."""
    read_old = {ids[h] for r in old for h in r["seen"]}
    read_new = collections.Counter(ids[h] for r in new for h in r["seen"])
    assert read_old | set(read_new) == set(range(N)), "a sample was missed"
    assert not read_old & set(read_new), "a new rank read a sample an old one read"
    repeats = sum(read_new.values()) - len(read_new)
    assert repeats <= max_repeats, f"{repeats} repeats (only padding may repeat)"


CASES = [  # old world, where its ranks stop (batches), new world, shard, adapter
    (4, [2, 0, 3, 1], 2, "global", "torch"),
    (2, [1, 6], 3, "global", "tf"),
    (3, [4, 2, 0], 4, "global", "plain"),
    (4, [1, 3, 2, 2], 2, "sticky", "plain"),
    (2, [5, 2], 3, "sticky", "torch"),
    (3, [0, 1, 4], 4, "sticky", "plain"),
    (2, [3, 1], 3, "rotate", "plain"),
]


@pytest.mark.parametrize("old_ws,stops,new_ws,shard,adapter", CASES)
def test_every_sample_once_over_old_and_new_ranks(src, tmp_path, old_ws, stops, new_ws, shard,
                                                   adapter):
    if adapter != "plain":
        pytest.importorskip(adapter if adapter == "torch" else "tensorflow")
    ids = sample_ids(src)
    old = run_world(src, tmp_path, "old", old_ws, stops, shard, adapter)
    assert [len(r["sizes"]) for r in old] == stops, "an old rank stopped elsewhere"
    merged = ssdfeed.merge_states([r["state"] for r in reversed(old)])  # any order
    path = tmp_path / "merged.json"
    path.write_text(json.dumps(merged))
    new = run_world(src, tmp_path, "new", new_ws, [None] * new_ws, shard, adapter, str(path))
    check_once(ids, old, new, new_ws - 1)
    # DDP: every new rank serves the same number of batches, len(loader).
    assert len({len(r["sizes"]) for r in new}) == 1
    assert all(len(r["sizes"]) == r["len"] for r in new)
    # The epoch after the resumed one is the new world's usual epoch 1.
    assert all(r["state"]["epoch"] == 1 and "resumed_from" not in r["state"] for r in new)


def test_a_rank_that_finished_the_epoch_merges_as_done(src, tmp_path):
    ids = sample_ids(src)
    old = run_world(src, tmp_path, "old", 2, [2, None], "global", "plain")
    assert old[1]["state"]["epoch"] == 1, "rank 1 read to the end of epoch 0"
    merged = ssdfeed.merge_states([r["state"] for r in old])
    assert merged["epoch"] == 0
    path = tmp_path / "merged.json"
    path.write_text(json.dumps(merged))
    new = run_world(src, tmp_path, "new", 3, [None] * 3, "global", "plain", str(path))
    check_once(ids, old, new, 2)


def test_resume_again_within_the_resumed_epoch(src, tmp_path):
    ids = sample_ids(src)
    first = run_world(src, tmp_path, "a", 4, [1, 0, 2, 1], "global", "plain")
    path = tmp_path / "m1.json"
    path.write_text(json.dumps(ssdfeed.merge_states([r["state"] for r in first])))
    second = run_world(src, tmp_path, "b", 2, [2, 1], "global", "plain", str(path))
    assert all(r["state"]["resumed_from"] for r in second)
    path2 = tmp_path / "m2.json"
    path2.write_text(json.dumps(ssdfeed.merge_states([r["state"] for r in second])))
    third = run_world(src, tmp_path, "c", 3, [None] * 3, "global", "plain", str(path2))
    check_once(ids, first + second, third, 2)
    check_once(ids, first, second + third, 1 + 2)  # both worlds' padding


def test_merge_states_refuses_a_partial_world(src):
    kw = dict(cache=False, prepare=ssdfeed.Prepare(resize=(8, 8)), batch_size=BATCH,
              world_size=2, workers=1)
    with ssdfeed.Loader(src, rank=0, **kw) as r0:
        with pytest.raises(ValueError, match="pass the state of every rank"):
            ssdfeed.merge_states([r0.state_dict()])
        with pytest.raises(TypeError, match="not the dict"):
            ssdfeed.merge_states([r0.state_dict(), "x"])
    with ssdfeed.Loader(src, rank=0, **kw) as r0, ssdfeed.Loader(src, rank=1, **kw) as r1:
        merged = ssdfeed.merge_states([r0.state_dict(), r1.state_dict()])
        with pytest.raises(ValueError, match="merge the states"):
            r0.load_state_dict(dict(r1.state_dict(), rank=0, world_size=3))
    with ssdfeed.Loader(src, rank=2, **dict(kw, world_size=5)) as other:
        other.load_state_dict(merged)  # a fresh epoch 0 on any world
        assert other.epoch == 0 and len(other) == 4  # 10 samples a rank, batches of 3
