"""Prepare(codec=..., quality=...): record codecs from Python."""

import glob
import os

import numpy as np
import pytest

import ssdfeed


def _epoch(src, cache, prepare, workers):
    loader = ssdfeed.Loader(src, cache=cache, prepare=prepare, batch_size=8, shuffle=True,
                            seed=5, workers=workers)
    loader.set_epoch(2)
    return [(im.copy(), lab.copy()) for im, lab in loader], loader.stats()


def _psnr(a, b):
    se = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if se == 0 else 10 * np.log10(255.0 ** 2 / se)


@pytest.mark.parametrize("codec", ["zstd", "jpeg", "yuv420"])
def test_codec_entries_serve_the_same_batches_cold_warm_and_by_workers(small_datasets, tmp_path,
                                                                      codec):
    src = small_datasets["folder"]["uri"]
    raw, _ = _epoch(src, False, ssdfeed.Prepare(resize=(40, 40)), 2)
    prep = ssdfeed.Prepare(resize=(40, 40), codec=codec, quality=85)
    cold, s_cold = _epoch(src, str(tmp_path / "c"), prep, 1)
    warm, s_warm = _epoch(src, str(tmp_path / "c"), prep, 4)
    assert s_cold["cache_misses"] == 48 and s_warm["cache_hits"] == 48
    for (a, la), (b, lb), (r, lr) in zip(cold, warm, raw):
        assert np.array_equal(a, b) and np.array_equal(la, lb) and np.array_equal(la, lr)
        if codec == "zstd":
            assert np.array_equal(a, r), "zstd is lossless"
        else:
            assert _psnr(a, r) > 22  # tiny 40-px images of saturated colours


def _first_jpg(uri):
    root = uri.split(":", 1)[1]
    return sorted(glob.glob(os.path.join(root, "*", "*.jpg")))[0]


def test_codec_is_in_the_key_and_raw_keeps_its_text():
    raw = ssdfeed.Prepare(resize_short=256)
    assert ssdfeed.Prepare(resize_short=256, codec="raw", quality=50).canonical() == \
        raw.canonical()
    assert "codec" not in raw.canonical()
    assert ssdfeed.Prepare(resize_short=256, codec="zstd").canonical().endswith(
        ";codec=zstd-up-l1")
    assert ssdfeed.Prepare(resize_short=256, codec="jpeg", quality=75).canonical().endswith(
        ";codec=jpeg-q75-420")
    assert ssdfeed.Prepare(resize_short=256, codec="yuv420").canonical().endswith(
        ";codec=yuv420-bt601f-box2")


def test_apply_of_jpeg_is_the_decode_of_the_reencoded_image(small_datasets):
    with open(_first_jpg(small_datasets["folder"]["uri"]), "rb") as f:
        data = f.read()
    raw = ssdfeed.Prepare(resize=(48, 48)).apply(data)
    assert np.array_equal(ssdfeed.Prepare(resize=(48, 48), codec="zstd").apply(data), raw)
    lossy = ssdfeed.Prepare(resize=(48, 48), codec="jpeg", quality=90).apply(data)
    assert lossy.shape == raw.shape and not np.array_equal(lossy, raw)
    assert _psnr(lossy, raw) > 22
    yuv = ssdfeed.Prepare(resize=(48, 48), codec="yuv420").apply(data)
    assert yuv.shape == raw.shape and not np.array_equal(yuv, raw)
    assert _psnr(yuv, raw) > 22  # tiny 48-px images of saturated colours
    luma = np.array([0.299, 0.587, 0.114])
    # Luma is kept but where a saturated colour clamps on decode.
    assert np.abs((yuv - raw.astype(float)) @ luma).mean() < 1, "only chroma is lost"


@pytest.mark.parametrize("kwargs, words", [
    (dict(codec="lz4"), "codec must be 'raw', 'zstd', 'jpeg' or 'yuv420', not 'lz4'"),
    (dict(codec=None), "codec must be 'raw', 'zstd', 'jpeg' or 'yuv420', not None"),
    (dict(codec="jpeg", quality=0), "quality must be an int from 1 to 100, not 0"),
    (dict(codec="jpeg", quality=101), "quality must be an int from 1 to 100, not 101"),
    (dict(quality=90.0), "quality must be an int from 1 to 100, not 90.0"),
    (dict(quality=True), "quality must be an int from 1 to 100, not True"),
])
def test_bad_codec_or_quality_is_a_value_error_naming_it(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        ssdfeed.Prepare(**kwargs)
