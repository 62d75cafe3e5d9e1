"""ssdfeed.torch batches inside torchvision's own training code.

Detection targets go through a step of torchvision's Faster R-CNN box head
(RoIHeads.select_training_samples: Matcher, balanced sampler, BoxCoder;
then fastrcnn_loss), the pure-PyTorch part of the model: torchvision counts
classes from 1 and trains box regression only for boxes labelled > 0, so
0-based labels train nothing there. The (images, targets) and (image, mask)
outputs are used as torchvision's detection and segmentation reference
loops use a DataLoader's batches.
"""

import numpy as np
import pytest

import ssdfeed

torch = pytest.importorskip("torch")
import ssdfeed.torch  # noqa: E402
from torchvision_util import import_torchvision  # noqa: E402


def _torchvision_detection():
    """(RoIHeads, fastrcnn_loss, GeneralizedRCNNTransform): plain PyTorch
    pieces of torchvision (see torchvision_util)."""
    roi_heads = import_torchvision("torchvision.models.detection.roi_heads")
    transform = import_torchvision("torchvision.models.detection.transform")
    return roi_heads.RoIHeads, roi_heads.fastrcnn_loss, transform.GeneralizedRCNNTransform


@pytest.fixture(scope="module")
def pedestrians(tmp_path_factory):
    """A one-class COCO dataset, as PennFudan (pedestrians) is."""
    d = tmp_path_factory.mktemp("pennfudan-like")
    return ssdfeed.make_dataset(str(d), format="coco", count=12, classes=1, min_side=160,
                                max_side=240)["uri"]


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    d = tmp_path_factory.mktemp("voc-like")
    return ssdfeed.make_dataset(str(d), format="voc", count=8, classes=3, min_side=96,
                                max_side=128)["uri"]


def _loader(uri, **kw):
    return ssdfeed.torch.Loader(
        uri, cache=False, prepare=ssdfeed.Prepare(resize_short=128),
        augment=ssdfeed.RandomResizedCrop(128, scale=(0.6, 1.0)), batch_size=4, seed=3,
        dtype="float32", layout="NCHW", pin_memory=False, **kw)


def _box_head_losses(targets, size=128, num_classes=2):
    """torchvision's Fast R-CNN training step on `targets`: proposals (the
    boxes shifted a few pixels, plus background boxes; torchvision adds the
    boxes themselves) matched, sampled and encoded by RoIHeads, then scored
    by a fixed linear head and put through fastrcnn_loss. Returns
    (loss_classifier, loss_box_reg, positive proposals)."""
    RoIHeads, fastrcnn_loss, _ = _torchvision_detection()
    heads = RoIHeads(None, None, None, fg_iou_thresh=0.5, bg_iou_thresh=0.5,
                     batch_size_per_image=64, positive_fraction=0.25, bbox_reg_weights=None,
                     score_thresh=0.05, nms_thresh=0.5, detections_per_img=100)
    background = torch.tensor([[0, 0, 16, 16], [size - 20, size - 20, size, size]], dtype=torch.float32)
    proposals = [torch.cat([t["boxes"] + 2.0, t["boxes"] - 1.5, background]) for t in targets]
    torch.manual_seed(0)  # the sampler's draw: the same for every target set
    proposals, _, labels, regression_targets = heads.select_training_samples(proposals, targets)
    torch.manual_seed(1)
    cls_head = torch.nn.Linear(4, num_classes)
    box_head = torch.nn.Linear(4, num_classes * 4)
    features = torch.cat(proposals) / size
    with torch.no_grad():
        loss_cls, loss_box = fastrcnn_loss(cls_head(features), box_head(features), labels,
                                           regression_targets)
    return float(loss_cls), float(loss_box), int(sum((lab > 0).sum() for lab in labels))


def test_detection_targets_train_torchvision_box_regression(pedestrians):
    """The PennFudan tutorial's targets label every pedestrian 1; ssdfeed's
    targets of the same crops must train torchvision's box head the same:
    with 0-based labels loss_box_reg is exactly 0 (every box is background)."""
    batch = next(iter(_loader(pedestrians)))
    targets = batch["targets"]
    assert sum(len(t["boxes"]) for t in targets) > 0
    tutorial = [{"boxes": t["boxes"].clone(),
                 "labels": torch.ones((len(t["boxes"]),), dtype=torch.int64)}
                for t in targets]  # PennFudanDataset: labels = torch.ones((num_objs,))

    loss_cls, loss_box, positives = _box_head_losses(targets)
    want_cls, want_box, want_positives = _box_head_losses(tutorial)
    assert want_positives > 0 and want_box > 0
    assert loss_box > 0
    assert positives == want_positives
    assert loss_box == want_box and loss_cls == want_cls
    for t, classes, k in zip(targets, batch["classes"], batch["num_boxes"]):
        assert t["labels"].dtype == torch.int64
        assert torch.equal(t["labels"], classes[:k] + 1)


