"""torchvision tv_tensors in ssdfeed.cache items: the detection tutorial's
dataset returns an Image and a target of BoundingBoxes, Mask and labels.
They come back as the same classes with their metadata, rebuilt from a
fixed list of kinds and only where torchvision.tv_tensors is loaded."""

import os
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from test_field_geometry import _torchvision  # noqa: E402

import ssdfeed  # noqa: E402
import ssdfeed.torch  # noqa: E402
from ssdfeed import _items  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def tv():
    return _torchvision()[1]


class Detection(torch.utils.data.Dataset):
    """Items as torchvision's TorchVision Object Detection tutorial gives them."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        t = tv()
        g = torch.Generator().manual_seed(i)
        img = t.Image(torch.randint(0, 256, (3, 20 + i, 30), dtype=torch.uint8, generator=g))
        n = i % 3 + 1
        boxes = t.BoundingBoxes(torch.rand(n, 4, generator=g) * 20, format="XYWH",
                                canvas_size=(20 + i, 30))
        masks = t.Mask(torch.randint(0, 2, (n, 20 + i, 30), dtype=torch.uint8, generator=g))
        target = {"boxes": boxes, "masks": masks, "labels": torch.arange(n),
                  "image_id": i, "area": boxes[:, 2] * boxes[:, 3]}
        return img, target


def same_tv(a, b):
    assert type(a) is type(b), (type(a), type(b))
    assert a.dtype == b.dtype and torch.equal(a.as_subclass(torch.Tensor),
                                              b.as_subclass(torch.Tensor))
    if isinstance(b, tv().BoundingBoxes):
        assert a.format == b.format and tuple(a.canvas_size) == tuple(b.canvas_size)


def same_item(got, want):
    same_tv(got[0], want[0])
    assert got[1].keys() == want[1].keys()
    for k in ("boxes", "masks"):
        same_tv(got[1][k], want[1][k])
    assert type(got[1]["labels"]) is torch.Tensor and torch.equal(got[1]["labels"],
                                                                  want[1]["labels"])
    assert got[1]["image_id"] == want[1]["image_id"]


def test_detection_items_keep_their_tv_tensor_classes_and_metadata(tmp_path):
    ds = Detection()
    cached = ssdfeed.cache(ds, cache=str(tmp_path / "c"))
    for i in range(len(ds)):
        same_item(cached[i], ds[i])  # computed and stored
    again = ssdfeed.cache(Detection(), cache=str(tmp_path / "c"))
    for i in range(len(ds)):
        same_item(again[i], ds[i])  # read back from the entry
    assert again.stats()["cache_hits"] == len(ds), again.stats()


def test_in_dataloader_workers_with_the_tutorials_collate(tmp_path):
    # The workers' batches are unpickled here, which imports torchvision in
    # this process: import it first, through the CPU-torch workaround, as a
    # user's script has it imported, and not only when an earlier test did.
    tv()
    ds = Detection()
    cached = ssdfeed.cache(ds, cache=str(tmp_path / "c"))
    loader = torch.utils.data.DataLoader(cached, batch_size=2, num_workers=2,
                                         multiprocessing_context="fork",
                                         collate_fn=lambda b: tuple(zip(*b)))
    got = [x for imgs, targets in loader for x in zip(imgs, targets)]
    for i, item in enumerate(got):
        same_item(item, ds[i])


def test_every_kind_round_trips():
    t = tv()
    items = [t.Video(torch.zeros(2, 3, 4, 5, dtype=torch.uint8)),
             t.BoundingBoxes([[10.0, 20.0, 4.0, 3.0, 30.0]], format="CXCYWHR",
                             canvas_size=(50, 60)),
             t.Mask(torch.ones(4, 4, dtype=torch.bool)), t.Image(torch.rand(1, 3, 3))]
    if hasattr(t, "KeyPoints"):
        items.append(t.KeyPoints([[1.0, 2.0], [3.0, 4.0]], canvas_size=(8, 9)))
    for x in items:
        got = _items.decode(_items.encode(x))
        same_tv(got, x)
        if hasattr(t, "KeyPoints") and isinstance(x, t.KeyPoints):
            assert tuple(got.canvas_size) == (8, 9)


def test_the_fast_path_batches_them_as_dataloaders_default_collate(tmp_path):
    """DataLoader's default collate stacks tv_tensors into plain tensors;
    the C++ loader gives the same."""
    ds = Detection()
    cached = ssdfeed.cache(ImagesOnly(ds), cache=str(tmp_path / "c"), key="images")
    batch = next(iter(ssdfeed.torch.Loader(cached, batch_size=2)))
    want = torch.utils.data.default_collate([ImagesOnly(ds)[0], ImagesOnly(ds)[1]])
    assert type(batch) is torch.Tensor and torch.equal(batch, want)


class ImagesOnly(torch.utils.data.Dataset):
    """One size of image (stackable)."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return tv().Image(self.ds[0][0] + i)


DECODE_WITHOUT_TORCHVISION = """
import pickle, sys, ssdfeed
from ssdfeed import _items
try:
    _items.decode(pickle.load(open(sys.argv[1], "rb")))
    print("decoded")
except ssdfeed.ItemFormatError as e:
    print("refused:", e)
print("torchvision loaded:", any(m.startswith("torchvision") for m in sys.modules))
"""


def test_not_rebuilt_where_torchvision_is_not_loaded(tmp_path):
    """A cached item names tv_tensors: the reading process is not made to
    import torchvision for it; the item is refused, saying what to import."""
    path = tmp_path / "fields.pickle"
    with open(path, "wb") as f:
        pickle.dump(_items.encode(Detection()[1]), f)
    r = subprocess.run([sys.executable, "-c", DECODE_WITHOUT_TORCHVISION, str(path)],
                       capture_output=True, text=True, cwd=HERE)
    assert r.returncode == 0, r.stderr
    assert "refused: " in r.stdout and "torchvision.tv_tensors is not loaded" in r.stdout
    assert "torchvision loaded: False" in r.stdout


def test_planted_tv_kinds_and_formats_are_refused():
    tv()
    fields = _items.encode(tv().BoundingBoxes([[1, 2, 3, 4]], format="XYXY", canvas_size=(9, 9)))
    text = bytes(fields[0][2])
    for old, new in [(b'"tv":"BoundingBoxes"', b'"tv":"TVTensor"'),
                     (b'"fmt":"XYXY"', b'"fmt":"__class__"'),
                     (b'"cs":[9,9]', b'"cs":[9]')]:
        assert old in text
        bad = [(fields[0][0], fields[0][1], text.replace(old, new))] + fields[1:]
        with pytest.raises(ssdfeed.ItemFormatError):
            _items.decode(bad)
