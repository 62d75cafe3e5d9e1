"""TFRecords written by TensorFlow in the object detection API's and
DeepLab's schemas read back through the tfrecord: source with their boxes
(normalised xyxy), classes and mask, checked through `ssdfeed inspect`."""
import json
import subprocess

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")


def inspect(uri, *args):
    r = subprocess.run(["ssdfeed", "inspect", "--source", uri, "--samples", "-1", "--json", *args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def feature(kind, values):
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def od_example(i, boxes, labels):
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    f = {
        "image/encoded": feature("bytes", [b"JPEG%d" % i]),
        "image/format": feature("bytes", [b"jpeg"]),
        "image/object/bbox/xmin": feature("float", b[:, 0].tolist()),
        "image/object/bbox/ymin": feature("float", b[:, 1].tolist()),
        "image/object/bbox/xmax": feature("float", b[:, 2].tolist()),
        "image/object/bbox/ymax": feature("float", b[:, 3].tolist()),
        "image/object/class/label": feature("int64", labels),
        "image/segmentation/class/encoded": feature("bytes", [b"PNG%d" % i]),
    }
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def test_object_detection_and_deeplab_records_written_by_tensorflow(tmp_path):
    rng = np.random.default_rng(0)
    want = []
    path = str(tmp_path / "od.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(6):
            k = i % 3  # 0, 1 and 2 objects
            boxes = rng.random((k, 4), dtype=np.float32)
            labels = [int(v) for v in rng.integers(1, 90, k)]
            w.write(od_example(i, boxes, labels))
            want.append((boxes, labels))
    got = inspect("tfrecord:" + path)
    assert [f["name"] for f in got["fields"]] == ["image", "boxes", "classes", "mask"]
    for i, (sample, (boxes, labels)) in enumerate(zip(got["samples"], want)):
        f = sample["fields"]
        assert f["boxes"]["normalized"] is True
        np.testing.assert_array_equal(
            np.array(f["boxes"]["boxes"], dtype=np.float32).reshape(-1, 4), boxes)
        assert f["classes"]["values"] == labels
        assert f["mask"]["kind"] == "mask" and f["mask"]["bytes"] == len(b"PNG%d" % i)
        assert sample["image_bytes"] == len(b"JPEG%d" % i)


def test_classic_records_written_by_tensorflow_stay_classic(tmp_path):
    path = str(tmp_path / "c.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        f = {"image/encoded": feature("bytes", [b"JPEG"]),
             "image/class/label": feature("int64", [4])}
        w.write(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())
    got = inspect("tfrecord:" + path)
    assert [f["name"] for f in got["fields"]] == ["image", "label"]
    assert got["samples"][0]["label"] == 4
