"""Real libraries from PyPI on both sides of ssdfeed's readers."""

import glob
import io
import os

import numpy as np
import pytest
from PIL import Image

import ssdfeed


def test_tensorflow_reads_our_tfrecords(small_datasets):
    tf = pytest.importorskip("tensorflow")
    uri = small_datasets["tfrecord"]["uri"]
    files = sorted(glob.glob(uri.split(":", 1)[1]))
    src = ssdfeed.Source(uri)
    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }
    ds = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, spec))
    n = 0
    for i, ex in enumerate(ds):
        data, label = src.read(i)
        assert ex["image/encoded"].numpy() == data
        assert int(ex["image/class/label"]) == label
        n += 1
    assert n == len(src) == 48


def test_we_read_tfrecords_written_by_tensorflow(tmp_path):
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(0)
    images = []
    path = str(tmp_path / "tf-written.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for k in range(5):
            arr = rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)
            buf = io.BytesIO()
            Image.fromarray(arr).save(buf, format="PNG")
            images.append((buf.getvalue(), arr))
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[buf.getvalue()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[10 + k])),
            }))
            w.write(ex.SerializeToString())
    src = ssdfeed.Source("tfrecord:" + path)
    assert len(src) == 5
    for k in range(5):
        data, label = src.read(k)
        assert data == images[k][0]
        assert label == 10 + k
        np.testing.assert_array_equal(ssdfeed.Prepare().apply(data), images[k][1])
    # Custom keys that are absent: a clear error naming the record.
    src2 = ssdfeed.Source("tfrecord:" + path, image_key="img/bytes")
    with pytest.raises(ssdfeed.CorruptionError, match=r"tf-written.tfrecord record 0.*img/bytes"):
        src2.read(0)


def test_webdataset_reads_our_tars(small_datasets):
    wds = pytest.importorskip("webdataset")
    uri = small_datasets["tar"]["uri"]
    src = ssdfeed.Source(uri)
    files = sorted(glob.glob(os.path.join(os.path.dirname(uri.split(":", 1)[1]), "*.tar")))
    ds = wds.WebDataset(files, shardshuffle=False, empty_check=False)
    n = 0
    for i, sample in enumerate(ds):
        data, label = src.read(i)
        assert sample["jpg"] == data
        assert int(sample["cls"]) == label
        n += 1
    assert n == len(src) == 48


def test_same_samples_in_every_format(small_datasets):
    tfr = ssdfeed.Source(small_datasets["tfrecord"]["uri"])
    tar = ssdfeed.Source(small_datasets["tar"]["uri"])
    for i in range(len(tfr)):
        assert tfr.read(i) == tar.read(i)


def test_pixels_match_pillow_full_decode(small_datasets):
    src = ssdfeed.Source(small_datasets["folder"]["uri"])
    for i in range(0, len(src), 7):
        data, _ = src.read(i)
        ours = ssdfeed.Prepare().apply(data).astype(int)
        theirs = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)
        assert ours.shape == theirs.shape
        assert np.abs(ours - theirs).max() <= 2, src.describe(i)


