"""Sample fields end to end, as a user meets them: the generated scenes of
`make_dataset` in the VOC, COCO and WebDataset layouts, served through
RandomResizedCrop and flip from a cache filled once.

Served masks agree with their images' pixels away from class edges, box
centres lie on their class's colour, arrays come back bit-exact, each
sample is prepared once, and a mask of the wrong size is refused naming
both files. No palette is assumed: each class's colour is read off the
served pixels themselves.
"""
import io
import tarfile

import numpy as np
import pytest

import ssdfeed

CROP = dict(size=96, scale=(0.25, 1.0), flip=True)


def _scenes(tmp_path, fmt, count=24):
    made = ssdfeed.make_dataset(str(tmp_path / fmt), format=fmt, count=count, classes=6,
                                min_side=120, max_side=200, seed=3)
    return made["uri"]


def _loader(uri, tmp_path, **kw):
    args = dict(cache=str(tmp_path / "cache"), prepare=ssdfeed.Prepare(resize_short=112),
                augment=ssdfeed.RandomResizedCrop(**CROP), batch_size=8, shuffle=True, seed=1,
                workers=2)
    args.update(kw)
    return ssdfeed.Loader(uri, **args)


def _interior(mask):
    """Pixels whose 3x3 neighbourhood holds one class: off the class edges,
    where a resized image blends two colours."""
    m = mask.astype(np.int64)
    pad = np.pad(m, 1, mode="edge")
    same = np.ones_like(m, bool)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            same &= pad[dy:dy + m.shape[0], dx:dx + m.shape[1]] == m
    return same


def _class_colours(pixels, classes):
    """The median colour of each class's pixels."""
    return {int(c): np.median(pixels[classes == c], axis=0) for c in np.unique(classes)}


def _agreement(pixels, classes, colours):
    """The fraction of pixels whose nearest class colour is their own class's."""
    ids = np.array(sorted(colours))
    table = np.stack([colours[c] for c in ids]).astype(np.float64)
    dist = np.linalg.norm(pixels[:, None, :].astype(np.float64) - table[None], axis=-1)
    return float(np.mean(ids[dist.argmin(1)] == classes))


@pytest.mark.parametrize("fmt", ["voc", "wds-seg"])
def test_served_masks_agree_with_their_images(tmp_path, fmt):
    loader = _loader(_scenes(tmp_path, fmt), tmp_path)
    pix, cls = [], []
    for epoch in range(2):  # the fill, then the cache
        loader.set_epoch(epoch)
        for b in loader:
            assert isinstance(b, dict), "a source with masks yields dict batches"
            assert b["mask"].shape == b["image"].shape[:3]
            inner = np.stack([_interior(m) for m in b["mask"]])
            pix.append(b["image"][inner].reshape(-1, 3))
            cls.append(b["mask"][inner])
    pix, cls = np.concatenate(pix), np.concatenate(cls)
    assert len(np.unique(cls)) >= 3, "scenes of several classes"
    colours = _class_colours(pix, cls)
    assert _agreement(pix, cls, colours) >= 0.98


def test_box_centres_lie_on_their_class(tmp_path):
    loader = _loader(_scenes(tmp_path, "coco"), tmp_path)
    centres, classes = [], []
    for b in loader:
        assert b["boxes"].shape[:2] == b["classes"].shape
        for n in range(len(b["image"])):
            k = int(b["num_boxes"][n])
            assert (b["classes"][n][k:] == -1).all(), "padding classes are -1"
            for box, c in zip(b["boxes"][n][:k], b["classes"][n][:k]):
                x0, y0, x1, y1 = box
                assert 0 <= x0 < x1 <= CROP["size"] and 0 <= y0 < y1 <= CROP["size"]
                cx = min(int((x0 + x1) / 2), CROP["size"] - 1)
                cy = min(int((y0 + y1) / 2), CROP["size"] - 1)
                centres.append(b["image"][n, cy, cx])
                classes.append(int(c))
    centres, classes = np.array(centres), np.array(classes)
    assert len(classes) > 24 and len(np.unique(classes)) >= 3
    colours = _class_colours(centres, classes)
    # Distinct classes have distinct colours, and a centre shows its own.
    table = np.stack(list(colours.values()))
    gaps = np.linalg.norm(table[:, None] - table[None], axis=-1)
    assert gaps[~np.eye(len(table), dtype=bool)].min() > 40
    assert _agreement(centres, classes, colours) >= 0.95


def test_arrays_are_exact_and_each_sample_is_prepared_once(tmp_path):
    uri = _scenes(tmp_path, "wds-seg")
    want = {}
    for shard in sorted((tmp_path / "wds-seg").glob("*.tar")):
        with tarfile.open(shard) as tar:
            for m in tar.getmembers():
                if m.name.endswith(".npy"):
                    want[m.name[:-len(".npy")]] = np.load(io.BytesIO(tar.extractfile(m).read()))
    assert len(want) == 24
    # Canonical order: sample i is the i-th key in the shards.
    expect = [want[k] for k in sorted(want)]
    loader = _loader(uri, tmp_path, shuffle=False, batch_size=4, workers=2)
    for epoch in range(3):
        loader.set_epoch(epoch)
        got = []
        for b in loader:
            depth = b["depth"]
            got.extend(depth if isinstance(depth, list) else list(depth))
        assert len(got) == len(expect)
        for g, w in zip(got, expect):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.tobytes() == w.tobytes()
    stats = loader.stats()
    assert stats["prepared"] == 24, stats
    assert stats["cache_hits"] == 48, stats


def test_a_mask_of_the_wrong_size_is_refused_naming_both_files(tmp_path):
    from PIL import Image
    uri = _scenes(tmp_path, "voc", count=6)
    root = tmp_path / "voc"
    masks = sorted((root / "SegmentationClass").glob("*.png"))
    bad = masks[2]
    m = Image.open(bad)
    m.resize((m.width + 3, m.height)).save(bad)
    image = root / "JPEGImages" / (bad.stem + ".jpg")
    loader = _loader(uri, tmp_path, shuffle=False, batch_size=1, workers=1)
    with pytest.raises(Exception) as err:
        for _ in loader:
            pass
    text = str(err.value)
    assert str(bad) in text and str(image) in text, text
    # Under on_error="skip" the rest is served.
    loader = _loader(uri, tmp_path, shuffle=False, batch_size=1, workers=1, on_error="skip",
                     cache=str(tmp_path / "cache2"))
    assert sum(1 for _ in loader) == 6  # the bad one replaced, ranks stay in step
    assert loader.stats()["decode_errors"] >= 1
