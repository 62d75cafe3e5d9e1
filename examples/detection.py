"""Object detection with ssdfeed: a COCO-style dataset (images + one json),
boxes cropped, flipped and dropped with their image's augmentation, served
as torchvision's detection targets.

    python examples/detection.py [DIR] [EPOCHS]

Writes a COCO-style dataset (images/ + annotations.json, colour-coded
scenes) into DIR the first time (default /tmp/ssdfeed-coco), then trains.
With torchvision installed it trains torchvision's Faster R-CNN (MobileNet
backbone, no pretrained weights) on a few batches; without it, a small
network that learns which classes each image holds, from the same targets.
The loop is torchvision's detection reference's: `for images, targets in
loader`, targets labelled from 1 (0 is the background), as its models expect.
"""

import sys
import time

import torch

import ssdfeed
import ssdfeed.torch

data = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ssdfeed-coco"
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
CLASSES = 5

made = ssdfeed.make_dataset(data, format="coco", count=256, classes=CLASSES, min_side=160,
                            max_side=240)
uri = made["uri"]  # coco:DIR/images?annotations=DIR/annotations.json

loader = ssdfeed.torch.Loader(
    uri, cache=True,
    prepare=ssdfeed.Prepare(resize_short=160),
    # Boxes get the image's crop and flip; those less than half inside it are dropped.
    augment=ssdfeed.RandomResizedCrop(160, scale=(0.5, 1.0), min_box_visible=0.5),
    batch_size=8, shuffle=True, seed=0, dtype="float32", layout="NCHW",
    output="detection")  # (images, targets): [{"boxes", "labels", "area", "iscrowd"}, ...]
print(f"{uri}: fields {loader.fields}, {len(loader)} batches per epoch")

try:
    import torchvision
except (ImportError, RuntimeError):  # absent, or built for another torch
    torchvision = None

if torchvision is not None:
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=CLASSES + 1)  # + background

    def step(images, targets):
        # Labels are 1..CLASSES already (label_offset=1, the default).
        return sum(model(list(images), targets).values())

    steps_per_epoch = 4  # on CPU a few steps show it runs; on a GPU train on all
else:
    steps_per_epoch = None
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, CLASSES))
    model = net

    def step(images, targets):
        # Which classes each image holds, from the same per-image targets.
        present = torch.zeros(len(targets), CLASSES)
        for i, t in enumerate(targets):
            present[i, t["labels"] - 1] = 1  # labels 1..CLASSES
        return torch.nn.functional.binary_cross_entropy_with_logits(net(images), present)

model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for epoch in range(epochs):
    loader.set_epoch(epoch)
    t0, seen, boxes, total, steps = time.perf_counter(), 0, 0, 0.0, 0
    for images, targets in loader:
        if steps == steps_per_epoch:
            break
        loss = step(images, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += len(images)
        boxes += sum(len(t["boxes"]) for t in targets)
        total += loss.item()
        steps += 1
    print(f"epoch {epoch}: mean loss {total / max(1, steps):.3f}, {seen} images with {boxes} boxes, "
          f"{seen / (time.perf_counter() - t0):.0f} images/s")
