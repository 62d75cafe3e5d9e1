"""Batches of sources with fields beyond an image and a class label: the
dict layout (stacked, padded, lists), classic sources unchanged, the torch
and tf forms, and that resume and worker count leave the fields as they are.

The datasets are written here (WebDataset tars, a COCO json), so every
expected value is known exactly."""

import io
import json
import tarfile

import numpy as np
import pytest
from PIL import Image

import ssdfeed

H, W = 40, 56


def _jpeg(arr: np.ndarray) -> bytes:
    b = io.BytesIO()
    Image.fromarray(arr).save(b, "JPEG", quality=95)
    return b.getvalue()


def _png(arr: np.ndarray) -> bytes:
    b = io.BytesIO()
    Image.fromarray(arr).save(b, "PNG")
    return b.getvalue()


def _npy(arr: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


def _add(t: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))


def _image(i: int, h: int = H, w: int = W) -> np.ndarray:
    rng = np.random.default_rng(i)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def _mask(i: int, h: int = H, w: int = W) -> np.ndarray:
    """Two class regions per sample: values a pixel of the served mask may
    hold, whatever the geometry."""
    m = np.full((h, w), 7, np.uint8)
    m[: h // 2] = i % 5
    return m


def make_seg_tar(path, n, *, depth_shape=lambda i: (2, 3), skip_mask=()) -> list:
    """A WebDataset tar: jpg, seg.png, cls, npy, json per sample. Returns
    what each sample holds."""
    samples = []
    with tarfile.open(path, "w") as t:
        for i in range(n):
            key = f"s{i:04d}"
            depth = np.arange(np.prod(depth_shape(i)), dtype="<f4").reshape(depth_shape(i)) + i
            meta = json.dumps({"i": i, "pad": "x" * (i % 3)}).encode()
            _add(t, key + ".jpg", _jpeg(_image(i)))
            if i not in skip_mask:
                _add(t, key + ".seg.png", _png(_mask(i)))
            _add(t, key + ".cls", str(i % 3).encode())
            _add(t, key + ".npy", _npy(depth))
            _add(t, key + ".json", meta)
            samples.append(dict(mask=_mask(i), label=i % 3, depth=depth, meta=meta))
    return samples


SEG_FIELDS = {"image": "jpg", "mask": "seg.png", "label": "cls", "depth": "npy", "meta": "json"}

# category ids -> classes 0..K-1 in id order
CATEGORIES = [{"id": 3, "name": "a"}, {"id": 7, "name": "b"}, {"id": 11, "name": "c"}]


def make_coco(root, n) -> list:
    """images/NNNN.jpg with i % 4 boxes each (image 0 has none), and the
    COCO json. Returns each image's xyxy boxes and classes."""
    (root / "images").mkdir(parents=True)
    images, anns, expected = [], [], []
    for i in range(n):
        name = f"{i:04d}.jpg"
        (root / "images" / name).write_bytes(_jpeg(_image(i)))
        images.append({"id": i + 1, "file_name": name, "height": H, "width": W})
        boxes, classes = [], []
        for k in range(i % 4):
            x, y, bw, bh = 2.0 + k, 3.0 + 2 * k, 10.0 + i % 7, 8.0 + k
            cat = CATEGORIES[(i + k) % 3]["id"]
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": cat,
                         "bbox": [x, y, bw, bh], "area": bw * bh, "iscrowd": 0})
            boxes.append([x, y, x + bw, y + bh])
            classes.append([c["id"] for c in CATEGORIES].index(cat))
        expected.append((np.array(boxes, np.float32).reshape(-1, 4),
                         np.array(classes, np.int64)))
    (root / "ann.json").write_text(json.dumps(
        {"images": images, "annotations": anns, "categories": CATEGORIES}))
    return expected


@pytest.fixture(scope="module")
def seg(tmp_path_factory):
    d = tmp_path_factory.mktemp("seg")
    samples = make_seg_tar(d / "a.tar", 12)
    return f"tar:{d}/a.tar", samples


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    d = tmp_path_factory.mktemp("coco")
    expected = make_coco(d, 10)
    return f"coco:{d}/images?annotations={d}/ann.json", expected


