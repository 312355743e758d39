"""Batch norm in training on a GPU, forward + backward, per ResNet-50 layer
shape (batch 256, bf16 activations, float32 scale / offset, channels-last):
LibTorch's native kernels (what aten::batch_norm picks for bf16) against
cuDNN's (torch.cudnn_batch_norm), to see whether calling cuDNN directly is
worth it (issue 13). PyTorch on the GPU machine:

    python3 bench/train_gpu/batch_norm_gpu.py [--batch 256] [--iters 20]
"""
import argparse
import time

import torch

# (channels, size, how many of ResNet-50 v1's 53 batch norms have it)
SHAPES = [(64, 112, 1), (64, 56, 6), (256, 56, 4), (128, 56, 1), (128, 28, 7),
          (512, 28, 5), (256, 28, 1), (256, 14, 11), (1024, 14, 7),
          (512, 14, 1), (512, 7, 5), (2048, 7, 4)]


def timed(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    dev = torch.device("cuda")
    totals = {"native": 0.0, "cudnn": 0.0, "native+relu": 0.0}
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    for c, s, count in SHAPES:
        x = torch.randn(args.batch, c, s, s, device=dev, dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
        w = torch.ones(c, device=dev, requires_grad=True)
        b = torch.zeros(c, device=dev, requires_grad=True)
        rm = torch.zeros(c, device=dev)
        rv = torch.ones(c, device=dev)
        g = torch.randn_like(x)

        def native():
            y = torch.batch_norm(x, w, b, rm, rv, True, 0.003, 0.001, False)
            y.backward(g)

        def native_relu():
            y = torch.batch_norm(x, w, b, rm, rv, True, 0.003, 0.001, False)
            torch.relu_(y)
            y.backward(g)

        def cudnn():
            y = torch.cudnn_batch_norm(x, w, b, rm, rv, True, 0.003, 0.001)[0]
            y.backward(g)

        row = {"native": timed(native, args.iters),
               "native+relu": timed(native_relu, args.iters)}
        try:
            row["cudnn"] = timed(cudnn, args.iters)
        except Exception as e:  # noqa: BLE001 - report and go on
            row["cudnn"] = float("nan")
            print(f"  cudnn_batch_norm failed on {c}x{s}x{s}: {str(e)[:160]}")
        for k in totals:
            totals[k] += count * row[k]
        print(f"{c:5d} x {s:3d}^2 x{count:2d}: native {row['native'] * 1e3:7.3f} ms, "
              f"native+relu {row['native+relu'] * 1e3:7.3f}, "
              f"cudnn {row['cudnn'] * 1e3:7.3f}")
    print("batch norm per ResNet-50 step (fwd+bwd, 53 layers): " +
          ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in totals.items()))


if __name__ == "__main__":
    main()
