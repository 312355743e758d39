#!/usr/bin/env bash
# 8-bit nets through the tools, on a folder of photos (docs/quantization.md):
# train mobilenet_v1_025 float → fine-tune it with --quantize_delay (TF-Slim's
# quantization-aware training) → eval --quantize; and, separately, the float
# checkpoint calibrated on the training split (eval --quantize
# --calibration_dataset_dir). Checked: the checkpoint holds the ranges with
# TF's names; the 8-bit evaluation differs from the float evaluation of the
# same checkpoint (fake quantization is on) and is deterministic; a QAT run
# resumes exactly (3 + 3 steps == 6 steps, ranges and their moving-average
# shadows included); --quantize_delay larger than the run leaves the ranges
# moving but the weights trained as float; and the bad inputs: a float
# checkpoint under --quantize, calibration data of another channel count,
# --quantize_per_channel or calibration without --quantize.
#   bash quantize.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
command -v cjpeg >/dev/null || { echo "SKIP: cjpeg (libjpeg-turbo-progs) missing"; exit 77; }

photos="$TMP/photos"
make_photo_dataset "$photos" 16 6

net=(--dataset_name=image_folder --dataset_dir="$TMP/data" --model_name=mobilenet_v1_025
  --preprocessing_name=lenet --num_intra_op_threads=2)
train=("${net[@]}" --train_image_size=32 --batch_size=8 --optimizer=sgd --seed=3)
evaluate=("${net[@]}" --eval_image_size=32 --dataset_split_name=validation --batch_size=6
  --eval_dir="$TMP/eval")

"$BIN/train_image_classifier" "${train[@]}" --train_dir="$TMP/float" \
  --max_number_of_steps=6 --learning_rate=0.05 2>"$TMP/float.log" \
  || { tail -20 "$TMP/float.log"; exit 1; }
"$BIN/train_image_classifier" "${train[@]}" --train_dir="$TMP/qat" \
  --checkpoint_path="$TMP/float" --quantize_delay=0 --max_number_of_steps=4 \
  --learning_rate=0.01 2>"$TMP/qat.log" || { tail -20 "$TMP/qat.log"; exit 1; }
grep -q "quantization variables are not in the checkpoint (a float one)" "$TMP/qat.log" \
  || { echo "FAIL no note of the fresh ranges"; tail "$TMP/qat.log"; exit 1; }

# The ranges are in the checkpoint under TF's names, moved off their initial
# values (act 0..6) by the training batches.
python3 - "$TMP/qat/model.ckpt-4.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
def value(name):
    info = header[name]
    a, b = info["data_offsets"]
    return struct.unpack("<f", raw[8 + n + a:8 + n + b][:4])[0]
for name in ["MobilenetV1/Conv2d_0/weights_quant/min", "MobilenetV1/Conv2d_0/act_quant/max",
             "MobilenetV1/Conv2d_1_depthwise/weights_quant/max",
             "MobilenetV1/Conv2d_1_pointwise/act_quant/max/local_step",
             "MobilenetV1/Logits/Conv2d_1c_1x1/act_quant/min"]:
    assert name in header, name
step = value("MobilenetV1/Conv2d_1_pointwise/act_quant/max/local_step")
assert step == 4.0, step  # one update per training step
assert value("MobilenetV1/Conv2d_0/act_quant/max") != 6.0
assert value("MobilenetV1/Conv2d_0/weights_quant/min") < 0
print("ok   checkpoint: ranges under TF's names, 4 moving-average updates")
PY

accuracy() { grep -o 'eval/Accuracy\[[0-9.e-]*\]' "$1" | grep -o '[0-9][0-9.e-]*'; }
predict() {  # predict <out name> <flags...>: eval with a predictions file
  local name="$1"; shift
  "$BIN/eval_image_classifier" "${evaluate[@]}" --predictions_file="$TMP/$name.csv" "$@" \
    >"$TMP/$name.out" 2>"$TMP/$name.log" || { tail -20 "$TMP/$name.log"; exit 1; }
}
predict qat_float --checkpoint_path="$TMP/qat"
predict qat_8bit --checkpoint_path="$TMP/qat" --quantize
predict qat_8bit_again --checkpoint_path="$TMP/qat" --quantize
cmp "$TMP/qat_8bit.csv" "$TMP/qat_8bit_again.csv" \
  || { echo "FAIL the 8-bit evaluation is not deterministic"; exit 1; }
if cmp -s "$TMP/qat_float.csv" "$TMP/qat_8bit.csv"; then
  echo "FAIL --quantize evaluated the same probabilities as the float net"; exit 1
fi
echo "ok   eval --quantize: accuracy $(accuracy "$TMP/qat_8bit.out") (float $(accuracy "$TMP/qat_float.out")), probabilities differ, deterministic"

# Post-training: the float checkpoint calibrated, no retraining.
predict ptq --checkpoint_path="$TMP/float" --quantize --calibration_dataset_dir="$TMP/data" \
  --calibration_batches=2 --calibration_batch_size=8
grep -q "Calibrated 28 activation ranges on 16 examples (2 batches) of image_folder/train" \
  "$TMP/ptq.log" || { echo "FAIL calibration log"; grep -i calibr "$TMP/ptq.log"; exit 1; }
predict ptq_percentile --checkpoint_path="$TMP/float" --quantize \
  --calibration_dataset_dir="$TMP/data" --calibration_batches=2 --calibration_batch_size=8 \
  --calibration_method=percentile
echo "ok   calibration: minmax $(accuracy "$TMP/ptq.out"), percentile $(accuracy "$TMP/ptq_percentile.out")"

# Resume: the ranges, their shadows and the BN folding carry over exactly.
"$BIN/train_image_classifier" "${train[@]}" --train_dir="$TMP/a" --checkpoint_path="$TMP/float" \
  --quantize_delay=2 --max_number_of_steps=6 --learning_rate=0.01 2>"$TMP/a.log" \
  || { tail -20 "$TMP/a.log"; exit 1; }
RESUME_LOG="Resuming from" expect_exact_resume "${train[@]}" --checkpoint_path="$TMP/float" \
  --quantize_delay=2 --learning_rate=0.01

# Bad input, each one clear error.
expect_failure float_ckpt "has no quantization ranges" \
  "$BIN/eval_image_classifier" "${evaluate[@]}" --checkpoint_path="$TMP/float" --quantize
expect_failure per_channel_alone "apply with --quantize" \
  "$BIN/eval_image_classifier" "${evaluate[@]}" --checkpoint_path="$TMP/float" \
  --quantize_per_channel
expect_failure calibration_alone "apply with --quantize" \
  "$BIN/eval_image_classifier" "${evaluate[@]}" --checkpoint_path="$TMP/float" \
  --calibration_dataset_dir="$TMP/data"
convert_fashion_mnist "$TMP/fashion"
expect_failure calibration_channels "gives 1-channel images but the net takes 3" \
  "$BIN/eval_image_classifier" "${evaluate[@]}" --checkpoint_path="$TMP/float" --quantize \
  --calibration_dataset_dir="$TMP/fashion" --calibration_dataset_name=fashion_mnist
expect_failure freeze_alone "apply to quantization-aware training" \
  "$BIN/train_image_classifier" "${train[@]}" --train_dir="$TMP/x" --freeze_bn_delay=3
echo "PASS"
