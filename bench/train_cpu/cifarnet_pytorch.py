#!/usr/bin/python3
"""The Python peer of bench/train_cpu/cifarnet_throughput.sh: TF-Slim's CifarNet trained
with plain PyTorch (Debian's python3-torch 1.13, the same LibTorch as
slimtorch) and torchvision 0.14, the way a PyTorch user would write it:

  data:  a Dataset over CIFAR-10's binary files (cifar-10-batches-bin/
         data_batch_*.bin) held in memory as uint8 HWC arrays, yielding PIL
         images like torchvision.datasets.CIFAR10 (which reads the python
         pickles, not the binary files);
  input: torchvision transforms Pad(4) + RandomCrop(32) +
         RandomHorizontalFlip, then TF-Slim's cifarnet_preprocessing
         distortions, which torchvision's ColorJitter does not compute (it
         scales by a factor and clips), as one custom tensor transform:
         brightness + U[-63, 63], contrast (x - mean_c) * U[0.2, 1.8) +
         mean_c per channel, per-image standardization
         (x - mean) / max(std, 1 / sqrt(N)); no clipping, range 0..255 as
         TF's to_float;
  model: CifarNet with TF-Slim's initializers, the L2 weight decay of fc3/fc4
         as an explicit loss term (TF's l2_regularizer: wd * sum(w^2) / 2),
         dropout 0.5, plain SGD, softmax cross entropy;
  loop:  DataLoader(batch_size, shuffle=True, drop_last=True, num_workers).

--premade skips the DataLoader and steps on one pre-made batch (the first
batch_size training images, preprocessed once; random images without
--data_dir) to time the model step alone.

Prints one line:
  `python_pytorch images_per_sec=<float> steps=<n> secs=<s> ...`

  /usr/bin/python3 bench/train_cpu/cifarnet_pytorch.py --data_dir /tmp/cifar10_src \
      --steps 100 --warmup 10 --threads 2 --num_workers 1
"""
import argparse
import glob
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as T
from PIL import Image

RECORD_BYTES = 1 + 3 * 32 * 32


