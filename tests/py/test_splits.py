"""A files: source served by a split, as VOC ships them: the URI's
split=ImageSets/Segmentation/train.txt or the loader's stems=[...] serve
exactly the listed stems, in sorted order, with their own masks."""
import numpy as np
import pytest
from PIL import Image

import ssdfeed


@pytest.fixture
def voc(tmp_path):
    made = ssdfeed.make_dataset(str(tmp_path / "voc"), format="voc", count=8, classes=4,
                                min_side=40, max_side=40, seed=5)
    root = tmp_path / "voc"
    stems = sorted(p.stem for p in (root / "JPEGImages").glob("*.jpg"))
    assert len(stems) == 8
    splits = root / "ImageSets" / "Segmentation"
    splits.mkdir(parents=True)
    train, val = stems[1::2] + stems[:1], stems[2::2]
    (splits / "train.txt").write_text("\n".join(reversed(train)) + "\n")
    (splits / "val.txt").write_text("\n".join(val) + "\n")
    return made["uri"], root, sorted(train), sorted(val)


def _masks(loader):
    return [b["mask"][0].copy() for b in loader]


def _expected(root, stems):
    return [np.asarray(Image.open(root / "SegmentationClass" / f"{s}.png")) for s in stems]


def test_split_file_and_stems_serve_the_listed_stems(voc, tmp_path):
    uri, root, train, val = voc
    by_file = ssdfeed.Loader(uri + "&split=ImageSets/Segmentation/train.txt", cache=False,
                             batch_size=1, workers=1)
    by_list = ssdfeed.Loader(uri, stems=list(reversed(train)), cache=False, batch_size=1,
                             workers=1)
    val_loader = ssdfeed.Loader(uri + "&split=ImageSets/Segmentation/val.txt", cache=False,
                                batch_size=1, workers=1)
    assert len(by_file) == len(by_list) == len(train) == 5
    assert len(val_loader) == len(val) == 3
    for got, want in zip(_masks(by_file), _expected(root, train)):
        assert np.array_equal(got, want)
    for got, want in zip(_masks(by_list), _expected(root, train)):
        assert np.array_equal(got, want)
    for got, want in zip(_masks(val_loader), _expected(root, val)):
        assert np.array_equal(got, want)


def test_split_errors_name_the_stem_or_the_argument(voc):
    uri, root, train, _ = voc
    with pytest.raises(Exception, match="stem 'nope' has no 'image' file"):
        ssdfeed.Loader(uri, stems=train + ["nope"], cache=False)
    with pytest.raises(ValueError, match="stems must be a list of str"):
        ssdfeed.Loader(uri, stems="2007_000032", cache=False)
    with pytest.raises(Exception, match="give one"):
        ssdfeed.Loader(uri + "&split=ImageSets/Segmentation/train.txt", stems=train,
                       cache=False)
