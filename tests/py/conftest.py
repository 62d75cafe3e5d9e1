import os

import pytest

import ssdfeed


@pytest.fixture(autouse=True, scope="session")
def _cache_root_per_session(tmp_path_factory):
    """Loader(cache=True) is the default: keep test caches out of ~/.cache."""
    root = str(tmp_path_factory.mktemp("default-cache"))
    old = os.environ.get("SSDFEED_CACHE")
    os.environ["SSDFEED_CACHE"] = root
    yield root
    if old is None:
        os.environ.pop("SSDFEED_CACHE", None)
    else:
        os.environ["SSDFEED_CACHE"] = old


@pytest.fixture(scope="session")
def small_datasets(tmp_path_factory):
    """One small generated dataset per format (same seed: same samples)."""
    root = tmp_path_factory.mktemp("datasets")
    out = {}
    for fmt in ("folder", "tfrecord", "tar"):
        out[fmt] = ssdfeed.make_dataset(
            str(root / fmt), format=fmt, count=48, classes=4, seed=3, shard_size=20,
            min_side=64, max_side=128,
        )
    return out


def pytest_collection_modifyitems(config, items):
    """torchrun tests start two ranks each: heavy, and their rendezvous and
    process group ports are picked free then bound, which another test on a
    parallel worker can race. They run in the serial pass."""
    for item in items:
        if item.get_closest_marker("torchrun"):
            item.add_marker(pytest.mark.serial)
