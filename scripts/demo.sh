#!/usr/bin/env bash
# From a fresh clone: installs what is missing, builds, converts Fashion-MNIST
# (from the Debian package, or downloaded when absent), trains LeNet for a
# few minutes on CPU and prints the test accuracy.
#
#   scripts/demo.sh            # 3000 steps (about 2 minutes of training on 2 cores)
#   STEPS=20000 scripts/demo.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
WORK=${WORK:-/tmp/slimtorch-demo}
export DATASET_DIR=${DATASET_DIR:-$WORK/fashion_mnist}
export TRAIN_DIR=${TRAIN_DIR:-$WORK/lenet-model}
rm -rf "$TRAIN_DIR"
"$root/scripts/train_lenet_on_mnist.sh" fashion_mnist \
  --max_number_of_steps="${STEPS:-3000}" --seed=1
