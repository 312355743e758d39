#!/usr/bin/env bash
# TF-Slim's fine-tune recipe end to end, offline, through
# scripts/finetune_on_flowers.sh: a TensorFlow V2 checkpoint of MobileNet v1
# 0.25 in a .tar.gz (as TF-Slim publishes them) fetched from file://,
# flower_photos.tgz from file://, stage 1 (the new logits only, from the
# checkpoint with its logits excluded), evaluation, stage 2 (all layers,
# from stage 1), evaluation.
#   bash finetune_flowers.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
command -v cjpeg >/dev/null || { echo "SKIP: cjpeg (libjpeg-turbo-progs) missing"; exit 77; }

make_flower_photos_tgz "$TMP/src"

# The "published" checkpoint: TensorFlow's own V2 bundle of MobileNet v1 0.25
# (10 classes, Momentum slots and moving averages; written by
# scripts/golden/gen_tf_checkpoints.py), in a .tar.gz as TF-Slim publishes.
golden="$ROOT/tests/golden/tf_checkpoints/mobilenet_v1_025_v2.tar.gz"
mkdir -p "$TMP/published"
cp "$golden" "$TMP/published/mobilenet_v1_025.tar.gz"
ckpt_file=$(tar -tzf "$golden" | grep '\.index$' | head -1)
ckpt_file=${ckpt_file%.index}

MODEL_NAME=mobilenet_v1_025 PREPROCESSING_NAME=inception \
CHECKPOINT_URL="file://$TMP/published/mobilenet_v1_025.tar.gz" \
CHECKPOINT_FILE="$ckpt_file" \
EXCLUDE_SCOPES=MobilenetV1/Logits \
STEPS_1=3 STEPS_2=2 \
PRETRAINED_CHECKPOINT_DIR="$TMP/checkpoints" \
TRAIN_DIR="$TMP/train" DATASET_DIR="$TMP/flowers" \
SOURCE_URL="file://$TMP/src/" BUILD_DIR="$BIN" \
  bash "$ROOT/scripts/finetune_on_flowers.sh" \
    --train_image_size=96 --batch_size=8 --num_intra_op_threads=2 \
    --num_preprocessing_threads=2 >"$TMP/recipe.out" 2>"$TMP/recipe.log" \
  || { tail -40 "$TMP/recipe.log"; exit 1; }

# Stage 1 restored every variable but the excluded logits from the
# TensorFlow checkpoint and trained only the logits; stage 2 restored all
# from stage 1; both evaluated the 350 validation photos.
nvars=$(grep -c . <("$BIN/inspect_checkpoint" --file_name="$TMP/checkpoints/$ckpt_file" \
  --all_tensor_names 2>/dev/null | grep -v -e ExponentialMovingAverage -e /RMSProp \
  -e /Momentum -e global_step -e 'MobilenetV1/Logits/' -e slimtorch/))
grep -q "Fine-tuning from TensorFlow checkpoint $TMP/checkpoints/$ckpt_file ($nvars variables restored)" \
  "$TMP/recipe.log" || { grep "Fine-tuning" "$TMP/recipe.log"; echo "FAIL: stage 1 restore ($nvars)"; exit 1; }
grep -q "Fine-tuning from $TMP/train/model.ckpt-3.safetensors" "$TMP/recipe.log"
[[ -f "$TMP/train/model.ckpt-3.safetensors" && -f "$TMP/train/all/model.ckpt-2.safetensors" ]]
[[ $(grep -c "on 350 examples" "$TMP/recipe.out") -eq 2 ]] || { cat "$TMP/recipe.out"; exit 1; }
# The checkpoint was fetched once: a second run finds it in place.
[[ -f "$TMP/checkpoints/$ckpt_file.index" && ! -f "$TMP/checkpoints/mobilenet_v1_025.tar.gz" ]]
echo "PASS finetune_flowers ($nvars variables from the TensorFlow checkpoint; $(grep -m1 Accuracy "$TMP/recipe.out"))"
