"""A small CNN trained on the generated dataset with ssdfeed feeding PyTorch.

    ssdfeed make-dataset /tmp/ssdfeed-data --count 2000
    python examples/train_torch.py /tmp/ssdfeed-data
"""

import sys
import time

import torch

import ssdfeed
import ssdfeed.torch

data = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ssdfeed-data"
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 2

# The only lines that differ from a torchvision ImageFolder + DataLoader loop:
loader = ssdfeed.torch.Loader(
    f"folder:{data}", cache=True,                      # $SSDFEED_CACHE or ~/.cache/ssdfeed
    prepare=ssdfeed.Prepare(resize_short=144),         # decoded + resized once, cached
    augment=ssdfeed.RandomResizedCrop(128, flip=True),  # fresh every epoch
    batch_size=64, shuffle=True, seed=0,
    dtype="float32", layout="NCHW", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))

model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, stride=2), torch.nn.ReLU(),
    torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(epochs):
    loader.set_epoch(epoch)
    t0, seen, total_loss = time.perf_counter(), 0, 0.0
    for images, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += len(labels)
        total_loss += loss.item() * len(labels)
    s = loader.stats()
    print(f"epoch {epoch}: loss {total_loss / seen:.3f}, {seen / (time.perf_counter() - t0):.0f} "
          f"images/s, cache hits {s['cache_hits']}, waited {s['wait_seconds']:.2f} s")
