#!/usr/bin/env bash
# The int8 ONNX against the fake-quantized LibTorch net on a validation set
# (issue 32): for each quantization-aware checkpoint, eval_image_classifier
# --quantize writes every test example's probabilities
# (--predictions_file), export_inference_graph --quantize writes the int8
# ONNX, and onnxruntime runs it on the same examples, preprocessed by
# TF-Slim's lenet_preprocessing in TensorFlow (research/slim's
# lenet_preprocessing.py, whose three ops are written out below).
# Prints and records the share of examples whose top-1 agrees.
#   CKPTS="net=dir[:per_channel] ..." DATA=<fashion_mnist dir> SIZE=<n>
#   BUILD_DIR=build bench/quantization/onnx_agreement.sh
# Rows go to bench/results/quantization.csv (BENCH_RECORD=0: printed only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
PY=${SLIMTORCH_PYTHON:-/opt/tfenv/bin/python}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
: "${CKPTS:?CKPTS=\"net=checkpoint_dir[:per_channel] ...\"}" "${DATA:?DATA=<dataset dir>}"
DATASET=${DATASET:-fashion_mnist}
commit=${BENCH_COMMIT:-$(git -C "$root" rev-parse --short HEAD)}
for spec in $CKPTS; do
  net=${spec%%=*}; rest=${spec#*=}; ckpt=${rest%%:*}
  size_var="SIZE_$net"; size=${!size_var:-${SIZE:-28}}
  pc=(); [[ "$rest" == *:per_channel ]] && pc=(--quantize_per_channel)
  tag="$net${pc:+_per_channel}"
  "$BIN/eval_image_classifier" --model_name="$net" --dataset_name="$DATASET" \
    --dataset_dir="$DATA" --dataset_split_name=test --checkpoint_path="$ckpt" \
    --eval_dir="$WORK/$tag.eval" --preprocessing_name=lenet --eval_image_size="$size" \
    --batch_size=100 --quantize "${pc[@]}" --predictions_file="$WORK/$tag.csv" \
    >"$WORK/$tag.eval.out" 2>"$WORK/$tag.eval.log" || { tail "$WORK/$tag.eval.log"; exit 1; }
  "$BIN/export_inference_graph" --model_name="$net" --dataset_name="$DATASET" \
    --dataset_dir="$DATA" --checkpoint_path="$ckpt" --image_size="$size" --quantize \
    "${pc[@]}" --output_file="$WORK/$tag.onnx" 2>"$WORK/$tag.export.log" \
    || { tail "$WORK/$tag.export.log"; exit 1; }
  "$PY" - "$WORK/$tag.onnx" "$WORK/$tag.csv" "$DATA" "$size" "$tag" \
    "$commit" "${BENCH_RECORD:-1}" "$root/bench/results/quantization.csv" <<'PY'
import csv, datetime, glob, sys
onnx_path, pred_path, data, size, tag, commit, record, out = sys.argv[1:]
size = int(size)
import numpy as np, onnxruntime as ort, tensorflow as tf
files = sorted(glob.glob(data + "/*_test*.tfrecord"))
feats = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
         "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
def prep(rec):
    ex = tf.io.parse_single_example(rec, feats)
    img = tf.image.decode_png(ex["image/encoded"], channels=1)
    # lenet_preprocessing.preprocess_image (eval): float, crop or pad,
    # (x - 128) / 128
    img = tf.image.resize_with_crop_or_pad(tf.cast(img, tf.float32), size, size)
    return tf.math.divide(tf.math.subtract(img, 128.0), 128.0)
ds = tf.data.TFRecordDataset(files).map(prep).batch(100)
sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
name = sess.get_inputs()[0].name
top = []
for batch in ds:
    logits = sess.run(None, {name: batch.numpy().astype(np.float32)})[0]
    top.extend(np.argmax(logits, 1).tolist())
rows = list(csv.DictReader(open(pred_path)))
assert len(rows) == len(top), (len(rows), len(top))
agree = sum(int(r["prediction"]) == t for r, t in zip(rows, top))
labels = [int(r["label"]) for r in rows]
acc_onnx = sum(l == t for l, t in zip(labels, top)) / len(top)
acc_ours = sum(l == int(r["prediction"]) for l, r in zip(labels, rows)) / len(top)
share = agree / len(top)
# How close the disagreements were: eval --quantize's margin between its two
# most probable classes, for the examples that disagree and for all.
def margin(r):
    p = sorted((float(v) for k, v in r.items() if k.startswith("p_")), reverse=True)
    return p[0] - p[1]
all_m = np.array([margin(r) for r in rows])
dis_m = np.array([margin(r) for r, t in zip(rows, top) if int(r["prediction"]) != t])
close = ("disagreements' top-two probability margin in eval --quantize: median %.3f "
         "(all examples: %.3f), %.0f%% of them under 0.1 (all examples: %.0f%%)" % (
             np.median(dis_m), np.median(all_m), 100 * np.mean(dis_m < 0.1),
             100 * np.mean(all_m < 0.1))) if len(dis_m) else "no disagreement"
print("%s: int8 ONNX (onnxruntime %s) top-1 agrees with eval --quantize on %d of %d "
      "(%.2f%%); accuracy %.2f%% vs %.2f%%; %s" % (tag, ort.__version__, agree, len(top),
                                            100 * share, 100 * acc_onnx, 100 * acc_ours, close))
if record == "1":
    with open(out, "a", newline="") as f:
        csv.writer(f).writerow([datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "AMD EPYC, 2 cores", commit,
            "%s int8 ONNX top-1 agreement with eval --quantize (%% of %d test examples)" % (tag, len(top)),
            "%.2f" % (100 * share), "", "",
            "onnxruntime %s; accuracy int8 ONNX %.2f%%, eval --quantize %.2f%%; %s"
            % (ort.__version__, 100 * acc_onnx, 100 * acc_ours, close)])
PY
done
