#!/usr/bin/env bash
# train/eval_image_classifier on bad input: one clear error line, non-zero
# exit, nothing lost (no checkpoint replaced by a bad one).
#   bash train_bad_inputs.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"

convert_fashion_mnist "$TMP/data"
T="$BIN/train_image_classifier"
E="$BIN/eval_image_classifier"
ok=(--dataset_name=fashion_mnist --dataset_dir="$TMP/data" --model_name=lenet
    --batch_size=20 --optimizer=sgd --learning_rate_decay_type=fixed
    --num_intra_op_threads=2 --num_preprocessing_threads=1)

expect_failure no_dataset_dir "--dataset_dir" \
  "$T" --train_dir="$TMP/t0" --dataset_name=fashion_mnist --model_name=lenet
expect_failure unknown_model "unknown model name 'lenet5'; valid names: " \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --model_name=lenet5
expect_failure unknown_dataset "unknown dataset name 'mnist2'" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --dataset_name=mnist2
expect_failure unknown_optimizer "unknown optimizer name 'adamw'" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --optimizer=adamw
expect_failure unknown_decay "unknown learning_rate_decay_type name 'linear_cosine'" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --learning_rate_decay_type=linear_cosine
expect_failure unsupported_flag "--master is not supported yet" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --master=grpc://chief:2222
expect_failure unknown_split "split name 'validation' was not recognized" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --dataset_split_name=validation
expect_failure missing_files "no files match" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --dataset_dir="$TMP/empty"
touch "$TMP/a_file"
expect_failure unwritable_train_dir "--train_dir '$TMP/a_file/sub' is not writable" \
  "$T" --train_dir="$TMP/a_file/sub" "${ok[@]}"
expect_failure labels_offset_out_of_range "outside [0, 9)" \
  "$T" --train_dir="$TMP/t1" "${ok[@]}" --labels_offset=1 --max_number_of_steps=50

# The GPU-only flags, refused clearly where they cannot apply.
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect_failure cuda_graph_on_cpu "--cuda_graph needs a CUDA device" \
    "$T" --train_dir="$TMP/t0" "${ok[@]}" --cuda_graph
fi
expect_failure bad_augmentation_draws "--augmentation_draws must be auto, host or device, not 'gpu'" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --augmentation_draws=gpu
expect_failure bad_profile_steps "--profile_steps=9,3: expected a global step N or a range A,B" \
  "$T" --train_dir="$TMP/t0" "${ok[@]}" --profile_steps=9,3
[[ ! -e "$TMP/t0/checkpoint" ]]

# A corrupted TFRecord: flip one byte in the middle of the training file.
mkdir -p "$TMP/bad"
cp "$TMP/data"/* "$TMP/bad/"
python3 - "$TMP/bad/fashion_mnist_train.tfrecord" <<'PY'
import sys
p = sys.argv[1]
with open(p, "r+b") as f:
    f.seek(5000); b = f.read(1); f.seek(5000); f.write(bytes([b[0] ^ 0xff]))
PY
expect_failure bad_crc "CRC mismatch" \
  "$T" --train_dir="$TMP/t2" "${ok[@]}" --dataset_dir="$TMP/bad" --max_number_of_steps=5000

# A good checkpoint at step 10, then a diverging run: the NaN stops training
# and model.ckpt-10 stays the latest.
"$T" --train_dir="$TMP/t3" "${ok[@]}" --max_number_of_steps=10 2>"$TMP/t3.log" \
  || { cat "$TMP/t3.log"; exit 1; }
expect_failure nan_loss "training stopped before the update" \
  "$T" --train_dir="$TMP/t3" "${ok[@]}" --max_number_of_steps=200 --learning_rate=1e12
grep -q 'model_checkpoint_path: "model.ckpt-10.safetensors"' "$TMP/t3/checkpoint"
[[ ! -e "$TMP/t3/model.ckpt-200.safetensors" ]]
echo "ok   nan_loss kept model.ckpt-10 as the latest"
expect_failure synthetic_eval "--input_mode=synthetic is for training" \
  "$E" --checkpoint_path="$TMP/t3" --eval_dir="$TMP/e3" --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --model_name=lenet --input_mode=synthetic

# Evaluating a checkpoint with a model of another shape lists the variables.
expect_failure mismatched_checkpoint "LeNet/fc4/weights has shape [10, 1024] in the checkpoint, [9, 1024] in the model" \
  "$E" --checkpoint_path="$TMP/t3" --eval_dir="$TMP/e" --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --model_name=lenet --labels_offset=1
mkdir -p "$TMP/empty_ckpt_dir"
expect_failure no_checkpoint "no checkpoint found in" \
  "$E" --checkpoint_path="$TMP/empty_ckpt_dir" --eval_dir="$TMP/e" --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --model_name=lenet
expect_failure missing_checkpoint "does not exist" \
  "$E" --checkpoint_path="$TMP/nowhere/model.ckpt-5.safetensors" --eval_dir="$TMP/e" \
  --dataset_name=fashion_mnist --dataset_dir="$TMP/data" --model_name=lenet
echo "PASS train_bad_inputs"
