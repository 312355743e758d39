#!/usr/bin/env bash
# Train → export → label_image, through the tools: a folder of photos with
# train/ and validation/ folders → download_and_convert_data (image_folder) →
# train CifarNet a few steps → export_inference_graph (ONNX, the
# checkpoint's weights in) → label_image on the validation folder with the
# eval preprocessing, run by OpenCV's DNN module. For every validation photo
# label_image gives the top-1 class and probabilities (within 1e-4) that
# eval_image_classifier --predictions_file gives its record, and its top-1
# scores exactly eval's accuracy. The same checkpoint exported as a frozen
# GraphDef (.pb and --write_text_graphdef .pbtxt) run by TensorFlow on
# TF-Slim's inception eval preprocessing written in TensorFlow gives the same
# per-photo probabilities (where $SLIMTORCH_PYTHON, default /opt/tfenv's,
# imports tensorflow). Bad input names the file.
#   bash export_label_image.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
command -v cjpeg >/dev/null || { echo "SKIP: cjpeg (libjpeg-turbo-progs) missing"; exit 77; }
[[ -x "$BIN/label_image" ]] || { echo "SKIP: no label_image"; exit 77; }

photos="$TMP/photos"
make_photo_dataset "$photos" 24 6

common=(--dataset_name=image_folder --dataset_dir="$TMP/data" --model_name=cifarnet
  --num_intra_op_threads=2)
"$BIN/train_image_classifier" "${common[@]}" --train_dir="$TMP/train" \
  --preprocessing_name=inception --train_image_size=32 --batch_size=8 \
  --max_number_of_steps=20 --learning_rate=0.1 2>"$TMP/train.log" \
  || { tail -20 "$TMP/train.log"; exit 1; }
"$BIN/eval_image_classifier" "${common[@]}" --checkpoint_path="$TMP/train" \
  --eval_dir="$TMP/eval" --dataset_split_name=validation --eval_image_size=32 \
  --preprocessing_name=inception --predictions_file="$TMP/eval_predictions.csv" \
  --batch_size=7 >"$TMP/eval.out" 2>"$TMP/eval.log" || { tail -20 "$TMP/eval.log"; exit 1; }
accuracy=$(grep -o 'eval/Accuracy\[[0-9.e-]*\]' "$TMP/eval.out" | grep -o '[0-9][0-9.e-]*')

"$BIN/export_inference_graph" --model_name=cifarnet --dataset_name=image_folder \
  --dataset_dir="$TMP/data" --image_size=32 --checkpoint_path="$TMP/train" \
  --output_file="$TMP/model.onnx" 2>"$TMP/export.log" || { cat "$TMP/export.log"; exit 1; }
grep -q "Exported cifarnet (3 classes, 32x32, batch dynamic) from $TMP/train/model.ckpt-20" \
  "$TMP/export.log" || { cat "$TMP/export.log"; exit 1; }

"$BIN/label_image" --graph="$TMP/model.onnx" --image="$photos/validation/shirt,$photos/validation/sneaker,$photos/validation/bag" \
  --labels="$TMP/data/labels.txt" --model_name=cifarnet --preprocessing_name=inception \
  --top_k=3 >"$TMP/label.out" 2>"$TMP/label.log" || { cat "$TMP/label.log"; exit 1; }
# Each image: its path, then 3 "name (index): score" lines, best first.
# Eval's records carry no file names (TF-Slim's image-folder records have
# none), so each record is paired with a distinct photo of its class whose
# label_image probabilities are within 1e-4 of the record's (a bipartite
# matching): every record must find one.
python3 - "$TMP/label.out" "$accuracy" "$TMP/eval_predictions.csv" "$TMP/label.json" \
  "$TMP/data/labels.txt" <<'PY'
