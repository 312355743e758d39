#!/usr/bin/env bash
# TF-Slim's scripts/train_lenet_on_mnist.sh with slimtorch's tools:
#  1. converts the dataset to TFRecords,
#  2. trains LeNet (sgd, lr 0.01 fixed, batch 50, 20 000 steps, no weight decay),
#  3. evaluates on the test split.
#
# Usage: scripts/train_lenet_on_mnist.sh [mnist|fashion_mnist] [extra train flags...]
#   DATASET_DIR, TRAIN_DIR, SOURCE_URL and BUILD_DIR override the defaults.
#   fashion_mnist uses the Debian package dataset-fashion-mnist when present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
DATASET=${1:-mnist}
shift || true
BIN=${BUILD_DIR:-$root/build}
TRAIN_DIR=${TRAIN_DIR:-/tmp/lenet-model}
DATASET_DIR=${DATASET_DIR:-/tmp/$DATASET}
if [[ -z "${SOURCE_URL:-}" && "$DATASET" == fashion_mnist && -d /usr/share/datasets/fashion-mnist ]]; then
  SOURCE_URL=file:///usr/share/datasets/fashion-mnist/
fi

"$BIN/download_and_convert_data" \
  --dataset_name="$DATASET" \
  --dataset_dir="$DATASET_DIR" \
  ${SOURCE_URL:+--source_url="$SOURCE_URL"}

"$BIN/train_image_classifier" \
  --train_dir="$TRAIN_DIR" \
  --dataset_name="$DATASET" \
  --dataset_split_name=train \
  --dataset_dir="$DATASET_DIR" \
  --model_name=lenet \
  --preprocessing_name=lenet \
  --max_number_of_steps=20000 \
  --batch_size=50 \
  --learning_rate=0.01 \
  --save_interval_secs=60 \
  --save_summaries_secs=60 \
  --log_every_n_steps=100 \
  --optimizer=sgd \
  --learning_rate_decay_type=fixed \
  --weight_decay=0 \
  "$@"

"$BIN/eval_image_classifier" \
  --checkpoint_path="$TRAIN_DIR" \
  --eval_dir="$TRAIN_DIR" \
  --dataset_name="$DATASET" \
  --dataset_split_name=test \
  --dataset_dir="$DATASET_DIR" \
  --model_name=lenet
