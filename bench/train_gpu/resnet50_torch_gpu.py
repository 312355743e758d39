#!/usr/bin/env python3
"""PyTorch-Python peer for the GPU training step of TF-Slim's resnet_v1_50.

The same net as slimtorch's resnet_v1_50 (TF-Slim's layout: the stride of a
block in its last unit, on the 3x3 convolution, SAME padding; batch norm
decay 0.997, epsilon 1e-5; 1001 classes), trained with momentum 0.9 and an L2
weight decay of 1e-4 on the convolution weights (TF-Slim's regulariser: its
gradient wd * w, i.e. SGD's weight_decay on those tensors), bf16 autocast,
channels-last, on one synthetic batch kept on the GPU, so that the net is
measured alone. Modes: eager (the PyTorch recipe: AMP + channels_last), and
torch.compile (default mode). Prints one line per mode:

  torch <mode> batch <B>: <ms>/step, <images/s> images/s

  python3 bench/train_gpu/resnet50_torch_gpu.py --batch_size 256 --steps 50 --modes eager,compile
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvBn(nn.Module):
    """slim.conv2d + batch_norm (+ ReLU): SAME padding, as resnet_utils."""

    def __init__(self, cin, cout, k, stride=1, relu=True):
        super().__init__()
        self.k, self.stride, self.relu = k, stride, relu
        # conv2d_same: stride 1 pads symmetrically; stride > 1 pads explicitly
        # by (k - 1) / 2 on each side and runs VALID.
        self.conv = nn.Conv2d(cin, cout, k, stride, padding=(k - 1) // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.003)

    def forward(self, x):
        x = self.bn(self.conv(x))
        return F.relu(x) if self.relu else x


class Bottleneck(nn.Module):
    def __init__(self, cin, depth, bottleneck, stride):
        super().__init__()
        self.stride = stride
        self.shortcut = None if cin == depth else ConvBn(cin, depth, 1, stride, relu=False)
        self.conv1 = ConvBn(cin, bottleneck, 1)
        self.conv2 = ConvBn(bottleneck, bottleneck, 3, stride)
        self.conv3 = ConvBn(bottleneck, depth, 1, relu=False)

    def forward(self, x):
        if self.shortcut is not None:
            s = self.shortcut(x)
        elif self.stride > 1:
            s = x[:, :, :: self.stride, :: self.stride]  # subsample
        else:
            s = x
        return F.relu(s + self.conv3(self.conv2(self.conv1(x))))


class ResNetV1_50(nn.Module):
    def __init__(self, num_classes=1001):
        super().__init__()
        self.conv1 = ConvBn(3, 64, 7, 2)
        units = []
        cin = 64
        for base, n, stride in ((64, 3, 2), (128, 4, 2), (256, 6, 2), (512, 3, 1)):
            for i in range(n):
                units.append(Bottleneck(cin, base * 4, base, stride if i == n - 1 else 1))
                cin = base * 4
        self.units = nn.Sequential(*units)
        self.logits = nn.Conv2d(cin, num_classes, 1)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 3, 2, padding=1)
        x = self.units(x)
        x = x.mean((2, 3), keepdim=True)
        return self.logits(x).flatten(1)


def run(mode, args):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = ResNetV1_50().to(dev).to(memory_format=torch.channels_last)
    decay = [p for n, p in model.named_parameters() if n.endswith("conv.weight") or n == "logits.weight"]
    other = [p for n, p in model.named_parameters() if not (n.endswith("conv.weight") or n == "logits.weight")]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4}, {"params": other, "weight_decay": 0}],
                          lr=0.1, momentum=0.9, foreach=True)
    images = (torch.rand(args.batch_size, 3, 224, 224, device=dev) * 2 - 1).contiguous(
        memory_format=torch.channels_last)
    labels = torch.randint(0, 1001, (args.batch_size,), device=dev)

    def step(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    fn = step
    if mode == "compile":
        fn = torch.compile(step)
    t0 = time.time()
    for _ in range(args.warmup):
        loss = fn(images, labels)
    torch.cuda.synchronize()
    warm = time.time() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.steps):
        loss = fn(images, labels)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / args.steps
    print(f"torch {mode} batch {args.batch_size}: {ms:.2f} ms/step, "
          f"{args.batch_size * 1000 / ms:.0f} images/s (warm-up {warm:.1f} s, loss {loss.item():.3f})",
          flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--modes", default="eager,compile")
    args = p.parse_args()
    torch.backends.cudnn.benchmark = True
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    for mode in args.modes.split(","):
        try:
            run(mode, args)
        except Exception as e:  # a mode that fails is reported, the others run
            print(f"torch {mode}: failed: {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
