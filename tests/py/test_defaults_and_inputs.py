"""One set of defaults (cache root, prepare spec) and strict inputs, as a
new user meets them: the Python API and the CLI agree, and bad values are
ValueErrors / exit 2 naming the argument."""

import json
import os
import subprocess

import numpy as np
import pytest

import ssdfeed
from ssdfeed import _ssdfeed


def run(*args, env=None):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True, env=env)


def test_default_cache_is_the_cli_root_and_false_turns_it_off(small_datasets, tmp_path,
                                                              monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setenv("SSDFEED_CACHE", str(root))
    assert ssdfeed.default_cache_dir() == str(root)
    uri = small_datasets["folder"]["uri"]
    prep = ssdfeed.Prepare(resize_short=32, center_crop=32)
    loader = ssdfeed.Loader(uri, prepare=prep, batch_size=16)
    list(loader)
    assert loader.stats()["cache_dir"].startswith(str(root))
    # The CLI sees the same entry: warm with the same spec prepares nothing.
    r = run("warm", "--source", uri, "--resize-short", "32", "--center-crop", "32x32",
            "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prepared"] == 0
    for off in (False, None):
        assert ssdfeed.Loader(uri, cache=off, prepare=prep).stats()["cache_dir"] == ""
    monkeypatch.delenv("SSDFEED_CACHE")
    assert ssdfeed.default_cache_dir() == os.path.expanduser("~/.cache/ssdfeed")


def test_every_tool_has_the_same_default_spec(small_datasets, tmp_path):
    assert ssdfeed.Prepare().canonical() == _ssdfeed.default_prepare_canonical()
    assert ssdfeed.Prepare().describe() == "full-size rgb"
    uri, cache = small_datasets["tar"]["uri"], str(tmp_path / "c")
    r = run("warm", "--source", uri, "--cache", cache, "--json")
    assert r.returncode == 0, r.stderr
    # It says what it is about to store, and how to store less.
    assert "preparing full-size rgb pixels: ~" in r.stderr and "for 48 samples" in r.stderr
    assert "--resize-short 256" in r.stderr
    # bench loader without prepare flags reads the same entry: all hits.
    r = run("bench", "loader", "--source", uri, "--cache", cache, "--epochs", "1", "--crop",
            "24", "--batch", "8", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["epochs"][0]["hit_rate"] == 1.0
    # Python's default spec keys that entry too.
    loader = ssdfeed.Loader(uri, cache=cache, augment=ssdfeed.RandomResizedCrop(24), batch_size=8)
    list(loader)
    assert loader.stats()["cache_misses"] == 0
    ls = json.loads(run("cache", "ls", "--json", "--cache", cache).stdout)
    assert len(ls) == 1 and ls[0]["spec_summary"] == "full-size rgb"
    text = run("cache", "ls", "--cache", cache).stdout
    assert "SPEC" in text and "full-size rgb" in text


@pytest.mark.parametrize("kwargs, words", [
    (dict(batch_size=2.5), "batch_size must be an int >= 1"),
    (dict(batch_size=-1), "batch_size must be an int >= 1"),
    (dict(batch_size=0), "batch_size must be an int >= 1"),
    (dict(workers=-1), "workers must be an int >= 0"),
    (dict(workers=1.5), "workers must be an int >= 0"),
    (dict(prefetch=0), "prefetch must be an int >= 1"),
    (dict(seed=-3), "seed must be an int >= 0"),
    (dict(rank=2, world_size=2), "rank must be in [0, world_size=2)"),
    (dict(world_size=0), "world_size must be an int >= 1"),
    (dict(mean=(0.5, 0.5, 0.5)), "mean applies only to float output"),
    (dict(std=(0.2, 0.2, 0.2)), "std applies only to float output"),
    (dict(dtype="float32", std=(1, 0, 1)), "std values must be non-zero"),
    (dict(dtype="float32", mean=(1, 2)), "mean needs 1 or 3 values"),
    (dict(dtype="int8"), "dtype must be"),
    (dict(layout="HWC"), "layout must be"),
    (dict(on_error="ignore"), "on_error must be"),
    (dict(cache=""), "cache must be True"),
    (dict(cache=3), "cache must be True"),
    (dict(cache_capacity=0), "cache_capacity must be an int >= 1"),
    (dict(warm_read="mmap"), "warm_read must be 'auto', 'buffered' or 'direct'"),
    (dict(fill_write="async"), "fill_write must be 'auto', 'buffered' or 'direct'"),
])
def test_bad_loader_arguments_are_value_errors_naming_them(small_datasets, kwargs, words):
    with pytest.raises(ValueError) as e:
        ssdfeed.Loader(small_datasets["folder"]["uri"], **{"cache": False, **kwargs})
    assert words in str(e.value)


@pytest.mark.parametrize("make, words", [
    (lambda: ssdfeed.Prepare(resize_short=0), "resize_short must be an int >= 1 or None"),
    (lambda: ssdfeed.Prepare(resize_short=-5), "resize_short must be an int >= 1 or None"),
    (lambda: ssdfeed.Prepare(resize_short=2.5), "resize_short must be an int >= 1 or None"),
    (lambda: ssdfeed.Prepare(resize=(0, 10)), "resize must be an int >= 1 or a pair"),
    (lambda: ssdfeed.Prepare(center_crop=0), "center_crop must be an int >= 1 or a pair"),
    (lambda: ssdfeed.Prepare(max_long=0), "max_long must be an int >= 1 or None"),
    (lambda: ssdfeed.Prepare(color="bgr"), "color must be 'rgb' or 'gray'"),
    (lambda: ssdfeed.RandomResizedCrop(0), "RandomResizedCrop size must be an int >= 1"),
    (lambda: ssdfeed.RandomResizedCrop(24, scale=(0.5, 0.2)), "scale needs min <= max"),
    (lambda: ssdfeed.RandomResizedCrop(24, scale=(0, 1)), "scale values must be numbers"),
])
def test_bad_prepare_and_augment_are_value_errors(make, words):
    with pytest.raises(ValueError) as e:
        make()
    assert words in str(e.value)


def test_a_bare_directory_is_a_folder_source(small_datasets):
    folder = small_datasets["folder"]["uri"][len("folder:"):]
    prep = ssdfeed.Prepare(resize_short=32, center_crop=32)
    a = [l.tolist() for _, l in ssdfeed.Loader(folder, cache=False, prepare=prep, batch_size=48)]
    b = [l.tolist() for _, l in ssdfeed.Loader("folder:" + folder, cache=False, prepare=prep,
                                                batch_size=48)]
    assert a == b and len(a[0]) == 48


def labels_of_pass(loader):
    return [labels.tolist() for _, labels in loader]


def test_each_pass_without_set_epoch_reshuffles(small_datasets):
    kw = dict(cache=False, prepare=ssdfeed.Prepare(resize_short=32, center_crop=32),
              batch_size=48, shuffle=True, seed=7)
    uri = small_datasets["tfrecord"]["uri"]
    loader = ssdfeed.Loader(uri, **kw)
    p0, p1 = labels_of_pass(loader), labels_of_pass(loader)
    assert p0 != p1, "a second pass must reshuffle"
    ref = ssdfeed.Loader(uri, **kw)
    ref.set_epoch(1)
    assert labels_of_pass(ref) == p1, "pass 2 is epoch 1, deterministically"
    # set_epoch before a pass wins; a pass left early still counts as one.
    loader.set_epoch(0)
    assert labels_of_pass(loader) == p0
    small = dict(kw, batch_size=4)
    loader = ssdfeed.Loader(uri, **small)
    next(iter(loader))
    assert loader.epoch == 0
    ref = ssdfeed.Loader(uri, **small)
    ref.set_epoch(1)
    assert labels_of_pass(loader) == labels_of_pass(ref), "a pass left early counts as one"


def test_skipped_samples_are_replaced_by_the_next_good_ones(tmp_path):
    rep = ssdfeed.make_dataset(str(tmp_path / "d"), format="tar", count=40, classes=40,
                               corrupt=0.2, min_side=40, max_side=60, shard_size=40)
    assert rep["corrupt"] > 0
    out = {}
    for workers in (1, 3):
        for bs in (1, 6):
            loader = ssdfeed.Loader(rep["uri"], cache=False, batch_size=bs, workers=workers,
                                    prepare=ssdfeed.Prepare(resize=(32, 32)), shuffle=True,
                                    seed=2, on_error="skip")
            batches = [(images.copy(), labels.tolist()) for images, labels in loader]
            sizes = [len(l) for _, l in batches]
            # Replaced in place: the epoch keeps its batches (DDP ranks stay in step).
            assert all(s == bs for s in sizes[:-1]) and len(sizes) == len(loader), sizes
            assert sum(sizes) == 40
            assert loader.stats()["skipped"] == rep["corrupt"]
            out[(workers, bs)] = batches
    for bs in (1, 6):
        one, three = out[(1, bs)], out[(3, bs)]
        assert [l for _, l in one] == [l for _, l in three]
        assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(one, three))
