#!/usr/bin/python3
"""The Python peer of bench/deploy/deploy_scaling.sh: data-parallel training with
PyTorch's DistributedDataParallel over torch.distributed's Gloo backend, the
way a PyTorch user writes it (Debian's python3-torch 1.13, the LibTorch
slimtorch links).

  model:  cifarnet (TF-Slim's CifarNet, bench/train_cpu/cifarnet_pytorch.py) or
          resnet_v1_50 (torchvision's resnet50: the same 25.5 M parameters
          and layer shapes as TF-Slim's resnet_v1_50; torchvision strides
          the 3x3 convolutions at the start of each block, TF-Slim at the
          end, which gives TF-Slim's a little more arithmetic);
  input:  one pre-made random batch per process (the net and the gradient
          exchange alone, no data path);
  step:   forward, softmax cross entropy, backward (DDP all-reduces
          bucketed gradients during backward), plain SGD.
--world_size=1 trains without DDP (a user's single-process script);
--world_size=N spawns N processes meeting on 127.0.0.1 (env://), each with
--threads intra-op threads and --batch_size examples.

Prints one line from rank 0:
  ddp_peer model=<m> world_size=<n> steps_per_sec=<f> images_per_sec=<f>
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

# The CifarNet model is the one of bench/train_cpu/cifarnet_pytorch.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "train_cpu"))


def make_model(name):
  if name == "cifarnet":
    from cifarnet_pytorch import CifarNet
    return CifarNet(10)
  if name == "resnet_v1_50":
    import torchvision
    return torchvision.models.resnet50(num_classes=10)
  raise SystemExit("unknown --model " + name)


def run(rank, args, port):
  torch.set_num_threads(args.threads)
  torch.manual_seed(rank)
  model = make_model(args.model)
  model.train()
  if args.world_size > 1:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    model = torch.nn.parallel.DistributedDataParallel(model)
  opt = torch.optim.SGD(model.parameters(), lr=0.01)
  images = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
  labels = torch.randint(0, 10, (args.batch_size,))

  def step():
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    return loss

  for _ in range(args.warmup):
    step()
  if args.world_size > 1:
    dist.barrier()
  start = time.perf_counter()
  for _ in range(args.steps):
    step()
  if args.world_size > 1:
    dist.barrier()
  secs = time.perf_counter() - start
  if rank == 0:
    sps = args.steps / secs
    print("ddp_peer model=%s world_size=%d steps_per_sec=%.3f images_per_sec=%.1f"
          % (args.model, args.world_size, sps,
             sps * args.batch_size * args.world_size), flush=True)
  if args.world_size > 1:
    dist.destroy_process_group()


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--model", default="cifarnet")
  p.add_argument("--world_size", type=int, default=1)
  p.add_argument("--batch_size", type=int, default=64, help="per process")
  p.add_argument("--image_size", type=int, default=32)
  p.add_argument("--threads", type=int, default=2, help="per process")
  p.add_argument("--steps", type=int, default=50)
  p.add_argument("--warmup", type=int, default=10)
  args = p.parse_args()
  if args.world_size == 1:
    run(0, args, 0)
    return
  s = socket.socket()
  s.bind(("127.0.0.1", 0))
  port = s.getsockname()[1]
  s.close()
  mp.spawn(run, args=(args, port), nprocs=args.world_size)


if __name__ == "__main__":
  main()
