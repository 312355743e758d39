#!/usr/bin/python3
"""torchvision peer of build/input_bench: JPEG files -> PIL decode ->
torchvision transforms -> DataLoader batches, timed.

  /usr/bin/python3 bench/input/photo_input_torchvision.py --data_dir=DIR/files \
      --preprocessing_name=inception --is_training=true \
      --num_preprocessing_threads=2 --warmup_batches=5 --batches=40
prints as its last line images_per_sec=<float>.

The pipeline a PyTorch user writes for ImageNet-style folders:
  torchvision.datasets.ImageFolder(data_dir) (PIL open + convert('RGB'))
  -> transforms, by --preprocessing_name and --is_training:
     inception train: RandomResizedCrop(size) + RandomHorizontalFlip +
                      ColorJitter(brightness=32/255, saturation=0.5) +
                      ToTensor + Normalize(0.5, 0.5)  (range [-1, 1])
     vgg train:       resize the shorter side to U{256..512} + RandomCrop(size)
                      + RandomHorizontalFlip + ToTensor + VGG's mean
                      subtraction on 0..255 (as TF-Slim's vgg_preprocessing)
     eval (both):     Resize(256) + CenterCrop(size) + ToTensor + the mode's
                      Normalize
  -> DataLoader(batch_size, shuffle (an endless sampler of permutations),
     drop_last, num_workers=threads, persistent workers, prefetch_factor 2).
Threads: num_workers = --num_preprocessing_threads worker processes, each with
torch.set_num_threads(1) (DataLoader does that too); the main process only
receives batches. Note torchvision's ColorJitter scales brightness by a factor
in [1 - b, 1 + b] where TF adds a delta in [-b, b]: the same kind and amount
of work, not the same distribution.
"""

import argparse
import os
import random
import sys
import time

import torch
from torch.utils.data import DataLoader, Sampler
import torchvision
from torchvision import transforms
from torchvision.transforms import functional as F

_VGG_MEAN = [123.68, 116.78, 103.94]  # TF-Slim's _R_MEAN, _G_MEAN, _B_MEAN


def parse_bool(text):
  if text.lower() in ('true', '1', 'yes'):
    return True
  if text.lower() in ('false', '0', 'no'):
    return False
  raise argparse.ArgumentTypeError('expected true or false, got %r' % text)


def parse_args(argv):
  p = argparse.ArgumentParser(description='torchvision photo input benchmark')
  p.add_argument('--data_dir', required=True,
                 help='a folder of class folders of images')
  p.add_argument('--preprocessing_name', choices=['inception', 'vgg'],
                 default='inception')
  p.add_argument('--is_training', type=parse_bool, default=True)
  p.add_argument('--image_size', type=int, default=224)
  p.add_argument('--batch_size', type=int, default=32)
  p.add_argument('--num_preprocessing_threads', type=int, default=1)
  p.add_argument('--warmup_batches', type=int, default=5)
  p.add_argument('--batches', type=int, default=40)
  return p.parse_args(argv)


class RandomShorterSide:
  """Resizes the shorter side to a size drawn from [low, high] (bilinear)."""

  def __init__(self, low, high):
    self.low, self.high = low, high

  def __call__(self, img):
    return F.resize(img, random.randint(self.low, self.high))


class EndlessShuffle(Sampler):
  """Indices of one random permutation after another, forever."""

  def __init__(self, n):
    super().__init__(None)
    self.n = n

  def __iter__(self):
    while True:
      yield from torch.randperm(self.n).tolist()


def make_transform(name, is_training, size):
  if name == 'inception':
    normalize = transforms.Normalize([0.5] * 3, [0.5] * 3)
  else:  # x * 255 - mean, as TF-Slim's vgg_preprocessing on uint8 values.
    normalize = transforms.Normalize([m / 255 for m in _VGG_MEAN],
                                     [1 / 255] * 3)
  if not is_training:
    steps = [transforms.Resize(256), transforms.CenterCrop(size)]
  elif name == 'inception':
    steps = [transforms.RandomResizedCrop(size),
             transforms.RandomHorizontalFlip(),
             transforms.ColorJitter(brightness=32 / 255, saturation=0.5)]
  else:
    steps = [RandomShorterSide(256, 512), transforms.RandomCrop(size),
             transforms.RandomHorizontalFlip()]
  return transforms.Compose(steps + [transforms.ToTensor(), normalize])


def cpu_time(pids):
  """CPU seconds of this process and of the processes pids (Linux)."""
  total = time.process_time()
  ticks = os.sysconf('SC_CLK_TCK')
  for pid in pids:
    with open('/proc/%d/stat' % pid) as f:
      fields = f.read().rsplit(')', 1)[1].split()
    total += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
  return total


def init_worker(_):
  torch.set_num_threads(1)


def main(argv):
  args = parse_args(argv)
  dataset = torchvision.datasets.ImageFolder(
      args.data_dir,
      make_transform(args.preprocessing_name, args.is_training,
                     args.image_size))
  workers = args.num_preprocessing_threads
  loader = DataLoader(dataset, batch_size=args.batch_size,
                      sampler=EndlessShuffle(len(dataset)), drop_last=True,
                      num_workers=workers, persistent_workers=workers > 0,
                      worker_init_fn=init_worker)
  torch.set_num_threads(1)
  batches = iter(loader)
  for _ in range(args.warmup_batches):
    images, _ = next(batches)
  expected = (args.batch_size, 3, args.image_size, args.image_size)
  pids = [w.pid for w in getattr(batches, '_workers', [])]
  start, cpu_start = time.perf_counter(), cpu_time(pids)
  for _ in range(args.batches):
    images, _ = next(batches)
  seconds = time.perf_counter() - start
  cpu_seconds = cpu_time(pids) - cpu_start
  if tuple(images.shape) != expected:
    sys.exit('photo_input_torchvision: batch shape %s, expected %s' %
             (tuple(images.shape), expected))
  # CPU seconds (this process and its workers) / wall seconds: how many
  # cores the pipeline kept busy.
  print('torchvision %s is_training=%s workers=%d: %d batches of %d in '
        '%.3f s, cores busy %.2f' % (args.preprocessing_name,
                                     args.is_training, workers, args.batches,
                                     args.batch_size, seconds,
                                     cpu_seconds / seconds))
  print('images_per_sec=%.2f' % (args.batches * args.batch_size / seconds))


if __name__ == '__main__':
  main(sys.argv[1:])
