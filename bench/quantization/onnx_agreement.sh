#!/usr/bin/env bash
# The int8 ONNX against the fake-quantized LibTorch net on a validation set
# (issue 32): for each quantization-aware checkpoint, eval_image_classifier
# --quantize writes every test example's probabilities
# (--predictions_file), export_inference_graph --quantize writes the int8
# ONNX, and onnxruntime runs it on the same examples, preprocessed by
# TF-Slim's lenet_preprocessing in TensorFlow (research/slim's
# lenet_preprocessing.py, whose three ops are written out below).
# Prints and records the share of examples whose top-1 agrees, and the share
# when an exact tie at the top (both sides end in 8-bit logits) counts as
# agreeing where the tied classes overlap; says how close the disagreements
# were (eval's top-two margin; their logit gap in steps of the output's
# DequantizeLinear); writes onnxruntime's logits to <tag>.onnx.logits.csv.
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
machine=$(python3 -c "import sys; sys.path.insert(0, '$root/bench/lib'); import results; print(results.cpu_machine())")
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
    "$commit" "${BENCH_RECORD:-1}" "$root/bench/results/quantization.csv" "$machine" <<'PY'
import csv, datetime, glob, sys
onnx_path, pred_path, data, size, tag, commit, record, out, machine = sys.argv[1:]
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
logits = np.concatenate([sess.run(None, {name: b.numpy().astype(np.float32)})[0]
                         for b in ds])
top = np.argmax(logits, 1)
rows = list(csv.DictReader(open(pred_path)))
assert len(rows) == len(top), (len(rows), len(top))
probs = np.array([[float(v) for k, v in r.items() if k.startswith("p_")] for r in rows])
pred = np.array([int(r["prediction"]) for r in rows])
labels = np.array([int(r["label"]) for r in rows])
np.savetxt(onnx_path + ".logits.csv", logits, fmt="%.9g", delimiter=",")
agree = int(np.sum(pred == top))
acc_onnx = float(np.mean(labels == top))
acc_ours = float(np.mean(labels == pred))
share = agree / len(top)
# Both sides end in 8-bit logits, so two classes can score exactly the same:
# top-1 is then a tie broken by index, and one rounding step on either side
# breaks it the other way. Agreement counting a tie as agreeing when the
# tied classes of the two sides overlap:
eval_ties = probs == probs.max(1, keepdims=True)
onnx_ties = logits == logits.max(1, keepdims=True)
tied = int(np.sum(eval_ties.sum(1) > 1))
agree_ties = int(np.sum(np.any(eval_ties & onnx_ties, 1)))
# How close the disagreements were: eval --quantize's margin between its two
# most probable classes, for the examples that disagree and for all.
srt = -np.sort(-probs, 1)
all_m = srt[:, 0] - srt[:, 1]
dis_m = all_m[pred != top]
close = ("disagreements' top-two probability margin in eval --quantize: median %.3f "
         "(all examples: %.3f), %.0f%% of them under 0.1 (all examples: %.0f%%)" % (
             np.median(dis_m), np.median(all_m), 100 * np.mean(dis_m < 0.1),
             100 * np.mean(all_m < 0.1))) if len(dis_m) else "no disagreement"
# The disagreements' logit gap in steps of the 8-bit output (the scale of the
# DequantizeLinear that ends the graph): eval's log-probabilities differ by
# the logits' differences.
import onnx
from onnx import numpy_helper
graph = onnx.load(onnx_path).graph
made_by = {o: n for n in graph.node for o in n.output}
last = made_by.get(graph.output[0].name)
inits = {i.name: i for i in graph.initializer}
steps = ""
if last is not None and last.op_type == "DequantizeLinear" and last.input[1] in inits:
    scale = float(numpy_helper.to_array(inits[last.input[1]]))
    d = np.nonzero(pred != top)[0]
    if len(d):
        with np.errstate(divide="ignore"):
            lp = np.log(probs[d])
        gap_eval = np.rint((lp[np.arange(len(d)), pred[d]] - lp[np.arange(len(d)), top[d]]) / scale)
        gap_onnx = np.rint((logits[d, top[d]] - logits[d, pred[d]]) / scale)
        steps = ("; the disagreements' two classes are %s output steps (%.4f) apart in eval "
                 "--quantize and %s in onnxruntime (median; max %d and %d)" % (
                     "%g" % np.median(gap_eval), scale, "%g" % np.median(gap_onnx),
                     gap_eval.max(), gap_onnx.max()))
ties = ("%d examples have an exact tie at the top in eval --quantize; counting a tie as "
        "agreeing when the tied classes overlap: %d (%.2f%%)" % (
            tied, agree_ties, 100.0 * agree_ties / len(top)))
print("%s: int8 ONNX (onnxruntime %s) top-1 agrees with eval --quantize on %d of %d "
      "(%.2f%%); accuracy %.2f%% vs %.2f%%; %s%s; %s" % (tag, ort.__version__, agree, len(top),
      100 * share, 100 * acc_onnx, 100 * acc_ours, close, steps, ties))
if record == "1":
    with open(out, "a", newline="") as f:
        csv.writer(f).writerow([datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), machine, commit,
            "%s int8 ONNX top-1 agreement with eval --quantize (%% of %d test examples)" % (tag, len(top)),
            "%.2f" % (100 * share), "", "",
            "onnxruntime %s; accuracy int8 ONNX %.2f%%, eval --quantize %.2f%%; %s%s; %s"
            % (ort.__version__, 100 * acc_onnx, 100 * acc_ours, close, steps, ties)])
        csv.writer(f).writerow([datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), machine, commit,
            "%s int8 ONNX top-1 agreement with eval --quantize, exact ties counted as agreeing "
            "when the tied classes overlap (%% of %d test examples)" % (tag, len(top)),
            "%.2f" % (100.0 * agree_ties / len(top)), "", "",
            "onnxruntime %s; %d examples tied at the top in eval --quantize" % (ort.__version__, tied)])
PY
done
