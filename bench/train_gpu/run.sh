#!/usr/bin/env bash
# Training on a GPU, against its peers: the entry script of bench/train_gpu/.
#
#   bench/train_gpu/run.sh [PHASE...]    # default: tutorial resnet full compile
#   bench/train_gpu/run.sh tutorial_speed
#
# Phases tutorial, resnet, full, profile, jpeg, bn, compile: gpu_step_speed.sh
# (see its header): the CIFAR-10 tutorial recipe's step (eager, captured,
# synthetic), TF-Slim's resnet_v1_50 at 224 in bf16 against PyTorch-Python
# eager and torch.compile (resnet50_torch_gpu.py), the recipe run whole, the
# streaming JPEG path, a kernel profile, batch norm alone (batch_norm_gpu.py).
# tutorial_speed: cifar10_tutorial_speed.sh, the tutorial recipe's step with
# the whole tool on whatever device there is (DATASET_DIR, STEPS, WARMUP,
# CLONE_ON_CPU=1 for the CPU).
# Rows go to bench/results/train_gpu.csv (machine: the GPU's name); knobs:
# BIN / BUILD_DIR, DATASET_DIR (CIFAR-10 TFRecords), PHOTO_DIR, OUT, BUDGET,
# PYTHON, TUTORIAL_RUNS, RESNET_RUNS, JPEG_RUNS, BENCH_RECORD=0.
#
# On a GPU machine reached only through a copy of the tree (no network):
#   PREBUILT=<build dir> [PHOTOS=<jpeg class folders>] bench/train_gpu/gpu_device_prepare.sh
#   carry .device; there: PREBUILT=1 bash .device/run.sh data speed   (rows to $OUT/train_gpu.csv)
#   back here: python3 bench/lib/results.py merge <fetched files>/train_gpu.csv
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ "${1:-}" == tutorial_speed ]]; then
  exec "$here/cifar10_tutorial_speed.sh"
fi
: "${BIN:=${BUILD_DIR:-$(cd "$here/../.." && pwd)/build}}"
export BIN
exec "$here/gpu_step_speed.sh" "${@:-tutorial resnet full compile}"
