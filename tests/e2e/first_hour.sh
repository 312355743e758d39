#!/usr/bin/env bash
# "The first hour": a new user's photos (3 classes, made from real
# Fashion-MNIST images by make_photo_folder.py) through the tools with the
# usual mistakes, each answered by a short message that names the cause:
#   - a one-class folder is refused at conversion, a class count < 2 at
#     training; a split left empty by the percentage is a warning;
#   - --model_name=mobilenet_v1_025 trains without --preprocessing_name;
#   - eval / export without --model_name (inception_v3) of its checkpoint,
#     and a resume of its train_dir as mobilenet_v1_050: a few lines naming
#     the checkpoint's net, no flag the tool lacks, the full list in a file;
#   - eval of the barely trained checkpoint warns that the batch-norm
#     moving statistics are still at their start values.
#   bash first_hour.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
command -v cjpeg >/dev/null || { echo "SKIP: cjpeg (libjpeg-turbo-progs) missing"; exit 77; }
MAKE="$(dirname "$0")/make_photo_folder.py"
TOOL="$BIN/download_and_convert_data"

# expect_short_error <case> <max lines> <fragment> <command...>: as
# expect_failure, and the error (from its "error:" line on) has at most
# <max lines> lines and suggests no flag of the training tool's warm start.
expect_short_error() {
  local name="$1" max="$2" fragment="$3"
  shift 3
  expect_failure "$name" "$fragment" "$@"
  local lines
  lines=$(sed -n '/^error: /,$p' "$TMP/$name.err" | wc -l)
  if [[ $lines -gt $max ]]; then
    echo "FAIL $name: $lines lines of error, at most $max expected"; cat "$TMP/$name.err"; exit 1
  fi
  if grep -qE -- '--checkpoint_exclude_scopes|--ignore_missing_vars' "$TMP/$name.err"; then
    echo "FAIL $name: suggests a flag the tool does not have"; cat "$TMP/$name.err"; exit 1
  fi
  local list
  list=$(grep -o "the full list is in [^)]*" "$TMP/$name.err" | sed 's/the full list is in //' || true)
  if [[ -n "$list" ]]; then
    [[ -s "$list" ]] || { echo "FAIL $name: the full list '$list' is missing"; exit 1; }
    rm -f "$list"
  fi
}

# One class: refused, naming the folder and the class; nothing written.
python3 "$MAKE" "$TMP/one" 4 cats
expect_convert_failure one_class "holds one class folder with images, 'cats'" \
  --dataset_name=image_folder --image_dir="$TMP/one" --dataset_dir="$TMP/out_one_class"

# Few photos and 10% for validation: the empty split is a warning.
python3 "$MAKE" "$TMP/few" 4 cat dog bird
"$TOOL" --dataset_name=image_folder --image_dir="$TMP/few" --dataset_dir="$TMP/few_data" \
  2>"$TMP/few.log" || { cat "$TMP/few.log"; exit 1; }
grep -q "WARNING\|^W" "$TMP/few.log"
grep -q "The validation split got 0 of the 12 images (--validation_percentage=10, train: 12)" \
  "$TMP/few.log" || { cat "$TMP/few.log"; exit 1; }
echo "ok   empty_split: $(grep -o 'The validation split got.*images' "$TMP/few.log" | head -c 120)"

# The photos of the story.
python3 "$MAKE" "$TMP/photos" 12 cat dog bird
"$TOOL" --dataset_name=image_folder --image_dir="$TMP/photos" --dataset_dir="$TMP/data" \
  --validation_percentage=25 2>"$TMP/convert.log" || { cat "$TMP/convert.log"; exit 1; }
val=$(sed -n 's/^split: validation //p' "$TMP/data/dataset_description.txt")
[[ -n "$val" && $val -gt 0 ]] || { echo "FAIL no validation split"; cat "$TMP/data/dataset_description.txt"; exit 1; }

# mobilenet_v1_025 without --preprocessing_name (TF-Slim's factory had none).
train=(--dataset_name=image_folder --dataset_dir="$TMP/data" --train_image_size=64
       --batch_size=4 --optimizer=sgd --learning_rate=0.01 --log_every_n_steps=1
       --num_intra_op_threads=2 --num_preprocessing_threads=2 --num_readers=1)
