#!/usr/bin/env bash
# A net (tiny_convnet), an optimizer (sign_sgd) and a dataset with its
# converter (bars) that only tests/extension/extension.cc defines, built
# into libslimtorch_test_extension.so and preloaded into the unchanged
# tools: download_and_convert_data writes the records, train_image_classifier
# trains the net with the optimizer and prints its --model_summary,
# eval_image_classifier scores it well above chance, export_inference_graph
# writes its ONNX graph, and onnxruntime (where python3 imports it) gives
# the probabilities eval's --predictions_file holds. Without the library the
# tools know none of the three. onnxruntime runs where $SLIMTORCH_PYTHON
# (default /opt/tfenv's, else python3) imports it with numpy and PIL.
#   bash extension.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
EXT="$BIN/tests/libslimtorch_test_extension.so"
[[ -f "$EXT" ]] || { echo "FAIL: $EXT not built"; exit 1; }
with_extension() { LD_PRELOAD="$EXT" "$@"; }

expect_failure unknown_converter "unknown dataset converter name 'bars'" \
  "$BIN/download_and_convert_data" --dataset_name=bars --dataset_dir="$TMP/data"

with_extension "$BIN/download_and_convert_data" --dataset_name=bars \
  --dataset_dir="$TMP/data" 2>"$TMP/convert.log" || { cat "$TMP/convert.log"; exit 1; }
grep -q "Wrote 256 examples to '$TMP/data/bars_train.tfrecord'" "$TMP/convert.log" \
  || { cat "$TMP/convert.log"; exit 1; }
echo "ok   convert: bars_train (256) and bars_test (64)"

common=(--dataset_name=bars --dataset_dir="$TMP/data" --model_name=tiny_convnet
  --num_intra_op_threads=2 --num_preprocessing_threads=1)
expect_failure unknown_dataset "unknown dataset name 'bars'" \
  "$BIN/train_image_classifier" "${common[@]}" --train_dir="$TMP/none" --max_number_of_steps=1
with_extension "$BIN/train_image_classifier" "${common[@]}" --model_summary \
  >"$TMP/summary.out" 2>"$TMP/summary.log" || { cat "$TMP/summary.log"; exit 1; }
for point in conv1 pool1 conv2 pool2 Flatten Logits; do
  grep -q "^ *$point " "$TMP/summary.out" \
    || { echo "FAIL: no $point in the model summary"; cat "$TMP/summary.out"; exit 1; }
done
echo "ok   summary: $(grep -i 'total' "$TMP/summary.out" | head -1 | tr -s ' ')"
with_extension "$BIN/train_image_classifier" "${common[@]}" --train_dir="$TMP/train" \
  --optimizer=sign_sgd --learning_rate=0.002 --learning_rate_decay_type=fixed \
  --batch_size=16 --max_number_of_steps=80 --weight_decay=0 --seed=3 \
  --log_every_n_steps=20 --save_summaries_secs=1000000 --momentum=0.5 \
  >"$TMP/train.out" 2>"$TMP/train.log" || { tail -20 "$TMP/train.log"; exit 1; }
grep -qF -- "--momentum is read by --optimizer=momentum only; --optimizer=sign_sgd ignores it" \
  "$TMP/train.log" || { echo "FAIL: no warning for --momentum"; tail "$TMP/train.log"; exit 1; }
[[ -f "$TMP/train/model.ckpt-80.safetensors" ]] \
  || { echo "FAIL: no checkpoint at step 80"; ls "$TMP/train"; tail "$TMP/train.log"; exit 1; }
echo "ok   train: 80 steps of sign_sgd, $(grep -o "global step 80: loss = [0-9.]*" "$TMP/train.log")"

with_extension "$BIN/eval_image_classifier" "${common[@]}" --checkpoint_path="$TMP/train" \
  --eval_dir="$TMP/eval" --dataset_split_name=test --batch_size=32 \
  --predictions_file="$TMP/predictions.csv" >"$TMP/eval.out" 2>"$TMP/eval.log" \
  || { tail -20 "$TMP/eval.log"; exit 1; }
accuracy=$(grep -o 'eval/Accuracy\[[0-9.e-]*\]' "$TMP/eval.out" | grep -o '[0-9][0-9.e-]*')
python3 -c "import sys; a = float(sys.argv[1]); assert a >= 0.9, a" "$accuracy" \
  || { echo "FAIL: eval/Accuracy $accuracy < 0.9"; cat "$TMP/eval.out"; exit 1; }
echo "ok   eval: eval/Accuracy $accuracy on the 64 test images"

with_extension "$BIN/export_inference_graph" --model_name=tiny_convnet --dataset_name=bars \
  --dataset_dir="$TMP/data" --checkpoint_path="$TMP/train" --output_file="$TMP/model.onnx" \
  2>"$TMP/export.log" || { cat "$TMP/export.log"; exit 1; }
grep -q "Exported tiny_convnet (2 classes, 16x16" "$TMP/export.log" \
  || { cat "$TMP/export.log"; exit 1; }
echo "ok   export: $(grep -o 'Exported tiny_convnet[^)]*)' "$TMP/export.log")"

python=${SLIMTORCH_PYTHON:-/opt/tfenv/bin/python}
[[ -x $python ]] || python=python3
if "$python" -c "import onnxruntime, numpy, PIL" 2>/dev/null; then
  # The test records' images through the lenet preprocessing ((x - 128) /
  # 128 at 16x16) into onnxruntime: eval's probabilities, record by record.
  "$python" - "$TMP/model.onnx" "$TMP/data/bars_test.tfrecord" "$TMP/predictions.csv" <<'PY'
import csv, io, struct, sys
import numpy as np, onnxruntime as ort
from PIL import Image

def records(path):
  data = open(path, "rb").read()
  at = 0
  while at < len(data):
    (n,) = struct.unpack_from("<Q", data, at)
    yield data[at + 12:at + 12 + n]
    at += 12 + n + 4

def png_of(example):
  at = example.find(b"\x89PNG")
  end = example.find(b"IEND", at) + 8
  return example[at:end]

session = ort.InferenceSession(sys.argv[1])
name = session.get_inputs()[0].name
rows = list(csv.DictReader(open(sys.argv[3])))
images = [np.asarray(Image.open(io.BytesIO(png_of(r))), np.float32) for r in records(sys.argv[2])]
assert len(images) == len(rows) == 64, (len(images), len(rows))
x = ((np.stack(images)[:, None] - 128.0) / 128.0).astype(np.float32)
if session.get_inputs()[0].shape[-1] == 1:
  x = x.transpose(0, 2, 3, 1)
# The graph's probabilities: the [64, 2] output whose rows sum to 1.
p = next(o for o in session.run(None, {name: x})
         if o.shape == (64, 2) and np.allclose(o.sum(1), 1, atol=1e-5))
want = np.array([[float(r["p_0"]), float(r["p_1"])] for r in rows])
worst = np.abs(p - want).max()
assert worst < 1e-4, worst
print("ok   onnxruntime: the 64 records' probabilities within %.1e of eval's" % worst)
PY
else
  echo "note onnxruntime, numpy or PIL not importable by $python: the ONNX run is skipped"
fi
