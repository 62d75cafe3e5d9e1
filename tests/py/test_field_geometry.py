"""Field geometry pinned against the reference libraries.

For the crop parameters the Loader draws (crop_params), boxes rendered by
ssdfeed equal torchvision.transforms.v2.functional's resized_crop +
horizontal_flip + clamp on BoundingBoxes; masks equal OpenCV's
INTER_NEAREST (cv2.resize), which picks source pixel floor(i * src / dst):
not INTER_NEAREST_EXACT and not PIL's NEAREST, which sample pixel centres.
Arrays (.npy) come back bit-exact as numpy wrote them.
"""
import io

import numpy as np
import pytest

from ssdfeed import _ssdfeed
from torchvision_util import import_torchvision

MASK, BOXES, CLASSES, ARRAY = 1, 2, 3, 5


def _torchvision():
    """torchvision.transforms.v2.functional and tv_tensors (see torchvision_util)."""
    F = import_torchvision("torchvision.transforms.v2.functional")
    return F, import_torchvision("torchvision.tv_tensors")


def _augment(**kw):
    a = _ssdfeed.AugmentSpec()
    a.enabled = True
    for k, v in kw.items():
        setattr(a, k, v)
    return a


def _field(name, kind, arr):
    arr = np.ascontiguousarray(arr)
    return (name, kind, arr.dtype.str, list(arr.shape), arr.tobytes())


def _array(field):
    _, _, dtype, shape, data = field
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)


def _crops(a, h, w, n, seed=3):
    return [_ssdfeed.crop_params(a, seed, epoch, i, h, w) for epoch in (0, 1) for i in range(n)]


def test_crop_params_are_keyed_and_inside_the_image():
    a = _augment(scale_min=0.08)
    crops = _crops(a, 300, 400, 50)
    assert crops == _crops(a, 300, 400, 50)
    assert len(set(crops)) > 90
    for top, left, h, w, flip in crops:
        assert 0 <= top and top + h <= 300 and 0 <= left and left + w <= 400
    flips = [c[4] for c in crops]
    assert any(flips) and not all(flips)


def test_boxes_equal_torchvision_resized_crop_flip_and_clamp():
    F, tv_tensors = _torchvision()
    import torch
    rng = np.random.default_rng(0)
    H, W, out_h, out_w, min_visible = 300, 400, 224, 192, 0.25
    xy = rng.uniform([0, 0], [W, H], size=(40, 2))
    wh = rng.uniform(2, 180, size=(40, 2))
    boxes = np.concatenate([xy, np.minimum(xy + wh, [W, H])], axis=1).astype(np.float32)
    classes = np.arange(len(boxes), dtype=np.int64)  # tells which boxes were kept
    compared = dropped = 0
    for top, left, h, w, flip in _crops(_augment(scale_min=0.1), H, W, 40):
        got = _ssdfeed._render_fields(
            [_field("boxes", BOXES, boxes), _field("classes", CLASSES, classes)],
            (top, left, h, w, flip), H, W, out_h, out_w, min_visible)
        ours, kept = _array(got[0]), _array(got[1])
        ref = tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format="XYXY", canvas_size=(H, W))
        ref = F.resized_crop(ref, top, left, h, w, [out_h, out_w])
        if flip:
            ref = F.horizontal_flip(ref)
        ref = F.clamp_bounding_boxes(ref).numpy()
        np.testing.assert_allclose(ours, ref[kept], atol=2e-3)
        # What is dropped is what torchvision keeps too little of.
        sx, sy = out_w / w, out_h / h
        seen = (ref[:, 2] - ref[:, 0]) * (ref[:, 3] - ref[:, 1]) / (sx * sy)
        whole = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        frac = seen / whole
        clear = np.abs(frac - min_visible) > 1e-4
        expect = np.flatnonzero((frac >= min_visible) & (seen > 0) & clear)
        assert set(expect) == set(kept) - set(np.flatnonzero(~clear))
        compared += len(kept)
        dropped += len(boxes) - len(kept)
    assert compared > 500 and dropped > 100


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_mask_render_equals_cv2_inter_nearest(dtype):
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(1)
    H, W = 211, 317
    mask = rng.integers(0, 60000 if dtype == np.uint16 else 255, size=(H, W)).astype(dtype)
    for out_h, out_w in [(224, 224), (97, 131)]:
        for top, left, h, w, flip in _crops(_augment(scale_min=0.05), H, W, 15):
            got = _array(_ssdfeed._render_fields([_field("mask", MASK, mask)],
                                                 (top, left, h, w, flip), H, W, out_h, out_w)[0])
            ref = cv2.resize(mask[top:top + h, left:left + w], (out_w, out_h),
                             interpolation=cv2.INTER_NEAREST)
            if flip:
                ref = ref[:, ::-1]
            np.testing.assert_array_equal(got, ref)
            assert set(np.unique(got)) <= set(np.unique(mask))


