#!/usr/bin/env bash
# Train → export → label_image, through the tools: a folder of photos with
# train/ and validation/ folders → download_and_convert_data (image_folder) →
# train MobileNet v1 0.25 a few steps → export_inference_graph (ONNX, the
# checkpoint's weights in) → label_image on the validation folder with the
# eval preprocessing, run by OpenCV's DNN module. label_image's top-1 over
# the validation photos must score exactly eval_image_classifier's accuracy;
# bad input names the file.
#   bash export_label_image.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
command -v cjpeg >/dev/null || { echo "SKIP: cjpeg (libjpeg-turbo-progs) missing"; exit 77; }
[[ -x "$BIN/label_image" ]] || { echo "SKIP: no label_image"; exit 77; }

photos="$TMP/photos"
python3 "$(dirname "$0")/make_photo_folder.py" "$photos/train" 24 "shirt" "sneaker" "bag"
python3 "$(dirname "$0")/make_photo_folder.py" "$photos/validation" 6 "shirt" "sneaker" "bag"
"$BIN/download_and_convert_data" --dataset_name=image_folder --image_dir="$photos" \
  --dataset_dir="$TMP/data" 2>"$TMP/convert.log" || { cat "$TMP/convert.log"; exit 1; }

common=(--dataset_name=image_folder --dataset_dir="$TMP/data" --model_name=mobilenet_v1_025
  --num_intra_op_threads=2)
"$BIN/train_image_classifier" "${common[@]}" --train_dir="$TMP/train" \
  --preprocessing_name=inception --train_image_size=96 --batch_size=8 \
  --max_number_of_steps=20 --learning_rate=0.1 2>"$TMP/train.log" \
  || { tail -20 "$TMP/train.log"; exit 1; }
"$BIN/eval_image_classifier" "${common[@]}" --checkpoint_path="$TMP/train" \
  --eval_dir="$TMP/eval" --dataset_split_name=validation --eval_image_size=96 \
  --preprocessing_name=inception \
  --batch_size=7 >"$TMP/eval.out" 2>"$TMP/eval.log" || { tail -20 "$TMP/eval.log"; exit 1; }
accuracy=$(grep -o 'eval/Accuracy\[[0-9.e-]*\]' "$TMP/eval.out" | grep -o '[0-9][0-9.e-]*')

"$BIN/export_inference_graph" --model_name=mobilenet_v1_025 --dataset_name=image_folder \
  --dataset_dir="$TMP/data" --image_size=96 --checkpoint_path="$TMP/train" \
  --output_file="$TMP/model.onnx" 2>"$TMP/export.log" || { cat "$TMP/export.log"; exit 1; }
grep -q "Exported mobilenet_v1_025 (3 classes, 96x96, batch dynamic) from $TMP/train/model.ckpt-20" \
  "$TMP/export.log" || { cat "$TMP/export.log"; exit 1; }

"$BIN/label_image" --graph="$TMP/model.onnx" --image="$photos/validation/shirt,$photos/validation/sneaker,$photos/validation/bag" \
  --labels="$TMP/data/labels.txt" --model_name=mobilenet_v1_025 --preprocessing_name=inception \
  --top_k=3 >"$TMP/label.out" 2>"$TMP/label.log" || { cat "$TMP/label.log"; exit 1; }
# Each image: its path, then 3 "name (index): score" lines, best first.
python3 - "$TMP/label.out" "$accuracy" <<'PY'
import sys, os
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 18 * 4, len(lines)
right = 0
for i in range(0, len(lines), 4):
  truth = os.path.basename(os.path.dirname(lines[i]))
  top = lines[i + 1].split(" (")[0]
  scores = [float(l.rsplit(": ", 1)[1]) for l in lines[i + 1:i + 4]]
  assert scores == sorted(scores, reverse=True) and abs(sum(scores) - 1) < 1e-4, lines[i:i + 4]
  right += top == truth
got, want = right / 18, float(sys.argv[2])
assert abs(got - want) < 5e-5, (got, want)  # eval prints 4 digits
print("label_image top-1 %.4f == eval/Accuracy %.4f" % (got, want))
PY

# Bad input: named, exit 1.
expect_failure missing_image "$TMP/gone.jpg" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$TMP/gone.jpg"
echo "not an image" >"$TMP/bad.jpg"
expect_failure bad_image "bad.jpg" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$TMP/bad.jpg"
expect_failure not_onnx "$TMP/train/checkpoint" "$BIN/label_image" \
  --graph="$TMP/train/checkpoint" --image="$photos/validation/bag"
expect_failure wrong_size "96x96" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$photos/validation/bag" --input_width=224 --input_height=224
printf '0:shirt\n' >"$TMP/few.txt"
expect_failure few_labels "few.txt" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$photos/validation/bag" --labels="$TMP/few.txt"
expect_failure quantize "--quantize is not supported yet" "$BIN/export_inference_graph" \
  --model_name=lenet --quantize --output_file="$TMP/q.onnx"
[[ ! -e "$TMP/q.onnx" ]]
echo "PASS export_label_image"