def _all(loader) -> list:
    """Every batch of one pass, copied out of the pooled buffers."""
    out = []
    for b in loader:
        out.append({k: (list(v) if isinstance(v, list) else np.array(v)) for k, v in b.items()})
    return out


def _same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], list):
                assert len(x[k]) == len(y[k]), k
                for u, v in zip(x[k], y[k]):
                    assert np.array_equal(np.asarray(u), np.asarray(v)), k
            else:
                assert np.array_equal(x[k], y[k]), k


def test_segmentation_batch_is_a_dict_of_stacked_views(seg, tmp_path):
    uri, samples = seg
    loader = ssdfeed.Loader(uri, fields=SEG_FIELDS, cache=str(tmp_path), batch_size=4)
    assert not loader.classic
    assert loader.fields == {"image": "image", "mask": "mask", "label": "label",
                             "depth": "array", "meta": "bytes"}
    for epoch in range(2):  # the cold pass, then from the cache
        batches = list(loader)
        assert len(batches) == 3
        for j, b in enumerate(batches):
            assert list(b) == ["image", "label", "mask", "depth", "meta"]
            assert b["image"].shape == (4, H, W, 3)
            assert b["mask"].shape == (4, H, W) and b["mask"].dtype == np.uint8
            assert not b["mask"].flags.owndata  # a view of the batch buffer
            assert b["depth"].shape == (4, 2, 3) and b["depth"].dtype == np.dtype("<f4")
            for i in range(4):
                s = samples[4 * j + i]
                assert np.array_equal(b["mask"][i], s["mask"])
                assert b["label"][i] == s["label"]
                assert np.array_equal(b["depth"][i], s["depth"])  # bit-exact
                assert b["meta"][i] == s["meta"] and isinstance(b["meta"][i], bytes)
    assert loader.stats()["cache_hits"] == 12


def test_arrays_of_unequal_shapes_come_as_a_list(tmp_path):
    samples = make_seg_tar(tmp_path / "v.tar", 4, depth_shape=lambda i: (i + 1, 2))
    loader = ssdfeed.Loader(f"tar:{tmp_path}/v.tar", fields=SEG_FIELDS, cache=False,
                            batch_size=4)
    (b,) = list(loader)
    assert isinstance(b["depth"], list) and len(b["depth"]) == 4
    for got, s in zip(b["depth"], samples):
        assert got.dtype == np.dtype("<f4") and np.array_equal(got, s["depth"])
    assert isinstance(b["meta"], list)  # bytes are always a list
    assert isinstance(b["mask"], np.ndarray)


def test_classic_sources_still_yield_tuples(seg, small_datasets):
    uri, _ = seg
    for loader in (ssdfeed.Loader(uri, fields={"image": "jpg", "label": "cls"}, cache=False,
                                  batch_size=4),
                   ssdfeed.Loader(small_datasets["tar"]["uri"], cache=False, batch_size=4,
                                  prepare=ssdfeed.Prepare(resize=(32, 32)))):
        assert loader.classic
        assert list(loader.fields.values()) == ["image", "label"]
        images, labels = next(iter(loader))
        assert images.ndim == 4 and labels.dtype == np.int64


def test_detection_boxes_padded_with_counts(coco, tmp_path):
    uri, expected = coco
    loader = ssdfeed.Loader(uri, cache=str(tmp_path), batch_size=5)
    assert loader.fields == {"image": "image", "boxes": "boxes", "classes": "classes"}
    batches = list(loader)
    assert len(batches) == 2
    for j, b in enumerate(batches):
        assert "label" not in b
        most = max(len(expected[5 * j + i][1]) for i in range(5))
        assert b["boxes"].shape == (5, most, 4) and b["boxes"].dtype == np.float32
        assert b["classes"].shape == (5, most) and b["classes"].dtype == np.int64
        assert b["num_boxes"].dtype == np.int64
        for i in range(5):
            boxes, classes = expected[5 * j + i]
            k = len(classes)
            assert b["num_boxes"][i] == k
            assert np.array_equal(b["boxes"][i, :k], boxes)
            assert np.array_equal(b["classes"][i, :k], classes)
            assert (b["boxes"][i, k:] == 0).all() and (b["classes"][i, k:] == -1).all()


