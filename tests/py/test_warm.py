"""ssdfeed.warm(): the library warm-up `ssdfeed warm` also runs."""

import json
import os

import pytest

import ssdfeed


def test_warm_fills_the_entry_a_loader_then_reads_warm(small_datasets, tmp_path):
    src, cache = small_datasets["folder"]["uri"], str(tmp_path / "cache")
    prep = ssdfeed.Prepare(resize=(32, 32))
    r = ssdfeed.warm(src, cache=cache, prepare=prep, workers=2)
    assert r.complete and not r.cache_full
    assert (r.samples_total, r.samples_present, r.prepared) == (48, 48, 48)
    assert r.bytes_prepared == 48 * 32 * 32 * 3
    assert os.path.isdir(r.dir)

    loader = ssdfeed.Loader(src, cache=cache, prepare=prep, batch_size=16)
    assert sum(len(labels) for _, labels in loader) == 48
    stats = loader.stats()
    assert stats["prepared"] == 0 and stats["cache_hits"] == 48


def test_warm_skips_bad_samples_and_lists_them(tmp_path):
    src = ssdfeed.make_dataset(str(tmp_path / "d"), count=24, classes=2, corrupt=0.25,
                               min_side=16, max_side=24)["uri"]
    r = ssdfeed.warm(src, cache=str(tmp_path / "c"), on_error="skip")
    assert r.skipped and r.complete
    assert r.samples_present + len(r.skipped) == 24
    with open(os.path.join(r.dir, "skipped.json")) as f:
        listed = json.load(f)["skipped"]
    assert [s["id"] for s in listed] == [s.id for s in r.skipped]


def test_warm_raises_on_a_bad_sample_naming_it(tmp_path):
    src = ssdfeed.make_dataset(str(tmp_path / "d"), count=24, classes=2, corrupt=0.25,
                               min_side=16, max_side=24)["uri"]
    with pytest.raises(ValueError, match=str(tmp_path / "d")):
        ssdfeed.warm(src, cache=str(tmp_path / "c"))


def test_warm_needs_a_cache(small_datasets):
    with pytest.raises(ValueError, match="warm needs a cache"):
        ssdfeed.warm(small_datasets["folder"]["uri"], cache=False)