import csv, json, os, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 18 * 4, len(lines)
right = 0
photos = {}  # path -> (truth name, top-1 index, [p_0, p_1, p_2])
for i in range(0, len(lines), 4):
  truth = os.path.basename(os.path.dirname(lines[i]))
  top = lines[i + 1].split(" (")[0]
  scores = [float(l.rsplit(": ", 1)[1]) for l in lines[i + 1:i + 4]]
  assert scores == sorted(scores, reverse=True) and abs(sum(scores) - 1) < 1e-4, lines[i:i + 4]
  right += top == truth
  probs = [0.0] * 3
  for l in lines[i + 1:i + 4]:
    probs[int(l.split(" (")[1].split(")")[0])] = float(l.rsplit(": ", 1)[1])
  photos[lines[i]] = (truth, int(lines[i + 1].split(" (")[1].split(")")[0]), probs)
got, want = right / 18, float(sys.argv[2])
assert abs(got - want) < 5e-5, (got, want)  # eval prints 4 digits
print("label_image top-1 %.4f == eval/Accuracy %.4f" % (got, want))
json.dump(photos, open(sys.argv[4], "w"))

names = [l.split(":", 1)[1] for l in open(sys.argv[5]).read().splitlines()]
rows = list(csv.DictReader(open(sys.argv[3])))
assert len(rows) == 18, len(rows)
def fits(row, path):
  truth, top, probs = photos[path]
  p = [float(row["p_%d" % c]) for c in range(3)]
  return (names[int(row["label"])] == truth and int(row["prediction"]) == top
          and max(abs(a - b) for a, b in zip(p, probs)) < 1e-4)
owner = {}
def place(r, seen):
  for path in photos:
    if path not in seen and fits(rows[r], path):
      seen.add(path)
      if path not in owner or place(owner[path], seen):
        owner[path] = r
        return True
  return False
lost = [r for r in range(len(rows)) if not place(r, set())]
assert not lost, "eval records with no label_image photo of the same class, " \
    "top-1 and probabilities: %s" % [rows[r] for r in lost]
# The pairing means something only if the photos' probabilities differ.
spread = max(max(p) - min(p) for p in zip(*(v[2] for v in photos.values())))
assert spread > 1e-2, "the net gives every photo the same probabilities"
print("all 18 eval records == a distinct label_image photo (top-1, probabilities "
      "within 1e-4; they spread over %.3f)" % spread)
PY

# The same checkpoint as a frozen GraphDef, binary and text.
"$BIN/export_inference_graph" --model_name=cifarnet --dataset_name=image_folder \
  --dataset_dir="$TMP/data" --image_size=32 --checkpoint_path="$TMP/train" \
  --output_file="$TMP/model.pb" 2>"$TMP/export_pb.log" || { cat "$TMP/export_pb.log"; exit 1; }
"$BIN/export_inference_graph" --model_name=cifarnet --dataset_name=image_folder \
  --dataset_dir="$TMP/data" --image_size=32 --checkpoint_path="$TMP/train" \
  --output_file="$TMP/model.pbtxt" --write_text_graphdef 2>"$TMP/export_pbtxt.log" \
  || { cat "$TMP/export_pbtxt.log"; exit 1; }
grep -q 'name: "CifarNet/Predictions/Reshape_1"' "$TMP/model.pbtxt"
python=${SLIMTORCH_PYTHON:-/opt/tfenv/bin/python}
if [[ -x "$python" ]] && "$python" -c 'import tensorflow' 2>/dev/null; then
  for graph in model.pb model.pbtxt; do
    CUDA_VISIBLE_DEVICES= TF_CPP_MIN_LOG_LEVEL=2 "$python" - "$TMP/$graph" "$TMP/label.json" <<'PY' 2>"$TMP/tf.log" || { cat "$TMP/tf.log"; exit 1; }
import json, sys
import numpy as np
import tensorflow as tf
from google.protobuf import text_format
graph_def = tf.compat.v1.GraphDef()
data = open(sys.argv[1], "rb").read()
if sys.argv[1].endswith(".pbtxt"):
  text_format.Parse(data.decode(), graph_def)
else:
  graph_def.ParseFromString(data)
