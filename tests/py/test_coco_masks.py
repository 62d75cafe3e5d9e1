"""coco: instance masks (fields=masks): each kept annotation's segmentation
rasterised as pycocotools' annToMask does (polygons, several polygons of one
instance, uncompressed RLE, a crowd's compressed RLE), stacked (K, H, W)
uint8 0/1 beside its box and class, following the image through crop and
flip, and in ssdfeed.torch's detection targets as Mask R-CNN reads them.

The json is written here; pycocotools reads the same file for the
reference. Unresized images must give pycocotools' masks exactly."""
import io
import json

import numpy as np
import pytest
from PIL import Image

import ssdfeed

pycocotools_coco = pytest.importorskip("pycocotools.coco")
mask_utils = pytest.importorskip("pycocotools.mask")

H, W = 40, 56
N = 12


def _jpeg(arr: np.ndarray) -> bytes:
    b = io.BytesIO()
    Image.fromarray(arr).save(b, "JPEG", quality=95)
    return b.getvalue()


def _polygon(cx, cy, r, sides, turn):
    a = turn + np.arange(sides) * 2 * np.pi / sides
    return [float(v) for xy in zip(cx + r * np.cos(a), cy + r * 0.8 * np.sin(a)) for v in xy]


def _segmentation(i, k):
    """Image i's instance k: one polygon, two polygons, an uncompressed
    RLE, by turns; coordinates off the pixel grid, some past the edge."""
    cx, cy = 8.3 + 13.7 * k + (i % 3), 9.6 + 6.1 * k + (i % 5)
    if k % 3 == 0:
        return [_polygon(cx, cy, 6.4 + i % 4, 5 + i % 3, 0.3 * i)]
    if k % 3 == 1:
        return [_polygon(cx, cy, 4.2, 3, 0.1 * i), _polygon(cx + 9.5, cy + 12.25, 5.1, 6, 0.0)]
    m = np.zeros((H, W), np.uint8)
    m[int(cy) - 4:int(cy) + 5, int(cx) - 3:int(cx) + 7] = 1
    m[int(cy), :] = 1  # a thin line across the whole image
    flat = m.flatten(order="F")
    runs, value, count = [], 0, 0
    for p in flat:
        if p != value:
            runs.append(count)
            value, count = p, 0
        count += 1
    runs.append(count)
    return {"size": [H, W], "counts": [int(r) for r in runs]}


def _crowd(i):
    m = np.zeros((H, W), np.uint8, order="F")
    m[2 + i % 5:30, 30:50 + i % 4] = 1
    m[5:9, 3:7] = 1
    rle = mask_utils.encode(np.asfortranarray(m))
    return {"size": rle["size"], "counts": rle["counts"].decode()}


def _bbox(seg):
    if isinstance(seg, dict) and isinstance(seg["counts"], str):  # compressed already
        rle = {"size": seg["size"], "counts": seg["counts"].encode()}
    else:
        rles = mask_utils.frPyObjects(seg, H, W)
        rle = mask_utils.merge(rles) if isinstance(rles, list) else rles
    return [float(v) for v in mask_utils.toBbox(rle)]


