"""The public Python API names one thing one way: a boxes field not named
"boxes" works in every adapter (its count field is derived in one place),
the exceptions are exported at top level, ssdfeed.cache / ssdfeed.warm are
the functions and moved names keep their old spelling with a warning."""
import io
import warnings

import numpy as np
import pytest

import ssdfeed

H = W = 32


def _jpeg(i):
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(np.full((H, W, 3), 20 * i, np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def od_bbox(tmp_path_factory):
    """A TF Object Detection tfrecord read with its boxes field named
    "bbox" and classes "cls": i % 3 boxes in sample i."""
    tf = pytest.importorskip("tensorflow")
    path = str(tmp_path_factory.mktemp("od") / "od.tfrecord")

    def feature(kind, values):
        if kind == "bytes":
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        if kind == "float":
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    counts = []
    with tf.io.TFRecordWriter(path) as w:
        for i in range(6):
            k = i % 3
            b = np.tile(np.array([[0.1, 0.2, 0.5, 0.6]], np.float32), (k, 1))
            f = {"image/encoded": feature("bytes", [_jpeg(i)]),
                 "image/object/bbox/xmin": feature("float", b[:, 0].tolist()),
                 "image/object/bbox/ymin": feature("float", b[:, 1].tolist()),
                 "image/object/bbox/xmax": feature("float", b[:, 2].tolist()),
                 "image/object/bbox/ymax": feature("float", b[:, 3].tolist()),
                 "image/object/class/label": feature("int64", list(range(1, k + 1)))}
            w.write(tf.train.Example(features=tf.train.Features(feature=f))
                    .SerializeToString())
            counts.append(k)
    fields = {"image": "image/encoded", "bbox": ("boxes", "image/object/bbox/"),
              "cls": ("classes", "image/object/class/label")}
    return "tfrecord:" + path, fields, counts


def test_box_count_name_is_the_loaders(od_bbox):
    uri, fields, counts = od_bbox
    with ssdfeed.Loader(uri, fields=fields, cache=False, batch_size=6) as loader:
        batch = next(iter(loader))
    assert list(batch["num_bbox"]) == counts and "num_boxes" not in batch


def test_tf_cuts_a_boxes_field_not_named_boxes(od_bbox):
    tf = pytest.importorskip("tensorflow")
    import ssdfeed.tf
    uri, fields, counts = od_bbox
    ds = ssdfeed.tf.dataset(uri, fields=fields, cache=False, batch_size=6)
    b = next(iter(ds))
    assert isinstance(b["bbox"], tf.RaggedTensor) and isinstance(b["cls"], tf.RaggedTensor)
    assert list(b["bbox"].row_lengths().numpy()) == counts
    assert list(b["cls"].row_lengths().numpy()) == counts


def test_ray_cuts_a_boxes_field_not_named_boxes(od_bbox):
    pytest.importorskip("ray")
    from ssdfeed import ray as sray
    uri, fields, counts = od_bbox
    with ssdfeed.Loader(uri, fields=fields, cache=False, batch_size=6) as loader:
        rows = sray._rows(next(iter(loader)), loader.fields)
    assert [len(r) for r in rows["bbox"]] == counts
    assert [len(r) for r in rows["cls"]] == counts