def _png(arr, mode, palette=None):
    """A PNG that PIL writes: grey ("L", "I;16") or palette indices ("P")."""
    from PIL import Image
    img = Image.frombytes(mode, arr.shape[::-1], arr.astype(arr.dtype.newbyteorder("<")).tobytes())
    if palette is not None:
        img.putpalette(palette)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("mode", ["L", "P", "I;16"])
def test_prepared_mask_equals_cv2_inter_nearest_then_centre_crop(mode):
    cv2 = pytest.importorskip("cv2")
    pytest.importorskip("PIL")
    rng = np.random.default_rng(2)
    H, W = 123, 171
    dtype = np.uint16 if mode == "I;16" else np.uint8
    mask = rng.integers(0, 21, size=(H, W)).astype(dtype) * (1000 if mode == "I;16" else 1)
    palette = [int(v) for v in rng.integers(0, 256, size=768)] if mode == "P" else None
    spec = _ssdfeed.PrepareSpec()
    spec.resize_h, spec.resize_w, spec.crop_h, spec.crop_w = 80, 111, 64, 90
    got = _ssdfeed._prepare_fields([("mask", MASK, _png(mask, mode, palette), False, "m.png")],
                                   spec, H, W)
    got = _array(got[0])
    resized = cv2.resize(mask, (111, 80), interpolation=cv2.INTER_NEAREST)
    top, left = int(np.floor((80 - 64) / 2 + 0.5)), int(np.floor((111 - 90) / 2 + 0.5))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, resized[top:top + 64, left:left + 90])


def test_mask_of_another_size_is_refused_naming_it():
    pytest.importorskip("PIL")
    png = _png(np.zeros((10, 12), np.uint8), "L")
    with pytest.raises(ValueError, match=r"/d/seg/7\.png.*12x10.*12x11"):
        _ssdfeed._prepare_fields([("mask", MASK, png, False, "/d/seg/7.png")],
                                 _ssdfeed.PrepareSpec(), 11, 12)


