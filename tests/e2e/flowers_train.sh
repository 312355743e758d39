#!/usr/bin/env bash
# Flowers end to end through the tools, on a flower_photos.tgz in TF-Slim's
# layout with as many photos as the real one (3670: 633 daisy, 898
# dandelion, 641 roses, 699 sunflowers, 799 tulips), made from real
# Fashion-MNIST images (tests/e2e/make_photo_folder.py):
#   convert (file:// mirror) → train MobileNet v1 0.25 (inception
#   preprocessing, as TF-Slim maps it) through the fused photo path → evaluate the validation split; resume exactness on the streaming
#   path (N + N steps == 2N steps, byte for byte) from the saved reader state.
#   bash flowers_train.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
command -v cjpeg >/dev/null || { echo "SKIP: cjpeg (libjpeg-turbo-progs) missing"; exit 77; }

make_flower_photos_tgz "$TMP/src"

"$BIN/download_and_convert_data" --dataset_name=flowers --dataset_dir="$TMP/data" \
  --source_url="file://$TMP/src/" 2>"$TMP/convert.log" || { cat "$TMP/convert.log"; exit 1; }
ls "$TMP/data"/flowers_train_0000{0..4}-of-00005.tfrecord \
   "$TMP/data"/flowers_validation_0000{0..4}-of-00005.tfrecord >/dev/null
grep -q "^0:daisy$" "$TMP/data/labels.txt"
grep -q "^4:tulips$" "$TMP/data/labels.txt"
# A second run with complete outputs does nothing.
before=$(stat -c %Y "$TMP/data"/flowers_train_00000-of-00005.tfrecord)
"$BIN/download_and_convert_data" --dataset_name=flowers --dataset_dir="$TMP/data" \
  --source_url="file://$TMP/src/" 2>"$TMP/convert2.log"
[[ $(stat -c %Y "$TMP/data"/flowers_train_00000-of-00005.tfrecord) == "$before" ]]
echo "ok   flowers converted (3320 + 350) and a second run does nothing"

common=(--dataset_name=flowers --dataset_dir="$TMP/data" --model_name=mobilenet_v1_025
        --preprocessing_name=inception --train_image_size=128 --batch_size=8 --optimizer=sgd --learning_rate=0.01
        --learning_rate_decay_type=fixed --log_every_n_steps=1 --seed=3
        --num_intra_op_threads=2 --num_preprocessing_threads=2 --num_readers=2
        --shuffle_buffer_size=64)

# 1. Train through the photo path (streaming: flowers has no fixed size) and
# evaluate a few validation batches.
"$BIN/train_image_classifier" --train_dir="$TMP/a" --max_number_of_steps=6 \
  "${common[@]}" 2>"$TMP/a.log" || { cat "$TMP/a.log"; exit 1; }
grep -q "streaming records" "$TMP/a.log"
grep -q "global step 6: loss = " "$TMP/a.log"
"$BIN/eval_image_classifier" --checkpoint_path="$TMP/a" --eval_dir="$TMP/eval" \
  --dataset_name=flowers --dataset_dir="$TMP/data" --dataset_split_name=validation \
  --model_name=mobilenet_v1_025 --preprocessing_name=inception --eval_image_size=128 --batch_size=50 --max_num_batches=2 \
  >"$TMP/eval.out" 2>"$TMP/eval.log" || { cat "$TMP/eval.log"; exit 1; }
grep -q "on 100 examples" "$TMP/eval.out"
echo "ok   trained 6 steps and evaluated: $(grep Accuracy "$TMP/eval.out")"

# 2. Resume exactness from the saved reader state: 3 + 3 steps == 6 steps.
expect_exact_resume "${common[@]}"