@pytest.fixture(scope="module")
def coco_masks(tmp_path_factory):
    """N images of H x W with i % 4 instances each (image 0 has none), and
    every image from 3 on a crowd annotation too."""
    d = tmp_path_factory.mktemp("coco_masks")
    (d / "images").mkdir()
    images, anns = [], []
    rng = np.random.default_rng(0)
    for i in range(N):
        name = f"{i:04d}.jpg"
        (d / "images" / name).write_bytes(_jpeg(rng.integers(0, 255, (H, W, 3), np.uint8)))
        images.append({"id": i + 1, "file_name": name, "height": H, "width": W})
        segs = [(_segmentation(i, k), 0) for k in range(i % 4)]
        if i >= 3:
            segs.insert(1, (_crowd(i), 1))
        for seg, crowd in segs:
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": 1 + len(anns) % 2,
                         "bbox": _bbox(seg), "area": 1.0, "iscrowd": crowd,
                         "segmentation": seg})
    (d / "ann.json").write_text(json.dumps(
        {"images": images, "annotations": anns,
         "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}))
    return f"coco:{d}/images?annotations={d}/ann.json", d / "ann.json"


def _expected(ann_file, crowd):
    """Per image (file-name order): pycocotools' masks of its kept
    annotations, in the json's order, (K, H, W) uint8."""
    coco = pycocotools_coco.COCO(str(ann_file))
    out = []
    for im in sorted(coco.loadImgs(coco.getImgIds()), key=lambda im: im["file_name"]):
        anns = [a for a in coco.dataset["annotations"]
                if a["image_id"] == im["id"] and (crowd or not a["iscrowd"])]
        out.append(np.array([coco.annToMask(a) for a in anns], np.uint8).reshape(-1, H, W))
    return out


@pytest.mark.parametrize("crowd", [False, True])
def test_masks_are_pycocotools_masks(coco_masks, crowd, tmp_path):
    uri, ann_file = coco_masks
    want = _expected(ann_file, crowd)
    assert sum(len(m) for m in want) > 10 and any(len(m) == 0 for m in want)
    loader = ssdfeed.Loader(uri + "&fields=masks" + ("&crowd=1" if crowd else ""),
                            cache=str(tmp_path), batch_size=4)
    assert loader.fields["masks"] == "instance_masks"
    for epoch in range(2):  # the second from the cache's records
        got = []
        for b in loader:
            assert b["masks"].dtype == np.uint8 and b["masks"].ndim == 4
            assert b["masks"].shape[1] == max(b["num_boxes"].max(), 0)
            for i, k in enumerate(b["num_boxes"].tolist()):
                assert not b["masks"][i, k:].any()  # padding planes are empty
                got.append(b["masks"][i, :k])
        assert len(got) == N
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)  # exact: pycocotools' pixels


def test_torch_targets_carry_masks(coco_masks):
    torch = pytest.importorskip("torch")
    import ssdfeed.torch

    uri, ann_file = coco_masks
    want = _expected(ann_file, crowd=False)
    loader = ssdfeed.torch.Loader(uri + "&fields=masks,iscrowd", cache=False, batch_size=6,
                                  seed=0, pin_memory=False)
    targets = [t for b in loader for t in b["targets"]]
    assert len(targets) == N
    for t, w in zip(targets, want):
        assert set(t) == {"boxes", "labels", "area", "iscrowd", "masks"}
        assert t["masks"].dtype == torch.uint8 and tuple(t["masks"].shape) == w.shape
        assert len(t["masks"]) == len(t["boxes"]) == len(t["labels"])
        np.testing.assert_array_equal(t["masks"].numpy(), w)


def test_masks_follow_their_boxes_through_crop_and_flip(coco_masks, tmp_path):
    """Each box was made the bounding box of its mask: after any crop,
    resize and flip, a kept instance's mask must lie in its box, and fill
    it where the crop left the instance whole: masks stay paired with their
    boxes when boxes are dropped or mirrored."""
    uri, _ = coco_masks
    loader = ssdfeed.Loader(uri + "&fields=masks&crowd=1", cache=str(tmp_path), batch_size=4,
                            shuffle=True, seed=7,
                            augment=ssdfeed.RandomResizedCrop((48, 64), scale=(0.3, 1.0)))
    checked = whole = 0
    for epoch in range(3):
        for b in loader:
            for i, k in enumerate(b["num_boxes"].tolist()):
                assert b["masks"].shape[2:] == (48, 64)
                for box, mask in zip(b["boxes"][i, :k], b["masks"][i, :k]):
                    ys, xs = np.nonzero(mask)
                    if len(xs) == 0:  # a thin part seen by no sampled pixel
                        continue
                    x0, y0, x1, y1 = box
                    # Nearest sampling moves an edge by up to one output
                    # pixel; the boxes are exact. Every set pixel is in its
                    # box; an instance the crop did not cut (its box clear of
                    # the edges) spans its box.
                    assert xs.min() >= x0 - 1 and xs.max() + 1 <= x1 + 1, (box, xs)
                    assert ys.min() >= y0 - 1 and ys.max() + 1 <= y1 + 1, (box, ys)
                    if x0 >= 1 and y0 >= 1 and x1 <= 63 and y1 <= 47:
                        assert abs(xs.min() - x0) <= 1 and abs(xs.max() + 1 - x1) <= 1, (box, xs)
                        assert abs(ys.min() - y0) <= 1 and abs(ys.max() + 1 - y1) <= 1, (box, ys)
                        whole += 1
                    checked += 1
    assert checked > 50 and whole > 10


def test_tf_masks_are_ragged_like_boxes(coco_masks):
    pytest.importorskip("tensorflow")
    import ssdfeed.tf

    uri, ann_file = coco_masks
    want = _expected(ann_file, crowd=False)
    got = []
    for b in ssdfeed.tf.dataset(uri + "&fields=masks", cache=False, batch_size=4):
        assert b["masks"].shape.as_list() == [4, None, H, W]  # ragged in the boxes
        got.extend(m.numpy() for m in b["masks"])
    assert len(got) == N
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_inspect_shows_instance_masks_decoded(coco_masks):
    """`ssdfeed inspect` shows an instance_masks field as its shape and each
    instance's area in pixels (pycocotools' annToMask(...).sum()), not as a
    byte count of its raw planes."""
    import shutil
    import subprocess

    uri, ann_file = coco_masks
    want = _expected(ann_file, crowd=True)
    r = subprocess.run([shutil.which("ssdfeed"), "inspect", "--source",
                        uri + "&fields=masks&crowd=1", "--samples", "-1", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    samples = json.loads(r.stdout)["samples"]
    assert len(samples) == N
    for sample, w in zip(samples, want):
        m = sample["fields"]["masks"]
        assert m["kind"] == "instance_masks"
        assert m["shape"] == [len(w), H, W]
        assert m["areas"] == [int(x) for x in w.sum(axis=(1, 2))]
