"""ssdfeed.ray.read of sources with fields: one column per field, boxes and
classes per row, bytes as binary."""

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ssdfeed.ray needs ray[data] (pip install 'ray[data]')")
pytest.importorskip("ray.data", reason="ssdfeed.ray needs ray[data]")

import ssdfeed  # noqa: E402
import ssdfeed.ray as sray  # noqa: E402
from test_fields import SEG_FIELDS, make_coco, make_seg_tar  # noqa: E402

# Its own local Ray (ports, /tmp/ray): alone.
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def local_ray():
    # "local": a new instance, never one named by a stale
    # /tmp/ray/ray_current_cluster that a killed run left behind.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=80 << 20)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def _rows(ds) -> list:
    rows = list(ds.iter_rows())
    return sorted(rows, key=lambda r: int(r["id"]))


def test_detection_rows_hold_their_own_boxes(local_ray, tmp_path):
    expected = make_coco(tmp_path, 10)
    uri = f"coco:{tmp_path}/images?annotations={tmp_path}/ann.json"
    ds = sray.read(uri, cache=str(tmp_path / "cache"), prepare=ssdfeed.Prepare(resize=(40, 56)),
                   samples_per_task=4, batch_size=3, locality=False)
    rows = _rows(ds)
    assert [int(r["id"]) for r in rows] == list(range(10))
    for r, (boxes, classes) in zip(rows, expected):
        assert int(r["num_boxes"]) == len(classes)
        assert np.array_equal(np.asarray(r["boxes"]).reshape(-1, 4), boxes)
        assert np.array_equal(np.asarray(r["classes"]), classes)


def test_segmentation_rows(local_ray, tmp_path):
    samples = make_seg_tar(tmp_path / "a.tar", 8)
    ds = sray.read(f"tar:{tmp_path}/a.tar", fields=SEG_FIELDS, cache=False,
                   prepare=ssdfeed.Prepare(resize=(40, 56)), samples_per_task=4, batch_size=4,
                   locality=False)
    rows = _rows(ds)
    assert len(rows) == 8
    for r, s in zip(rows, samples):
        assert np.array_equal(r["mask"], s["mask"])
        assert np.array_equal(r["depth"], s["depth"])
        assert bytes(r["meta"]) == s["meta"]
        assert int(r["label"]) == s["label"]
