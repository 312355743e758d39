#!/usr/bin/env bash
# TF-Slim's scripts/finetune_inception_v1_on_flowers.sh with slimtorch's
# tools:
#  1. downloads flower_photos.tgz and converts it to TFRecords (5 shards per
#     split, 350 validation images chosen as TF-Slim chooses them),
#  2. trains Inception v1 (configs/inception_v1_flowers.flags: rmsprop,
#     lr 0.01, batch 32, weight decay 4e-5, 3000 steps). With
#     CHECKPOINT_PATH (a slimtorch checkpoint of inception_v1) it fine-tunes
#     as TF-Slim's stage 1 does: the new logits layer only
#     (--checkpoint_exclude_scopes / --trainable_scopes InceptionV1/Logits);
#     without it, it trains the whole net from scratch,
#  3. evaluates on the validation split.
#
# Usage: scripts/train_inception_v1_on_flowers.sh [extra train flags...]
#   e.g. --max_number_of_steps=200 --clone_on_cpu=true for a short CPU run.
#   DATASET_DIR, TRAIN_DIR, SOURCE_URL (a mirror or file:// folder of
#   flower_photos.tgz), CHECKPOINT_PATH and BUILD_DIR override the defaults.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BUILD_DIR:-$root/build}
TRAIN_DIR=${TRAIN_DIR:-/tmp/flowers-models/inception_v1}
DATASET_DIR=${DATASET_DIR:-/tmp/flowers}

"$BIN/download_and_convert_data" \
  --dataset_name=flowers \
  --dataset_dir="$DATASET_DIR" \
  ${SOURCE_URL:+--source_url="$SOURCE_URL"}

finetune=()
if [[ -n "${CHECKPOINT_PATH:-}" ]]; then
  finetune=(--checkpoint_path="$CHECKPOINT_PATH"
            --checkpoint_exclude_scopes=InceptionV1/Logits
            --trainable_scopes=InceptionV1/Logits)
fi

"$BIN/train_image_classifier" \
  --flagfile="$root/configs/inception_v1_flowers.flags" \
  --train_dir="$TRAIN_DIR" \
  --dataset_dir="$DATASET_DIR" \
  "${finetune[@]}" \
  "$@"

"$BIN/eval_image_classifier" \
  --checkpoint_path="$TRAIN_DIR" \
  --eval_dir="$TRAIN_DIR" \
  --dataset_name=flowers \
  --dataset_split_name=validation \
  --dataset_dir="$DATASET_DIR" \
  --model_name=inception_v1