class CifarBinary(torch.utils.data.Dataset):
    """CIFAR-10 binary records of `files` in memory: data [N, 32, 32, 3]
    uint8 (HWC, as torchvision's CIFAR10.data), targets list of ints.
    __getitem__ returns (transform(PIL RGB image), label)."""

    def __init__(self, files, transform=None):
        raw = []
        for f in files:
            with open(f, "rb") as fh:
                b = fh.read()
            if len(b) % RECORD_BYTES:
                raise ValueError("%s: %d bytes, not a whole number of %d-byte "
                                 "records" % (f, len(b), RECORD_BYTES))
            raw.append(np.frombuffer(b, np.uint8).reshape(-1, RECORD_BYTES))
        raw = np.concatenate(raw)
        self.targets = raw[:, 0].astype(np.int64).tolist()
        self.data = np.ascontiguousarray(
            raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        img = Image.fromarray(self.data[i])
        if self.transform is not None:
            img = self.transform(img)
        return img, self.targets[i]


class TFDistortAndStandardize:
    """float [C, H, W] in 0..255 → TF-Slim cifarnet train distortions:
    random_brightness(63), random_contrast(0.2, 1.8),
    per_image_standardization. Random numbers from torch's generator (so
    DataLoader workers get distinct seeds)."""

    def __init__(self, max_delta=63.0, lower=0.2, upper=1.8):
        self.max_delta, self.lower, self.upper = max_delta, lower, upper

    def __call__(self, x):
        r = torch.rand(2)
        x = x + (r[0].item() * 2 - 1) * self.max_delta
        f = self.lower + r[1].item() * (self.upper - self.lower)
        mean_c = x.mean(dim=(1, 2), keepdim=True)
        x = (x - mean_c) * f + mean_c
        n = x.numel()
        mean = x.mean()
        std = torch.clamp(x.std(unbiased=False), min=1.0 / math.sqrt(n))
        return (x - mean) / std


def _to_float(x):
    return x.float()


def train_transform():
    return T.Compose([
        T.Pad(4),  # zeros, as tf.pad
        T.RandomCrop(32),
        T.RandomHorizontalFlip(),
        T.PILToTensor(),  # uint8 CHW; ToTensor would divide by 255
        _to_float,  # keeps 0..255, as TF's to_float
        TFDistortAndStandardize(),
    ])


def trunc_normal_(w, std):
    # TF's truncated_normal_initializer: redraw outside 2 standard deviations.
    nn.init.trunc_normal_(w, std=std, a=-2 * std, b=2 * std)


class CifarNet(nn.Module):
    """conv5x5x64 → pool → LRN → conv5x5x64 → LRN → pool → fc384 → dropout →
    fc192 → logits (nets/cifarnet.py)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 5, padding=2)
        self.conv2 = nn.Conv2d(64, 64, 5, padding=2)
        # tf.nn.lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75):
        # PyTorch divides alpha by the window size (9).
        self.lrn = nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0)
        self.fc3 = nn.Linear(8 * 8 * 64, 384)
        self.fc4 = nn.Linear(384, 192)
        self.logits = nn.Linear(192, num_classes)
        for conv in (self.conv1, self.conv2):
            trunc_normal_(conv.weight, 5e-2)
            nn.init.zeros_(conv.bias)
        for fc in (self.fc3, self.fc4):
            trunc_normal_(fc.weight, 0.04)
            nn.init.constant_(fc.bias, 0.1)
        trunc_normal_(self.logits.weight, 1 / 192.0)
        nn.init.zeros_(self.logits.bias)

    def forward(self, x):
        x = self.lrn(F.max_pool2d(F.relu(self.conv1(x)), 2))
        x = F.max_pool2d(self.lrn(F.relu(self.conv2(x))), 2)
        x = torch.flatten(x.permute(0, 2, 3, 1), 1)  # TF's NHWC flatten
        x = F.dropout(F.relu(self.fc3(x)), 0.5, self.training)
        x = F.relu(self.fc4(x))
        return self.logits(x)

    def regularization_loss(self, weight_decay):
        return weight_decay * 0.5 * (self.fc3.weight.square().sum() +
                                     self.fc4.weight.square().sum())


def batches(loader):
    """Endless batches, epoch after epoch."""
    while True:
        for b in loader:
            yield b


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data_dir", default="",
                   help="folder holding cifar-10-batches-bin/")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    # 1 was the best of 0, 1, 2 on the 2-core VM (2026-11-22, threads 2):
    # one worker overlaps the preprocessing with the step.
    p.add_argument("--num_workers", type=int, default=1,
                   help="DataLoader workers (0: load in the main process)")
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--weight_decay", type=float, default=0.004)
    p.add_argument("--premade", action="store_true",
                   help="step on one pre-made batch, no DataLoader")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    files = []
    if a.data_dir:
        files = sorted(glob.glob(os.path.join(
            a.data_dir, "cifar-10-batches-bin", "data_batch_*.bin")))
        if not files:
            p.error("no cifar-10-batches-bin/data_batch_*.bin under %s"
                    % a.data_dir)
    elif not a.premade:
        p.error("--data_dir is required without --premade")

    if a.premade:
        if files:
            ds = CifarBinary(files[:1], train_transform())
            items = [ds[i] for i in range(a.batch_size)]
            x = torch.stack([im for im, _ in items])
            y = torch.tensor([t for _, t in items], dtype=torch.int64)
        else:
            x = torch.randn(a.batch_size, 3, 32, 32)
            y = torch.randint(0, 10, (a.batch_size,))
        source = iter(lambda: (x, y), None)
    else:
        ds = CifarBinary(files, train_transform())
        loader = torch.utils.data.DataLoader(
            ds, batch_size=a.batch_size, shuffle=True, drop_last=True,
            num_workers=a.num_workers,
            persistent_workers=a.num_workers > 0)
        source = batches(loader)

    net = CifarNet()
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=a.learning_rate)

    def step():
        images, labels = next(source)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(images), labels)
        if a.weight_decay:
            loss = loss + net.regularization_loss(a.weight_decay)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    secs = time.perf_counter() - t0
    print("python_pytorch images_per_sec=%.1f steps=%d secs=%.2f "
          "num_workers=%s threads=%d batch=%d last_loss=%.4f"
          % (a.steps * a.batch_size / secs, a.steps, secs,
             "premade" if a.premade else a.num_workers, a.threads,
             a.batch_size, loss))


if __name__ == "__main__":
    main()