def test_resize_is_an_exact_area_filter_like_pillow_reduce(small_datasets):
    # Pillow's reduce(2) is an exact 2x2 box average; our antialiasing
    # (OpenCV INTER_AREA) must agree on lossless input. (Pillow's BOX filter
    # at fractional scales uses a narrower window, so it is not a reference.)
    src = ssdfeed.Source(small_datasets["folder"]["uri"])
    for i in range(0, len(src), 5):
        data, _ = src.read(i)
        im = Image.open(io.BytesIO(data)).convert("RGB")
        w, h = im.size[0] // 2 * 2, im.size[1] // 2 * 2
        im = im.crop((0, 0, w, h))
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        ours = ssdfeed.Prepare(resize=(h // 2, w // 2)).apply(buf.getvalue()).astype(int)
        theirs = np.asarray(im.reduce(2)).astype(int)
        assert np.abs(ours - theirs).max() <= 1
        # From the JPEG itself the decoder scales in the DCT domain: close to
        # the full decode + box average, not equal.
        jpg = io.BytesIO()
        im.save(jpg, format="JPEG", quality=95)
        ours_jpg = ssdfeed.Prepare(resize=(h // 2, w // 2)).apply(jpg.getvalue()).astype(int)
        ref = np.asarray(Image.open(io.BytesIO(jpg.getvalue())).convert("RGB").reduce(2)).astype(int)
        assert np.abs(ours_jpg - ref).mean() < 4.0


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P", "I;16"])
def test_png_modes_match_pillow(tmp_path, mode):
    rng = np.random.default_rng(1)
    arr = rng.integers(0, 255, (33, 47, 3), dtype=np.uint8)
    im = Image.fromarray(arr).convert(mode if mode != "I;16" else "L")
    if mode == "I;16":
        im = Image.fromarray(np.asarray(im).astype(np.uint16) * 257)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    ours = ssdfeed.Prepare().apply(buf.getvalue())
    # libspng scales 16-bit samples to 8 bits by taking the high byte.
    ref = im if mode != "I;16" else Image.fromarray((np.asarray(im) >> 8).astype(np.uint8))
    theirs = np.asarray(ref.convert("RGB"))
    assert ours.shape == theirs.shape
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


def test_progressive_cmyk_and_gray_jpegs(tmp_path):
    rng = np.random.default_rng(2)
    arr = (rng.integers(0, 255, (40, 60, 3), dtype=np.uint8) // 4 + 100).astype(np.uint8)
    base = Image.fromarray(arr)
    buf = io.BytesIO()
    base.save(buf, format="JPEG", progressive=True, quality=92)
    np.testing.assert_allclose(ssdfeed.Prepare().apply(buf.getvalue()).astype(int),
                               np.asarray(Image.open(io.BytesIO(buf.getvalue()))).astype(int),
                               atol=2)
    buf = io.BytesIO()
    base.convert("CMYK").save(buf, format="JPEG", quality=95)
    ours = ssdfeed.Prepare().apply(buf.getvalue()).astype(int)
    theirs = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")).astype(int)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).mean() < 6
    buf = io.BytesIO()
    base.convert("L").save(buf, format="JPEG", quality=92)
    g = ssdfeed.Prepare(color="gray").apply(buf.getvalue())
    assert g.shape == (40, 60, 1)
    rgb = ssdfeed.Prepare().apply(buf.getvalue())
    assert rgb.shape == (40, 60, 3)
    assert (rgb[..., 0] == rgb[..., 2]).all()


def _png_chunk(kind, data):
    import struct
    import zlib
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def test_png_bomb_is_refused(tmp_path):
    import struct
    import zlib
    # 50000 x 50000 RGB: 7.5 GB decoded, a few KB on disk.
    ihdr = struct.pack(">IIBBBBB", 50000, 50000, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * (1 << 20), 9)
    png = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + \
        _png_chunk(b"IEND", b"")
    assert len(png) < 10_000
    with pytest.raises(ValueError, match="exceeds the decode limit"):
        ssdfeed.Prepare().apply(png)


def test_bad_bytes_raise_corruption():
    with pytest.raises(ssdfeed.CorruptionError, match="empty file"):
        ssdfeed.Prepare().apply(b"")
    with pytest.raises(ssdfeed.CorruptionError, match="not a JPEG or PNG"):
        ssdfeed.Prepare().apply(b"GIF89a....")


def test_prepare_spec_validation():
    with pytest.raises(ValueError):
        ssdfeed.Prepare(resize_short=10, resize=(5, 5))
    assert ssdfeed.Prepare(resize_short=256).canonical() != ssdfeed.Prepare(resize_short=224).canonical()
    assert ssdfeed.Prepare(resize_short=256).canonical() == ssdfeed.Prepare(resize_short=256).canonical()


def test_importing_tensorflow_first_then_ssdfeed_works(small_datasets):
    """TensorFlow exports its protobuf with RTLD_GLOBAL; ssdfeed must not
    bind to it (this crashed when ssdfeed linked libprotobuf)."""
    pytest.importorskip("tensorflow")
    import subprocess
    import sys
    code = ("import tensorflow, ssdfeed, sys; s = ssdfeed.Source(sys.argv[1]); "
            "print(len(s), s.read(3)[1])")
    r = subprocess.run([sys.executable, "-c", code, small_datasets["tfrecord"]["uri"]],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    src = ssdfeed.Source(small_datasets["tfrecord"]["uri"])
    assert r.stdout.split() == ["48", str(src.read(3)[1])]