"$BIN/train_image_classifier" --train_dir="$TMP/train" --model_name=mobilenet_v1_025 \
  --max_number_of_steps=2 "${train[@]}" 2>"$TMP/train.log" || { cat "$TMP/train.log"; exit 1; }
grep -q "global step 2: loss" "$TMP/train.log"
echo "ok   mobilenet_v1_025 trained 2 steps with its own preprocessing"

eval=(--eval_dir="$TMP/eval" --dataset_name=image_folder --dataset_dir="$TMP/data"
      --dataset_split_name=validation --num_preprocessing_threads=2 --num_intra_op_threads=2)
# Eval and export without --model_name: inception_v3 meets mobilenet_v1_025.
expect_short_error eval_default_model 5 \
  "does not fit --model_name=inception_v3: it looks like a checkpoint of mobilenet_v1_025 (its variables are under MobilenetV1/)" \
  "$BIN/eval_image_classifier" --checkpoint_path="$TMP/train" "${eval[@]}"
grep -q "Check --model_name (--model_name=mobilenet_v1_025 builds that net) and --checkpoint_path." \
  "$TMP/eval_default_model.err"
expect_short_error export_default_model 5 "it looks like a checkpoint of mobilenet_v1_025" \
  "$BIN/export_inference_graph" --checkpoint_path="$TMP/train" --dataset_name=image_folder \
  --dataset_dir="$TMP/data" --output_file="$TMP/model.onnx"
[[ ! -e "$TMP/model.onnx" ]]
# Resuming the train_dir as another width.
expect_short_error resume_other_width 5 \
  "in --train_dir does not fit --model_name=mobilenet_v1_050: it looks like a checkpoint of mobilenet_v1_025, but --model_name=mobilenet_v1_050 builds another variant of MobilenetV1/" \
  "$BIN/train_image_classifier" --train_dir="$TMP/train" --model_name=mobilenet_v1_050 \
  --max_number_of_steps=4 "${train[@]}"
grep -q "or train in a new --train_dir" "$TMP/resume_other_width.err"

# Eval of the 2-step checkpoint: the batch-norm statistics are at their start.
"$BIN/eval_image_classifier" --checkpoint_path="$TMP/train" --model_name=mobilenet_v1_025 \
  --eval_image_size=64 "${eval[@]}" >"$TMP/eval.out" 2>"$TMP/eval.log" || { cat "$TMP/eval.log"; exit 1; }
grep -q "on $val examples" "$TMP/eval.out" || { cat "$TMP/eval.out"; exit 1; }
warning=$(grep "^W.*batch-norm moving statistics have barely moved" "$TMP/eval.log" || true)
[[ $(printf '%s\n' "$warning" | grep -c .) == 1 ]] || { echo "FAIL no batch-norm warning"; cat "$TMP/eval.log"; exit 1; }
for part in "decay 0.9997" "~3333 steps" "this checkpoint is at step 2" "--max_number_of_steps"; do
  grep -qF -- "$part" <<<"$warning" || { echo "FAIL warning lacks '$part': $warning"; exit 1; }
done
echo "ok   bn_warning: ${warning:0:140}..."

# A described dataset of one class (a hand-written description): refused
# at training, naming the dataset and its labels file.
mkdir -p "$TMP/one_data"
cp "$TMP/data/"*.tfrecord "$TMP/one_data/"
sed 's/^num_classes: .*/num_classes: 1/' "$TMP/data/dataset_description.txt" \
  >"$TMP/one_data/dataset_description.txt"
echo "0:bird" >"$TMP/one_data/labels.txt"
expect_failure train_one_class "dataset 'image_folder' has 1 class (labels file $TMP/one_data/labels.txt: 0:bird)" \
  "$BIN/train_image_classifier" --train_dir="$TMP/t1" --model_name=mobilenet_v1_025 \
  --max_number_of_steps=1 "${train[@]}" --dataset_dir="$TMP/one_data"
[[ ! -e "$TMP/t1/checkpoint" ]]
echo "PASS first_hour"