def test_torch_gives_tensors_and_torchvision_targets(coco):
    torch = pytest.importorskip("torch")
    import ssdfeed.torch

    uri, expected = coco
    loader = ssdfeed.torch.Loader(uri, cache=False, batch_size=5, seed=0, dtype="float32",
                                  layout="NCHW", pin_memory=False)
    b = next(iter(loader))
    assert isinstance(b["image"], torch.Tensor) and b["image"].shape == (5, 3, H, W)
    assert isinstance(b["boxes"], torch.Tensor)
    targets = b["targets"]
    assert len(targets) == 5
    for t, (boxes, classes) in zip(targets, expected):
        assert set(t) == {"boxes", "labels", "area", "iscrowd"}
        assert t["boxes"].dtype == torch.float32 and t["boxes"].shape == (len(classes), 4)
        assert t["labels"].dtype == torch.int64
        assert np.array_equal(t["boxes"].numpy(), boxes)
        # torchvision's labels count from 1: 0 is the background class.
        assert np.array_equal(t["labels"].numpy(), classes + 1)
        assert np.array_equal(t["area"].numpy(),
                              (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
        assert t["iscrowd"].tolist() == [0] * len(classes)


def test_torch_targets_carry_image_id_iscrowd_and_area_when_asked_for(coco):
    """torchvision's COCO evaluation reads image_id, iscrowd and area from
    each target: the coco: fields on request end up there."""
    torch = pytest.importorskip("torch")
    import ssdfeed.torch

    uri, expected = coco
    loader = ssdfeed.torch.Loader(uri + "&fields=image_id,iscrowd,area", cache=False,
                                  batch_size=5, seed=0, pin_memory=False)
    b = next(iter(loader))
    for i, (t, (boxes, classes)) in enumerate(zip(b["targets"], expected)):
        assert set(t) == {"boxes", "labels", "image_id", "iscrowd", "area"}
        assert int(t["image_id"]) == i + 1  # images 0000.jpg... have ids 1...
        assert t["iscrowd"].dtype == torch.int64
        assert t["iscrowd"].tolist() == [0] * len(classes)
        w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        assert t["area"].dtype == torch.float32
        assert np.array_equal(t["area"].numpy(), (w * h).astype(np.float32))
        # label_offset=1 (the default): torchvision's background is label 0.
        assert np.array_equal(t["labels"].numpy(), np.asarray(classes) + 1)


def test_torch_segmentation_dict(seg):
    torch = pytest.importorskip("torch")
    import ssdfeed.torch

    uri, samples = seg
    loader = ssdfeed.torch.Loader(uri, fields=SEG_FIELDS, cache=False, batch_size=4, seed=0,
                                  pin_memory=False)
    b = next(iter(loader))
    assert "targets" not in b
    assert b["mask"].dtype == torch.uint8 and b["mask"].shape == (4, H, W)
    assert torch.equal(b["mask"][1], torch.from_numpy(samples[1]["mask"]))
    assert isinstance(b["meta"], list) and b["meta"][0] == samples[0]["meta"]


def test_tf_dict_with_ragged_boxes(coco, seg):
    tf = pytest.importorskip("tensorflow")
    import ssdfeed.tf

    uri, expected = coco
    ds = ssdfeed.tf.dataset(uri, cache=False, batch_size=5)
    assert isinstance(ds.element_spec["boxes"], tf.RaggedTensorSpec)
    b = next(iter(ds))
    assert isinstance(b["boxes"], tf.RaggedTensor) and isinstance(b["classes"], tf.RaggedTensor)
    for i in range(5):
        boxes, classes = expected[i]
        assert np.array_equal(b["boxes"][i].numpy().reshape(-1, 4), boxes)
        assert np.array_equal(b["classes"][i].numpy(), classes)
    assert list(b["num_boxes"].numpy()) == [len(c) for _, c in expected[:5]]

    uri, samples = seg
    ds = ssdfeed.tf.dataset(uri, fields=SEG_FIELDS, cache=False, batch_size=4)
    assert ds.element_spec["mask"].dtype == tf.uint8
    b = next(iter(ds))
    assert np.array_equal(b["mask"][2].numpy(), samples[2]["mask"])
    assert b["meta"].dtype == tf.string and b["meta"][0].numpy() == samples[0]["meta"]
    assert np.array_equal(b["depth"][3].numpy(), samples[3]["depth"])


def _loader(uri, cache, workers, **kw):
    return ssdfeed.Loader(uri, cache=cache, batch_size=3, shuffle=True, seed=5,
                          workers=workers, augment=ssdfeed.RandomResizedCrop(24, scale=(0.3, 1)),
                          **kw)


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("which", ["seg", "coco"])
def test_fields_do_not_depend_on_worker_count(which, cached, seg, coco, tmp_path):
    uri = seg[0] if which == "seg" else coco[0]
    kw = {"fields": SEG_FIELDS} if which == "seg" else {}
    cache = str(tmp_path) if cached else False
    one = _all(_loader(uri, cache, 1, **kw))
    four = _all(_loader(uri, cache, 4, **kw))
    _same(one, four)
    if which == "seg":
        assert one[0]["mask"].shape == (3, 24, 24)


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("which", ["seg", "coco"])
def test_state_dict_resumes_with_the_same_fields(which, cached, seg, coco, tmp_path):
    uri = seg[0] if which == "seg" else coco[0]
    kw = {"fields": SEG_FIELDS} if which == "seg" else {}
    cache = str(tmp_path) if cached else False
    whole = _all(_loader(uri, cache, 2, **kw))
    a = _loader(uri, cache, 2, **kw)
    it = iter(a)
    next(it)
    next(it)
    state = a.state_dict()
    a.close()
    b = _loader(uri, cache, 3, **kw)
    b.load_state_dict(state)
    _same(whole[2:], _all(b))


PALETTE = np.array([[230, 20, 20], [20, 230, 20], [20, 20, 230], [230, 230, 20]], np.int32)


def test_masks_follow_their_images_through_crop_and_flip(tmp_path):
    """Scenes whose colour is their class: the served mask must say the
    class the served pixel's colour says (away from region borders), for
    every crop and flip."""
    h, w = 60, 90
    yy, xx = np.mgrid[0:h, 0:w]
    with tarfile.open(tmp_path / "c.tar", "w") as t:
        for i in range(16):
            mask = ((xx * (2 + i % 3) // w + yy * 2 // h + i) % 4).astype(np.uint8)
            _add(t, f"s{i:03d}.png", _png(PALETTE[mask].astype(np.uint8)))
            _add(t, f"s{i:03d}.seg.png", _png(mask))
    loader = ssdfeed.Loader(f"tar:{tmp_path}/c.tar", fields={"image": "png", "mask": "seg.png"},
                            cache=False, batch_size=8, shuffle=True, seed=3,
                            augment=ssdfeed.RandomResizedCrop((48, 40), scale=(0.2, 1.0)))
    agree = total = 0
    for epoch in range(2):
        for b in loader:
            img, mask = b["image"].astype(np.int32), b["mask"]
            cls = ((img[..., None, :] - PALETTE) ** 2).sum(-1).argmin(-1)
            # interior: the 3x3 neighbourhood of the mask holds one class
            m = mask.astype(np.int32)
            same = np.ones_like(m, bool)[:, 1:-1, 1:-1]
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    same &= m[:, 1 + dy:m.shape[1] - 1 + dy, 1 + dx:m.shape[2] - 1 + dx] \
                        == m[:, 1:-1, 1:-1]
            agree += int((cls[:, 1:-1, 1:-1] == m[:, 1:-1, 1:-1])[same].sum())
            total += int(same.sum())
    assert total > 0 and agree / total >= 0.99


def test_sharded_ranks_see_every_sample_once(seg):
    uri, samples = seg
    seen = []
    for rank in range(2):
        loader = ssdfeed.Loader(uri, fields=SEG_FIELDS, cache=False, batch_size=2, shuffle=True,
                                seed=1, rank=rank, world_size=2)
        for b in loader:
            seen += [int(m[0, 0]) * 100 + int(lab) for m, lab in zip(b["mask"], b["label"])]
    want = [int(s["mask"][0, 0]) * 100 + s["label"] for s in samples]
    assert sorted(seen) == sorted(want)


def test_a_sample_missing_a_field_is_named_or_skipped(tmp_path):
    make_seg_tar(tmp_path / "m.tar", 6, skip_mask={2})
    uri = f"tar:{tmp_path}/m.tar"
    with pytest.raises(Exception, match="s0002"):
        list(ssdfeed.Loader(uri, fields=SEG_FIELDS, cache=False, batch_size=3))
    loader = ssdfeed.Loader(uri, fields=SEG_FIELDS, cache=False, batch_size=3, on_error="skip")
    batches = list(loader)
    # The stem without a mask is left out when the source is opened.
    metas = [json.loads(m)["i"] for b in batches for m in b["meta"]]
    assert metas == [0, 1, 3, 4, 5]
    assert all(isinstance(b["mask"], np.ndarray) for b in batches)


def test_field_arguments_are_checked():
    with pytest.raises(ValueError, match="min_box_visible"):
        ssdfeed.RandomResizedCrop(32, min_box_visible=1.5)
    with pytest.raises(ValueError, match="fields"):
        ssdfeed.Loader("tar:/nonexistent/*.tar", fields=["jpg"])
    with pytest.raises(ValueError, match="kind must be one of"):
        ssdfeed.Loader("tar:/nonexistent/*.tar", fields={"x": ("nope", "bin")})


def test_warm_fills_the_entry_a_fields_loader_reads(seg, tmp_path):
    uri, samples = seg
    r = ssdfeed.warm(uri, fields=SEG_FIELDS, cache=str(tmp_path), workers=2)
    assert r.complete and r.prepared == len(samples)
    loader = ssdfeed.Loader(uri, fields=SEG_FIELDS, cache=str(tmp_path), batch_size=4)
    masks = np.concatenate([b["mask"] for b in loader])
    assert np.array_equal(masks, np.stack([s["mask"] for s in samples]))
    s = loader.stats()
    assert s["cache_hits"] == len(samples) and s["cache_misses"] == 0


def test_masks_are_stored_as_runs_a_fraction_of_their_bytes(seg, tmp_path):
    """A mask of two flat regions is a few bytes a row as runs: a warm
    epoch of image+mask reads about what image-only reads (raw, the mask
    would add a third: H*W bytes to the image's H*W*3), and serves the
    mask exactly."""
    uri, samples = seg
    read = {}
    for name, fields in (("image", {"image": "jpg", "label": "cls"}),
                         ("mask", {"image": "jpg", "mask": "seg.png", "label": "cls"})):
        loader = ssdfeed.Loader(uri, fields=fields, cache=str(tmp_path), batch_size=4)
        for _ in loader:  # the cold epoch fills the entry
            pass
        before = loader.stats()["cache_bytes"]
        batches = list(loader)
        read[name] = loader.stats()["cache_bytes"] - before
        assert loader.stats()["cache_hits"] == len(samples)
    masks = np.concatenate([b["mask"] for b in batches])
    assert np.array_equal(masks, np.stack([s["mask"] for s in samples]))
    image_only = len(samples) * H * W * 3
    assert read["image"] >= image_only
    assert read["mask"] - read["image"] < 0.05 * image_only, read
