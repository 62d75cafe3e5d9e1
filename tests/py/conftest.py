import pytest

import ssdfeed


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
