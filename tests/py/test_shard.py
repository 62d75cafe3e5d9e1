"""Loader(shard=...) and Loader(ids=...) from Python."""

import pytest

import ssdfeed


@pytest.fixture()
def src(small_datasets):
    return small_datasets["tfrecord"]["uri"]


PREP = ssdfeed.Prepare(resize=(16, 16))


def test_sticky_rank_reads_the_same_samples_every_epoch_in_a_new_order(src, tmp_path):
    kw = dict(cache=str(tmp_path / "c"), prepare=PREP, batch_size=4, shuffle=True, seed=1,
              world_size=2, workers=1, shard="sticky")
    with ssdfeed.Loader(src, rank=0, **kw) as r0, ssdfeed.Loader(src, rank=1, **kw) as r1:
        e0 = [b.tobytes() for imgs, _ in r0 for b in imgs]
        r0.set_epoch(1)
        e1 = [b.tobytes() for imgs, _ in r0 for b in imgs]
        assert sorted(e0) == sorted(e1) and e0 != e1
        assert r0.stats()["cache_misses"] == 24 and r0.stats()["cache_hits"] == 24
        other = {b.tobytes() for imgs, _ in r1 for b in imgs}
        assert not other & set(e0), "sticky shards of two ranks overlap"
        assert len(other | set(e0)) == 48


def test_global_shards_change_every_epoch(src):
    kw = dict(cache=False, prepare=PREP, batch_size=4, shuffle=True, seed=1, world_size=2,
              workers=1)
    with ssdfeed.Loader(src, rank=0, **kw) as r0:
        e0 = {b.tobytes() for imgs, _ in r0 for b in imgs}
        r0.set_epoch(1)
        e1 = {b.tobytes() for imgs, _ in r0 for b in imgs}
    assert e0 != e1


def test_rotate_moves_the_shard_to_the_next_rank(src):
    kw = dict(cache=False, prepare=PREP, batch_size=4, shuffle=True, seed=1, world_size=2,
              workers=1)

    def shard_set(rank, epoch, **extra):
        with ssdfeed.Loader(src, rank=rank, **kw, **extra) as l:
            l.set_epoch(epoch)
            return {b.tobytes() for imgs, _ in l for b in imgs}

    assert shard_set(0, 2, shard="rotate", rotate_every=2) == shard_set(1, 0, shard="sticky")
    assert shard_set(0, 1, shard="rotate", rotate_every=2) == shard_set(0, 0, shard="sticky")


def test_ids_reads_one_range(src, tmp_path):
    with ssdfeed.Loader(src, cache=False, prepare=PREP, ids=range(10, 17), batch_size=3,
                        workers=1) as l:
        assert l.num_samples == 7
        labels = [int(x) for _, lab in l for x in lab]
    with ssdfeed.Loader(src, cache=False, prepare=PREP, batch_size=48, workers=1) as full:
        everything = [int(x) for _, lab in full for x in lab]
    assert labels == everything[10:17]


@pytest.mark.parametrize("kw, msg", [
    (dict(shard="random"), "shard must be"),
    (dict(shard="rotate", rotate_every=0), "rotate_every"),
    (dict(ids=range(5, 2)), "ids must be"),
    (dict(ids=range(0, 10, 2)), "ids must be"),
    (dict(ids=[1, 2]), "ids must be"),
    (dict(ids=range(40, 60)), "not within the 48 samples"),
])
def test_bad_shard_arguments_are_clear_errors(src, kw, msg):
    with pytest.raises(ValueError, match=msg):
        ssdfeed.Loader(src, cache=False, **kw)


def test_state_dict_records_the_shard_mode(src):
    kw = dict(cache=False, prepare=PREP, world_size=2, workers=1)
    with ssdfeed.Loader(src, shard="rotate", rotate_every=3, **kw) as l:
        state = l.state_dict()
    assert state["shard"] == "rotate" and state["rotate_every"] == 3
    with ssdfeed.Loader(src, shard="sticky", **kw) as other:
        with pytest.raises(ValueError, match="shard and rotate_every"):
            other.load_state_dict(state)
    legacy = {k: v for k, v in state.items() if k not in ("shard", "rotate_every")}
    with ssdfeed.Loader(src, **kw) as plain:
        plain.load_state_dict(legacy)  # saved before shard modes: global
