#!/usr/bin/python3
"""The Python peer of bench/train_cpu/lenet_throughput.sh: TF-Slim's LeNet trained with
plain PyTorch (Debian's python3-torch, the same LibTorch 1.13 as slimtorch),
data held in memory as one preprocessed float tensor, SGD, batch 50.

Prints one line: `python_pytorch images_per_sec=<float> steps=<n> secs=<s>`.

  /usr/bin/python3 bench/train_cpu/lenet_pytorch.py --idx_dir /usr/share/datasets/fashion-mnist \
      --steps 300 --warmup 30 --threads 2
"""
import argparse
import gzip
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class LeNet(nn.Module):
    """conv5x5x32 SAME → pool → conv5x5x64 → pool → fc1024 → dropout → fc10."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc3 = nn.Linear(7 * 7 * 64, 1024)
        self.fc4 = nn.Linear(1024, num_classes)
        for m in (self.conv1, self.conv2, self.fc3, self.fc4):
            nn.init.trunc_normal_(m.weight, std=0.1, a=-0.2, b=0.2)
            nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x.permute(0, 2, 3, 1), 1)
        x = F.dropout(F.relu(self.fc3(x)), 0.5, self.training)
        return self.fc4(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--idx_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--batch_size", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    images = read_idx(a.idx_dir + "/train-images-idx3-ubyte.gz")
    labels = read_idx(a.idx_dir + "/train-labels-idx1-ubyte.gz")
    x = (torch.from_numpy(images.copy()).float().sub_(128).div_(128)).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    net = LeNet()
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    n = x.shape[0]
    perm = torch.randperm(n)
    pos = 0

    def step():
        nonlocal pos, perm
        if pos + a.batch_size > n:
            perm, pos = torch.randperm(n), 0
        idx = perm[pos:pos + a.batch_size]
        pos += a.batch_size
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    secs = time.perf_counter() - t0
    print("python_pytorch images_per_sec=%.1f steps=%d secs=%.2f"
          % (a.steps * a.batch_size / secs, a.steps, secs))


if __name__ == "__main__":
    main()