def test_label_offset_zero_keeps_the_sources_classes(pedestrians):
    assert _loader(pedestrians).label_offset == 1
    batch = next(iter(_loader(pedestrians, label_offset=0)))
    for t, classes, k in zip(batch["targets"], batch["classes"], batch["num_boxes"]):
        assert torch.equal(t["labels"], classes[:k])
    with pytest.raises(ValueError, match="label_offset must be an int"):
        _loader(pedestrians, label_offset=True)


def test_detection_output_drops_into_the_reference_loop(pedestrians):
    """torchvision's references/detection train_one_epoch, up to the model."""
    _, _, GeneralizedRCNNTransform = _torchvision_detection()
    device = torch.device("cpu")
    loader = _loader(pedestrians, output="detection")
    as_dicts = list(_loader(pedestrians))
    seen = 0
    for (images, targets), d in zip(loader, as_dicts):
        images = list(image.to(device) for image in images)
        targets = [{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in t.items()}
                   for t in targets]
        assert len(images) == len(targets) == len(d["image"])
        for image, t, want in zip(images, targets, d["targets"]):
            assert image.shape == (3, 128, 128) and image.dtype == torch.float32
            assert t["boxes"].dtype == torch.float32 and t["boxes"].shape[1:] == (4,)
            assert t["labels"].dtype == torch.int64 and (t["labels"] >= 1).all()
            assert t["iscrowd"].dtype == torch.int64 and not t["iscrowd"].any()
            b = t["boxes"]
            assert torch.equal(t["area"], (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))
            assert all(torch.equal(t[k], want[k]) for k in want)
        # The model's first stage: resize + normalise images and boxes alike.
        transform = GeneralizedRCNNTransform(160, 200, [0.485, 0.456, 0.406],
                                             [0.229, 0.224, 0.225])
        image_list, resized = transform(images, targets)
        assert image_list.tensors.shape[0] == len(images)
        assert all(torch.allclose(r["boxes"], t["boxes"] * 160 / 128)
                   for r, t in zip(resized, targets))
        seen += len(images)
    assert seen == 12


def test_segmentation_output_drops_into_the_reference_loop(scenes):
    """torchvision's references/segmentation train_one_epoch: image and
    target to the device, model(image)["out"], cross_entropy with
    ignore_index=255 on int64 targets."""
    loader = _loader(scenes, output="segmentation")
    as_dicts = list(_loader(scenes))
    model = torch.nn.Conv2d(3, 4, 1)
    seen = 0
    for (image, target), d in zip(loader, as_dicts):
        image, target = image.to("cpu"), target.to("cpu")
        assert image.shape == (len(target), 3, 128, 128)
        assert target.dtype == torch.int64 and target.shape == (len(image), 128, 128)
        assert torch.equal(target, d["mask"].long())
        loss = torch.nn.functional.cross_entropy(model(image), target, ignore_index=255)
        loss.backward()
        assert torch.isfinite(loss)
        seen += len(image)
    assert seen == 8


def test_pairs_default_to_torchvision_tensors(pedestrians, scenes):
    """float32 CHW in [0, 1], as ToTensor gives; an explicit dtype wins."""
    for uri, output in ((pedestrians, "detection"), (scenes, "segmentation")):
        loader = ssdfeed.torch.Loader(uri, cache=False, prepare=ssdfeed.Prepare(resize=(64, 80)),
                                      batch_size=2, pin_memory=False, output=output)
        assert (loader.dtype, loader.layout) == ("float32", "NCHW")
        images, _ = next(iter(loader))
        assert images.dtype == torch.float32 and images.shape == (2, 3, 64, 80)
        assert 0 <= float(images.min()) and float(images.max()) <= 1
    loader = ssdfeed.torch.Loader(pedestrians, cache=False, prepare=ssdfeed.Prepare(resize=(64, 80)),
                                  batch_size=2, pin_memory=False, output="detection", dtype="uint8")
    assert next(iter(loader))[0].dtype == torch.uint8


def test_output_names_what_is_missing(pedestrians, scenes, tmp_path):
    cached = ssdfeed.cache([(np.zeros(3, np.float32), 0)] * 4, key="pairs", cache=str(tmp_path))
    with pytest.raises(ValueError, match="output='detection' needs a source of fields"):
        ssdfeed.torch.Loader(cached, batch_size=2, output="detection")
    with pytest.raises(ValueError, match=r"output='segmentation' needs an image and a mask "
                                         r"field; coco:.* has image \(image\), boxes"):
        _loader(pedestrians, output="segmentation")
    with pytest.raises(ValueError, match=r"output='detection' needs an image and a boxes "
                                         r"field; files:.* has image \(image\), mask \(mask\)"):
        _loader(scenes, output="detection")
    with pytest.raises(ValueError, match="output must be one of 'batch', 'detection', "
                                         "'segmentation', not 'pairs'"):
        _loader(scenes, output="pairs")
