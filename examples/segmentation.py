"""Semantic segmentation with ssdfeed: image and mask pairs, cached once,
served with one random crop and flip for both, into a small fully
convolutional network in PyTorch.

    python examples/segmentation.py [DIR] [EPOCHS]

Writes a Pascal VOC-style dataset (JPEGImages/ + SegmentationClass/ PNGs of
class ids, colour-coded scenes) into DIR the first time (default
/tmp/ssdfeed-voc), then trains on it. The same loop works on real VOC,
ADE20K or Cityscapes: only the URI changes (docs/python.md, "Sample fields").
"""

import sys
import time

import torch

import ssdfeed
import ssdfeed.torch

data = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ssdfeed-voc"
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
CLASSES = 5  # scene classes; 0 is the background
IGNORE = 255  # VOC's "void" (object borders): no loss there

# Deterministic: writing it again gives the same files and the same URI.
made = ssdfeed.make_dataset(data, format="voc", count=256, classes=CLASSES, min_side=160,
                            max_side=240)
uri = made["uri"]  # files:DIR?image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png

loader = ssdfeed.torch.Loader(
    uri, cache=True,
    prepare=ssdfeed.Prepare(resize_short=144),          # image antialiased, mask nearest: cached
    augment=ssdfeed.RandomResizedCrop(128, scale=(0.3, 1.0)),  # the same crop + flip for both
    batch_size=16, shuffle=True, seed=0,
    dtype="float32", layout="NCHW", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
    output="segmentation")  # (images, masks), masks int64: torchvision's reference loop
print(f"{uri}: fields {loader.fields}, {len(loader)} batches per epoch")

model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(16, 32, 3, padding=2, dilation=2), torch.nn.ReLU(),
    torch.nn.Conv2d(32, 32, 3, padding=4, dilation=4), torch.nn.ReLU(),
    torch.nn.Conv2d(32, CLASSES + 1, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(epochs):
    loader.set_epoch(epoch)
    t0, seen, total_loss, right, counted = time.perf_counter(), 0, 0.0, 0, 0
    for images, masks in loader:               # (N, 3, 128, 128) float32, (N, 128, 128) int64
        masks[masks > CLASSES] = IGNORE
        logits = model(images)
        loss = torch.nn.functional.cross_entropy(logits, masks, ignore_index=IGNORE)
        opt.zero_grad()
        loss.backward()
        opt.step()
        valid = masks != IGNORE
        right += int((logits.argmax(1) == masks)[valid].sum())
        counted += int(valid.sum())
        seen += len(images)
        total_loss += loss.item() * len(images)
    s = loader.stats()
    print(f"epoch {epoch}: loss {total_loss / seen:.3f}, pixel accuracy {right / counted:.3f}, "
          f"{seen / (time.perf_counter() - t0):.0f} images/s, cache hits {s['cache_hits']}")
