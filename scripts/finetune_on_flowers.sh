#!/usr/bin/env bash
# The recipe of TF-Slim's scripts/finetune_<net>_on_flowers.sh with
# slimtorch's tools (scripts/finetune_inception_v1_on_flowers.sh and its
# siblings set the net and the published checkpoint):
#  1. fetches TF-Slim's published ImageNet checkpoint (a .tar.gz holding a
#     TensorFlow V1 or V2 checkpoint; read as it is, no conversion) unless
#     it is already in PRETRAINED_CHECKPOINT_DIR,
#  2. downloads flower_photos.tgz and converts it to TFRecords,
#  3. stage 1: trains only the new logits (--checkpoint_exclude_scopes and
#     --trainable_scopes = EXCLUDE_SCOPES) from the checkpoint, evaluates,
#  4. stage 2: trains all layers from stage 1 into TRAIN_DIR/all, evaluates.
#
# Settings (environment): MODEL_NAME, PREPROCESSING_NAME (default: the
# model's), CHECKPOINT_URL, CHECKPOINT_FILE (the
# checkpoint's name inside the tarball), EXCLUDE_SCOPES, STEPS_1, LR_1,
# DECAY_1 (learning_rate_decay_type), STEPS_2, LR_2, DECAY_2, LOG_2; and
# PRETRAINED_CHECKPOINT_DIR, TRAIN_DIR, DATASET_DIR, SOURCE_URL (a mirror or
# file:// folder of flower_photos.tgz), BUILD_DIR. Extra arguments go to
# both training runs (e.g. --max_number_of_steps=20 --clone_on_cpu=true).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BUILD_DIR:-$root/build}
: "${MODEL_NAME:?MODEL_NAME is not set (use finetune_<net>_on_flowers.sh)}"
: "${CHECKPOINT_URL:?CHECKPOINT_URL is not set}"
: "${EXCLUDE_SCOPES:?EXCLUDE_SCOPES is not set}"
CHECKPOINT_FILE=${CHECKPOINT_FILE:-$MODEL_NAME.ckpt}
PRETRAINED_CHECKPOINT_DIR=${PRETRAINED_CHECKPOINT_DIR:-/tmp/checkpoints}
TRAIN_DIR=${TRAIN_DIR:-/tmp/flowers-models/$MODEL_NAME}
DATASET_DIR=${DATASET_DIR:-/tmp/flowers}

# A V1 checkpoint is one file; a V2 one is known by its .index.
ckpt="$PRETRAINED_CHECKPOINT_DIR/$CHECKPOINT_FILE"
if [[ ! -f "$ckpt" && ! -f "$ckpt.index" ]]; then
  mkdir -p "$PRETRAINED_CHECKPOINT_DIR"
  tarball="$PRETRAINED_CHECKPOINT_DIR/$(basename "$CHECKPOINT_URL")"
  curl -fL --retry 3 -o "$tarball.part" "$CHECKPOINT_URL"
  mv "$tarball.part" "$tarball"
  tar -xzf "$tarball" -C "$PRETRAINED_CHECKPOINT_DIR"
  rm -f "$tarball"
  [[ -f "$ckpt" || -f "$ckpt.index" ]] || {
    echo "error: $CHECKPOINT_URL holds no $CHECKPOINT_FILE" >&2; exit 1; }
fi

"$BIN/download_and_convert_data" \
  --dataset_name=flowers \
  --dataset_dir="$DATASET_DIR" \
  ${SOURCE_URL:+--source_url="$SOURCE_URL"}

evaluate() {
  "$BIN/eval_image_classifier" \
    --checkpoint_path="$1" \
    --eval_dir="$1" \
    --dataset_name=flowers \
    --dataset_split_name=validation \
    --dataset_dir="$DATASET_DIR" \
    --model_name="$MODEL_NAME" \
    ${PREPROCESSING_NAME:+--preprocessing_name="$PREPROCESSING_NAME"}
}

# train <train_dir> <checkpoint> <steps> <lr> <decay> <log every> [flags...]
train() {
  local dir="$1" from="$2" steps="$3" lr="$4" decay="$5" log="$6"
  shift 6
  "$BIN/train_image_classifier" \
    --train_dir="$dir" \
    --dataset_name=flowers \
    --dataset_split_name=train \
    --dataset_dir="$DATASET_DIR" \
    --model_name="$MODEL_NAME" \
    ${PREPROCESSING_NAME:+--preprocessing_name="$PREPROCESSING_NAME"} \
    --checkpoint_path="$from" \
    --max_number_of_steps="$steps" \
    --batch_size=32 \
    --learning_rate="$lr" \
    --learning_rate_decay_type="$decay" \
    --save_interval_secs=60 \
    --save_summaries_secs=60 \
    --log_every_n_steps="$log" \
    --optimizer=rmsprop \
    --weight_decay=0.00004 \
    "$@"
}

# Stage 1: the new logits only.
train "$TRAIN_DIR" "$ckpt" "${STEPS_1:-3000}" "${LR_1:-0.01}" \
  "${DECAY_1:-exponential}" 100 \
  --checkpoint_exclude_scopes="$EXCLUDE_SCOPES" \
  --trainable_scopes="$EXCLUDE_SCOPES" "$@"
evaluate "$TRAIN_DIR"

# Stage 2: all layers, from stage 1.
train "$TRAIN_DIR/all" "$TRAIN_DIR" "${STEPS_2:-1000}" "${LR_2:-0.001}" \
  "${DECAY_2:-exponential}" "${LOG_2:-100}" "$@"
evaluate "$TRAIN_DIR/all"