g = tf.Graph()
with g.as_default():
  tf.compat.v1.import_graph_def(graph_def, name="")
  # TF-Slim's inception_preprocessing.preprocess_for_eval, central_fraction 0.875.
  path = tf.compat.v1.placeholder(tf.string, [])
  image = tf.image.convert_image_dtype(
      tf.image.decode_jpeg(tf.io.read_file(path), channels=3), tf.float32)
  image = tf.image.central_crop(image, central_fraction=0.875)
  image = tf.compat.v1.image.resize_bilinear(image[None], [32, 32], align_corners=False)
  image = (image - 0.5) * 2.0
photos = json.load(open(sys.argv[2]))
worst = 0.0
with tf.compat.v1.Session(graph=g) as sess:
  for p, (truth, top, probs) in sorted(photos.items()):
    x = sess.run(image, {path: p})
    got = sess.run("CifarNet/Predictions/Reshape_1:0", {"input:0": x})[0]
    assert int(np.argmax(got)) == top, (p, got, probs)
    worst = max(worst, float(np.max(np.abs(got - np.array(probs)))))
assert worst < 1e-4, worst
print("%s in TensorFlow == label_image on all %d photos (top-1; max |dp| %.2g)"
      % (sys.argv[1].rsplit("/", 1)[1], len(photos), worst))
PY
  done
else
  echo "skip TensorFlow check of the GraphDef: $python cannot import tensorflow"
fi

# Bad input: named, exit 1.
expect_failure missing_image "$TMP/gone.jpg" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$TMP/gone.jpg"
echo "not an image" >"$TMP/bad.jpg"
expect_failure bad_image "bad.jpg" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$TMP/bad.jpg"
expect_failure not_onnx "$TMP/train/checkpoint" "$BIN/label_image" \
  --graph="$TMP/train/checkpoint" --image="$photos/validation/bag"
expect_failure wrong_size "32x32" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$photos/validation/bag" --input_width=224 --input_height=224
printf '0:shirt\n' >"$TMP/few.txt"
expect_failure few_labels "few.txt" "$BIN/label_image" --graph="$TMP/model.onnx" \
  --image="$photos/validation/bag" --labels="$TMP/few.txt"
expect_failure eval_predictions_dir "--predictions_file '$TMP'" \
  "$BIN/eval_image_classifier" "${common[@]}" --checkpoint_path="$TMP/train" \
  --eval_dir="$TMP/eval" --dataset_split_name=validation --eval_image_size=32 \
  --preprocessing_name=inception --predictions_file="$TMP"
# --quantize on a float checkpoint: no ranges to quantize with (the 8-bit
# flows are tests/e2e/quantize.sh's); nothing written.
expect_failure quantize "has no quantization ranges" "$BIN/export_inference_graph" \
  --model_name=cifarnet --dataset_name=image_folder --dataset_dir="$TMP/data" \
  --image_size=32 --checkpoint_path="$TMP/train" --quantize --output_file="$TMP/q.onnx"
[[ ! -e "$TMP/q.onnx" ]]
# Video nets: exported with --is_video_model --num_frames only (both, and
# only for them), refused by train and eval (image datasets).
expect_failure video_without_flag "i3d is a video net" "$BIN/export_inference_graph" \
  --model_name=i3d --checkpoint_path="$TMP/train" --output_file="$TMP/v.onnx"
expect_failure video_without_frames "Number of frames must be specified" \
  "$BIN/export_inference_graph" --model_name=s3dg --is_video_model \
  --checkpoint_path="$TMP/train" --output_file="$TMP/v.onnx"
expect_failure video_flag_image_net "cifarnet is an image net" \
  "$BIN/export_inference_graph" --model_name=cifarnet --dataset_name=image_folder \
  --dataset_dir="$TMP/data" --is_video_model --num_frames=8 \
  --checkpoint_path="$TMP/train" --output_file="$TMP/v.onnx"
[[ ! -e "$TMP/v.onnx" ]]
expect_failure train_video_net "s3dg is a video net" "$BIN/train_image_classifier" \
  "${common[@]}" --model_name=s3dg --train_dir="$TMP/video_train" --max_number_of_steps=1
expect_failure eval_video_net "i3d is a video net" "$BIN/eval_image_classifier" \
  "${common[@]}" --model_name=i3d --checkpoint_path="$TMP/train" --eval_dir="$TMP/video_eval"
echo "PASS export_label_image"
