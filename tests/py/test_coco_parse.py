"""The coco: source's parse equals pycocotools' reading of the same json:
images in file-name order, xywh boxes as xyxy float32, category ids mapped
to 0..K-1 in id order, crowd boxes left out unless asked for."""
import json
import subprocess

import numpy as np
import pytest

pycocotools_coco = pytest.importorskip("pycocotools.coco")


def ssdfeed_cli(*args):
    r = subprocess.run(["ssdfeed", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def coco_dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("coco")
    out = json.loads(ssdfeed_cli("make-dataset", str(d), "--format", "coco", "--count", "40",
                                 "--classes", "6", "--min-side", "48", "--max-side", "96",
                                 "--json"))
    return d, out["uri"]


def expected(coco, crowd):
    cat_ids = sorted(coco.getCatIds())
    index = {c: k for k, c in enumerate(cat_ids)}
    images = sorted(coco.loadImgs(coco.getImgIds()), key=lambda im: (im["file_name"], im["id"]))
    out = []
    for im in images:
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[im["id"]], iscrowd=None if crowd else False))
        boxes = np.array([[a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2],
                           a["bbox"][1] + a["bbox"][3]] for a in anns],
                         dtype=np.float32).reshape(-1, 4)
        classes = np.array([index[a["category_id"]] for a in anns], dtype=np.int64)
        out.append((im["file_name"], boxes, classes))
    return cat_ids, out


@pytest.mark.parametrize("crowd", [False, True])
def test_coco_parse_matches_pycocotools(coco_dataset, crowd):
    d, uri = coco_dataset
    coco = pycocotools_coco.COCO(str(d / "annotations.json"))
    cat_ids, want = expected(coco, crowd)
    got = json.loads(ssdfeed_cli("inspect", "--source", uri + ("&crowd=1" if crowd else ""),
                                 "--samples", "-1", "--json"))
    assert [c["id"] for c in got["categories"]] == cat_ids
    assert cat_ids != list(range(1, len(cat_ids) + 1))  # the map is exercised
    assert got["size"] == len(want)
    crowded = 0
    for sample, (file_name, boxes, classes) in zip(got["samples"], want):
        assert sample["where"].split(" (")[0].endswith("/" + file_name)
        f = sample["fields"]
        np.testing.assert_array_equal(
            np.array(f["boxes"]["boxes"], dtype=np.float32).reshape(-1, 4), boxes)
        np.testing.assert_array_equal(np.array(f["classes"]["values"], dtype=np.int64), classes)
        crowded += len(coco.getAnnIds(imgIds=[sample_id(coco, file_name)], iscrowd=None)) - \
            len(coco.getAnnIds(imgIds=[sample_id(coco, file_name)], iscrowd=False))
    assert crowded > 0  # the dataset has crowd boxes, so both settings are tested
    assert any(len(b) == 0 for _, b, _ in want)  # and images without annotations


def sample_id(coco, file_name):
    return next(i["id"] for i in coco.dataset["images"] if i["file_name"] == file_name)


@pytest.mark.parametrize("crowd", [False, True])
def test_image_id_iscrowd_and_area_fields_match_pycocotools(coco_dataset, crowd):
    d, uri = coco_dataset
    coco = pycocotools_coco.COCO(str(d / "annotations.json"))
    images = sorted(coco.loadImgs(coco.getImgIds()), key=lambda im: (im["file_name"], im["id"]))
    got = json.loads(ssdfeed_cli("inspect", "--source",
                                 uri + "&fields=image_id,iscrowd,area" +
                                 ("&crowd=1" if crowd else ""),
                                 "--samples", "-1", "--json"))
    assert [f["name"] for f in got["fields"]][-3:] == ["image_id", "iscrowd", "area"]
    assert got["size"] == len(images)
    seen_crowd = 0
    for sample, im in zip(got["samples"], images):
        f = sample["fields"]
        assert f["image_id"]["values"] == [im["id"]]
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[im["id"]], iscrowd=None if crowd else False))
        assert f["iscrowd"]["values"] == [a["iscrowd"] for a in anns]
        assert len(f["iscrowd"]["values"]) == len(f["classes"]["values"])
        np.testing.assert_array_equal(np.array(f["area"]["values"], dtype=np.float32),
                                      np.array([a["area"] for a in anns], dtype=np.float32))
        seen_crowd += sum(a["iscrowd"] for a in anns)
    assert (seen_crowd > 0) == crowd