@pytest.mark.parametrize("arr", [
    np.arange(24, dtype="<f4").reshape(2, 3, 4),
    np.asfortranarray(np.arange(24, dtype=">i2").reshape(2, 3, 4)),
    np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)),
    np.array(7, dtype="<i8"),
    np.zeros((0, 5), dtype="|u1"),
    np.array([[True, False]]),
    np.array([1 + 2j, 3 - 4j], dtype="<c16"),
    np.array(["ab", "xyz"]),
    np.array([b"ab", b"c"]),
    np.array(["2024-01-01", "2025-06-30"], dtype="datetime64[ns]"),
], ids=lambda a: f"{a.dtype.str}{a.shape}{'F' if a.flags.f_contiguous and a.ndim > 1 else ''}")
def test_npy_arrays_come_back_bit_exact(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    name, kind, dtype, shape, data = _ssdfeed._prepare_fields(
        [("depth", ARRAY, buf.getvalue(), False, "d.npy")], _ssdfeed.PrepareSpec(), 4, 4)[0]
    assert (dtype, tuple(shape)) == (arr.dtype.str, arr.shape)
    assert data == np.ascontiguousarray(arr).tobytes()


@pytest.mark.parametrize("arr,says", [
    (np.array([{"a": 1}], dtype=object), "object"),
    (np.zeros(2, dtype=[("x", "<i4"), ("y", "<f4")]), "structured"),
])
def test_npy_object_and_structured_arrays_are_refused_naming_the_file(arr, says):
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    with pytest.raises(ValueError, match=rf"/d/x\.npy.*{says}"):
        _ssdfeed._prepare_fields([("depth", ARRAY, buf.getvalue(), False, "/d/x.npy")],
                                 _ssdfeed.PrepareSpec(), 4, 4)


# End to end through the Loader: these need dict batches (the batch side of
# sample fields) and skip where the Loader still yields (images, labels).
COLOURS = np.array([0, 80, 160, 240], np.uint8)


def _scene(rng, h, w):
    mask = np.zeros((h, w), np.uint8)
    for cls in (1, 2, 3):
        y, x = rng.integers(0, h - 20), rng.integers(0, w - 20)
        mask[y:y + rng.integers(15, h // 2), x:x + rng.integers(15, w // 2)] = cls
    return mask


def _dict_batches(loader):
    batches = list(loader)
    if batches and not isinstance(batches[0], dict):
        pytest.skip("the Loader yields (images, labels): dict batches are not built yet")
    return batches


def test_loader_serves_masks_that_agree_with_their_images(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image
    import ssdfeed
    rng = np.random.default_rng(4)
    (tmp_path / "JPEGImages").mkdir()
    (tmp_path / "SegmentationClass").mkdir()
    for i in range(12):
        mask = _scene(rng, 90, 120)
        Image.fromarray(np.repeat(COLOURS[mask][..., None], 3, -1)).save(
            tmp_path / "JPEGImages" / f"s{i:02d}.jpg", quality=95)
        Image.fromarray(mask, mode="L").save(tmp_path / "SegmentationClass" / f"s{i:02d}.png")
    uri = (f"files:{tmp_path}?image=JPEGImages/{{stem}}.jpg"
           f"&mask=SegmentationClass/{{stem}}.png")
    loader = ssdfeed.Loader(uri, cache=tmp_path / "cache", prepare=ssdfeed.Prepare(resize_short=60),
                            augment=ssdfeed.RandomResizedCrop(64, scale=(0.3, 1.0)),
                            batch_size=4, workers=1)
    clear = agree = 0
    for b in _dict_batches(loader):
        grey = b["image"][..., 0].astype(int)
        dist = np.abs(grey[..., None] - COLOURS.astype(int))
        ok = dist.min(-1) <= 6  # not blended across a class edge
        clear += ok.sum()
        agree += (dist.argmin(-1) == b["mask"])[ok].sum()
    assert clear > 12 * 64 * 64 // 2
    assert agree >= 0.98 * clear


def test_loader_serves_boxes_whose_centres_lie_on_their_class(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image
    import json
    import ssdfeed
    rng = np.random.default_rng(5)
    images, annotations = [], []
    for i in range(12):
        img = np.zeros((90, 120), np.uint8)
        for cat in (1, 2, 3):
            x, y = int(rng.integers(0, 80)), int(rng.integers(0, 50))
            w, h = int(rng.integers(20, 40)), int(rng.integers(20, 40))
            w, h = min(w, 120 - x), min(h, 90 - y)
            img[y:y + h, x:x + w] = COLOURS[cat]
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": cat,
                                "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0})
        Image.fromarray(np.repeat(img[..., None], 3, -1)).save(tmp_path / f"{i}.png")
        images.append({"id": i + 1, "file_name": f"{i}.png", "width": 120, "height": 90})
    # Classes are painted in order with rising colours: a box's centre shows
    # its own colour or a later (brighter) box's over it.
    (tmp_path / "ann.json").write_text(json.dumps({
        "images": images, "annotations": annotations,
        "categories": [{"id": c, "name": f"c{c}"} for c in (1, 2, 3)]}))
    loader = ssdfeed.Loader(f"coco:{tmp_path}?annotations={tmp_path / 'ann.json'}",
                            cache=tmp_path / "cache",
                            augment=ssdfeed.RandomResizedCrop(64, scale=(0.5, 1.0)),
                            batch_size=4, workers=1)
    checked = 0
    for b in _dict_batches(loader):
        for n in range(len(b["image"])):
            for box, cls in zip(b["boxes"][n][:b["num_boxes"][n]], b["classes"][n]):
                cx, cy = int((box[0] + box[2]) / 2), int((box[1] + box[3]) / 2)
                assert 0 <= cx < 64 and 0 <= cy < 64
                assert b["image"][n, cy, cx, 0] >= COLOURS[cls + 1] - 8
                checked += 1
    assert checked > 12


# ------------------------------------------------ Flip and ScaleJitterCrop
def _jitter(**kw):
    a = _augment(kind=_ssdfeed.AugmentKind.parse("scale_jitter_crop"), **kw)
    return a


def _reference_window(F, t, rh, rw, i, j, flip, ch, cw, fill):
    """The segmentation reference after its resize: flip, pad bottom and
    right to the crop size (pad_if_smaller), crop."""
    if flip:
        t = F.horizontal_flip(t)
    pad_h, pad_w = max(ch - rh, 0), max(cw - rw, 0)
    if pad_h or pad_w:
        t = F.pad(t, [0, 0, pad_w, pad_h], fill=fill)
    return F.crop(t, i, j, ch, cw)


def test_scale_jitter_masks_and_boxes_equal_torchvision_resize_flip_pad_crop():
    """Masks: resized as cv2's INTER_NEAREST (as every mask here), then
    torchvision's flip, pad with 255 and crop; boxes: torchvision's resize,
    flip, pad, crop and clamp on BoundingBoxes."""
    cv2 = pytest.importorskip("cv2")
    F, tv_tensors = _torchvision()
    import torch
    rng = np.random.default_rng(1)
    H, W, ch, cw = 90, 120, 96, 100
    mask = rng.integers(0, 30, (H, W), dtype=np.uint8)
    xy = rng.uniform([0, 0], [W - 5, H - 5], size=(12, 2))
    boxes = np.concatenate([xy, np.minimum(xy + rng.uniform(4, 60, (12, 2)), [W, H])],
                           axis=1).astype(np.float32)
    classes = np.arange(len(boxes), dtype=np.int64)
    a = _jitter(height=ch, width=cw, jitter_min=45, jitter_max=180, mask_fill=255)
    padded = flipped = 0
    for epoch in range(2):
        for i in range(40):
            rh, rw, top, j, flip = _ssdfeed._jitter_params(a, 3, epoch, i, H, W)
            assert min(rh, rw) in range(45, 181)
            left = rw - j - cw if flip else j  # the hook's box: the mirrored window
            got = _ssdfeed._render_fields(
                [_field("mask", MASK, mask), _field("boxes", BOXES, boxes),
                 _field("classes", CLASSES, classes)],
                (top, left, ch, cw, flip), H, W, ch, cw, 0.0, resize=(rh, rw), mask_fill=255)
            resized = torch.from_numpy(cv2.resize(mask, (rw, rh), interpolation=cv2.INTER_NEAREST))
            ref = _reference_window(F, resized[None], rh, rw, top, j, flip, ch, cw, 255)[0]
            np.testing.assert_array_equal(_array(got[0]), ref.numpy())
            tb = tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format="XYXY", canvas_size=(H, W))
            tb = F.resize(tb, [rh, rw])
            tb = _reference_window(F, tb, rh, rw, top, j, flip, ch, cw, 0)
            ref_boxes = F.clamp_bounding_boxes(tb).numpy()
            kept = _array(got[2])
            np.testing.assert_allclose(_array(got[1]), ref_boxes[kept], atol=2e-3)
            area = (ref_boxes[:, 2] - ref_boxes[:, 0]) * (ref_boxes[:, 3] - ref_boxes[:, 1])
            assert set(np.flatnonzero(area > 1e-3)) <= set(kept)
            padded += rh < ch or rw < cw
            flipped += flip
    assert 10 < padded < 70 and 10 < flipped < 70


def test_scale_jitter_image_is_torchvision_resize_flip_pad_crop():
    """The image: padding exactly `fill`, the rest torchvision's antialiased
    resize to within resampling differences (ssdfeed has its own resampler,
    the one of RandomResizedCrop)."""
    F, _ = _torchvision()
    import torch
    H, W, ch, cw = 80, 100, 90, 90
    y, x = np.mgrid[0:H, 0:W]
    img = np.stack([x * 2.5, y * 3.0, (x + y) * 1.4], -1).astype(np.uint8)  # smooth
    a = _jitter(height=ch, width=cw, jitter_min=40, jitter_max=160, fill=7)
    for i in range(30):
        rh, rw, top, j, flip = _ssdfeed._jitter_params(a, 0, 0, i, H, W)
        ours = np.frombuffer(_ssdfeed._render_image(img.tobytes(), H, W, 3, a, 0, 0, i),
                             np.uint8).reshape(ch, cw, 3)
        t = F.resize(torch.from_numpy(img).permute(2, 0, 1), [rh, rw], antialias=True)
        ref = _reference_window(F, t, rh, rw, top, j, flip, ch, cw, 7).permute(1, 2, 0).numpy()
        pad = _reference_window(F, torch.zeros(1, rh, rw), rh, rw, top, j, flip, ch, cw,
                                1)[0].numpy() == 1
        assert (ours[pad] == 7).all() and (ref[pad] == 7).all()
        diff = np.abs(ours.astype(int) - ref.astype(int))[~pad]
        assert diff.mean() < 1.5 and diff.max() <= 12, (i, rh, rw, flip, diff.mean(), diff.max())


def test_flip_only_mirrors_with_its_probability_and_keeps_the_shape():
    img = np.random.default_rng(2).integers(0, 256, (33, 47, 3), dtype=np.uint8)
    for p, lo, hi in [(0.0, 0, 0), (1.0, 200, 200), (0.5, 70, 130)]:
        a = _augment(kind=_ssdfeed.AugmentKind.parse("flip"), flip_prob=p)
        flips = 0
        for i in range(200):
            out = np.frombuffer(_ssdfeed._render_image(img.tobytes(), 33, 47, 3, a, 1, 0, i),
                                np.uint8).reshape(33, 47, 3)
            flipped = np.array_equal(out, img[:, ::-1])
            assert flipped or np.array_equal(out, img)
            flips += flipped
        assert lo <= flips <= hi, (p, flips)


@pytest.mark.parametrize("augment", ["flip", "jitter"])
def test_loader_serves_flipped_and_jittered_masks_that_agree_with_their_images(tmp_path, augment):
    """Detection tutorial's RandomHorizontalFlip and the segmentation
    reference's scale jitter + padded crop through the Loader: masks follow
    their images (the padding: image 0, mask 255)."""
    pytest.importorskip("PIL")
    from PIL import Image
    import ssdfeed
    rng = np.random.default_rng(4)
    (tmp_path / "JPEGImages").mkdir()
    (tmp_path / "SegmentationClass").mkdir()
    for i in range(12):
        mask = _scene(rng, 90, 120)
        Image.fromarray(np.repeat(COLOURS[mask][..., None], 3, -1)).save(
            tmp_path / "JPEGImages" / f"s{i:02d}.jpg", quality=95)
        Image.fromarray(mask, mode="L").save(tmp_path / "SegmentationClass" / f"s{i:02d}.png")
    uri = (f"files:{tmp_path}?image=JPEGImages/{{stem}}.jpg"
           f"&mask=SegmentationClass/{{stem}}.png")
    aug = (ssdfeed.Flip(p=0.5) if augment == "flip"
           else ssdfeed.ScaleJitterCrop(100, min_size=45, max_size=150))
    loader = ssdfeed.Loader(uri, cache=tmp_path / "cache",
                            prepare=ssdfeed.Prepare(resize=(90, 120)), augment=aug,
                            batch_size=4, workers=1)
    plain = ssdfeed.Loader(uri, cache=tmp_path / "cache",
                           prepare=ssdfeed.Prepare(resize=(90, 120)), batch_size=4, workers=1)
    shape = (90, 120) if augment == "flip" else (100, 100)
    clear = agree = padding = changed = 0
    for b, p in zip(_dict_batches(loader), _dict_batches(plain)):
        assert b["image"].shape[1:3] == shape and b["mask"].shape[1:] == shape
        pad = b["mask"] == 255
        padding += pad.sum()
        assert (b["image"][pad] == 0).all()
        grey = b["image"][..., 0].astype(int)
        dist = np.abs(grey[..., None] - COLOURS.astype(int))
        ok = (dist.min(-1) <= 6) & ~pad
        clear += ok.sum()
        agree += (dist.argmin(-1) == b["mask"])[ok].sum()
        if augment == "flip":
            for img, ref in zip(b["image"], p["image"]):
                assert np.array_equal(img, ref) or np.array_equal(img, ref[:, ::-1])
                changed += not np.array_equal(img, ref)
    assert agree >= 0.98 * clear and clear > 12 * shape[0] * shape[1] // 3
    if augment == "flip":
        assert 2 <= changed <= 10
    else:
        assert padding > 0


def test_augments_refuse_bad_arguments_naming_them():
    import ssdfeed
    with pytest.raises(ValueError, match="Flip p"):
        ssdfeed.Flip(p=1.5)
    with pytest.raises(ValueError, match="min_size <= max_size"):
        ssdfeed.ScaleJitterCrop(64, min_size=100, max_size=50)
    with pytest.raises(ValueError, match="fill"):
        ssdfeed.ScaleJitterCrop(64, min_size=10, max_size=50, fill=300)
    with pytest.raises(ValueError, match="augment must be"):
        ssdfeed.Loader("synthetic:4", augment="flip")
