#!/usr/bin/env bash
# 8-bit accuracy end to end on Fashion-MNIST (issue 32's verification): for
# each net, float training from scratch, then
#   (a) quantization-aware fine-tuning of the float checkpoint
#       (--quantize_delay=0, a quarter of the float steps, or QAT_STEPS_<net>,
#       at a tenth of the learning rate), evaluated with eval_image_classifier --quantize;
#   (b) post-training calibration of the float checkpoint, one eval per
#       --calibration_method (10 batches of 32 training images, the defaults);
#   the float checkpoint's own eval, and the float checkpoint fine-tuned as in
#   (a) without quantization (QAT's control: the float nets here are not
#   converged, so extra steps alone move top-1); and, as a diagnosis, (a) and
#   (b)-minmax with one weight range per output channel instead of TF-Slim's one per
#   tensor, which is what costs the MobileNet here. All evals: the 10 000
#   test images.
# The targets: QAT within 1 point of the float top-1 (here: of the control),
# calibration within 2.
#
# Nets (NETS, default "mobilenet_v3_small_minimalistic cifarnet"):
#   mobilenet_v3_small_minimalistic  batch norm (decay 0.997) and depthwise
#       convolutions, 28x28. mobilenet_v1_025 would be the obvious choice but
#       its batch norm's moving averages decay by 0.9997: they need ~10 000
#       steps to forget their start values (0 / 1), far beyond this budget,
#       and a float eval with half-initial statistics is meaningless.
#   cifarnet  no batch norm; fixed at 32x32, the 28x28 images padded to it
#       (lenet preprocessing pads / crops to the size asked).
#   mobilenet_v1, mobilenet_v2, resnet_v1_50  (NETS="..." to run them) the
#       nets of the int8 ONNX agreement check, at 32x32; mobilenet_v1's float
#       run is 8000 steps, long enough for its 0.9997 batch norm averages.
# Training runs with --seed=SEED (eval has no randomness), all with THREADS
# intra-op threads; training uses momentum 0.9 with a fixed learning rate (not
# Adam: TF-Slim's --opt_epsilon default of 1.0, which the tool keeps, makes
# Adam at lr 1e-3 a tiny SGD step; neither net learnt in 100-400 steps),
# lenet preprocessing (x/128 - 1, no
# augmentation) and TF-Slim's default weight decay 4e-5.
#
#   bench/quantization/fashion_mnist_accuracy.sh
#   NETS=cifarnet FLOAT_STEPS_cifarnet=200 bench/quantization/fashion_mnist_accuracy.sh
#
# Environment: BUILD_DIR (the tools; LD_LIBRARY_PATH is set to it too),
# WORK (checkpoints and logs, default /tmp/q32-fmnist; a finished phase whose
# output is there is not rerun), DATA (the converted dataset, default
# $WORK/data), NETS, SEED (0), THREADS (2), METHODS ("minmax percentile
# entropy"), FLOAT_STEPS_<net>, QAT_STEPS_<net>, BATCH_<net>, LR_<net>, SIZE_<net> (per-net
# settings below), DIAGNOSIS=0 or DIAGNOSIS_<net>=0 (skip the per-channel
# diagnosis runs), BENCH_RECORD=0 (print the rows, write nothing).
# Appends rows to bench/results/quantization.csv:
#   date,machine,commit,measure,value,reference,difference,notes
# (value and reference: top-1 in %, difference in points; times in s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=${WORK:-/tmp/q32-fmnist}
DATA=${DATA:-$WORK/data}
NETS=${NETS:-"mobilenet_v3_small_minimalistic cifarnet"}
SEED=${SEED:-0}
THREADS=${THREADS:-2}
METHODS=${METHODS:-"minmax percentile entropy"}
# Per-net float recipe: steps, batch, learning rate, image size.
FLOAT_STEPS_mobilenet_v3_small_minimalistic=${FLOAT_STEPS_mobilenet_v3_small_minimalistic:-1000}
BATCH_mobilenet_v3_small_minimalistic=${BATCH_mobilenet_v3_small_minimalistic:-32}
LR_mobilenet_v3_small_minimalistic=${LR_mobilenet_v3_small_minimalistic:-0.05}
SIZE_mobilenet_v3_small_minimalistic=${SIZE_mobilenet_v3_small_minimalistic:-28}
FLOAT_STEPS_cifarnet=${FLOAT_STEPS_cifarnet:-1000}
BATCH_cifarnet=${BATCH_cifarnet:-64}
LR_cifarnet=${LR_cifarnet:-0.01}
SIZE_cifarnet=${SIZE_cifarnet:-32}
# The nets of the int8 ONNX agreement check (onnx_agreement.sh), at 32x32:
# mobilenet_v1's batch norm decays by 0.9997, so its float run is long
# enough (8000 steps) for the moving statistics to forget their start values
# (0.9997^8000 = 9%); mobilenet_v2 and resnet_v1_50 decay by 0.997.
# resnet_v1_50's loss climbed at lr 0.05 (8 -> 16 -> 8, 14 % after 600
# steps) and at lr 0.01 (1.8 -> 10.5 in 300 steps): lr 0.002; and its batch
# norm averages (decay 0.997) need ~1500 steps to forget their start values
# (after 300 steps eval scored 10 %).
FLOAT_STEPS_mobilenet_v1=${FLOAT_STEPS_mobilenet_v1:-8000}
FLOAT_STEPS_mobilenet_v2=${FLOAT_STEPS_mobilenet_v2:-2000}
FLOAT_STEPS_resnet_v1_50=${FLOAT_STEPS_resnet_v1_50:-1500}
QAT_STEPS_resnet_v1_50=${QAT_STEPS_resnet_v1_50:-300}
LR_resnet_v1_50=${LR_resnet_v1_50:-0.002}
DIAGNOSIS_resnet_v1_50=${DIAGNOSIS_resnet_v1_50:-0}  # ~1 s a step here
for n in mobilenet_v1 mobilenet_v2 resnet_v1_50; do
  declare "BATCH_$n=$(v=BATCH_$n; echo "${!v:-32}")"
  declare "LR_$n=$(v=LR_$n; echo "${!v:-0.05}")"
  declare "SIZE_$n=$(v=SIZE_$n; echo "${!v:-32}")"
done
CSV=$root/bench/results/quantization.csv
COMMIT=${BENCH_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
MACHINE=$(python3 -c "import sys; sys.path.insert(0, '$root/bench/lib'); import results; print(results.cpu_machine())")
mkdir -p "$WORK"

if [[ ! -f "$DATA/labels.txt" ]]; then
  "$BIN/download_and_convert_data" --dataset_name=fashion_mnist --dataset_dir="$DATA" \
    --source_url=file:///usr/share/datasets/fashion-mnist/ 2>"$WORK/convert.log" ||
    { cat "$WORK/convert.log" >&2; exit 1; }
fi

# timed NAME CMD...: runs CMD with its stderr in $dir/NAME.log, its wall time
# in $dir/NAME.time; skipped when NAME.time exists (a finished phase).
timed() {
  local name=$1; shift
  [[ -f "$dir/$name.time" ]] && return 0
  local start=$SECONDS
  "$@" >"$dir/$name.out" 2>"$dir/$name.log" ||
    { echo "FAILED ($name): $*" >&2; tail -3 "$dir/$name.log" >&2; return 1; }
  echo $((SECONDS - start)) >"$dir/$name.time"
}
top1() {  # eval/Accuracy[0.9123] -> 91.23
  sed -n 's/^eval\/Accuracy\[\([0-9.]*\)\]$/\1/p' "$dir/$1.out" | awk '{printf "%.2f\n", 100 * $1}'
}
record() {  # MEASURE VALUE REFERENCE NOTES: one CSV row, difference = value - reference
  python3 - "$@" <<PY
import csv, datetime, io, os, sys
measure, value, reference, notes = sys.argv[1:5]
diff = "%.2f" % (float(value) - float(reference)) if reference and value else ""
row = [datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "$MACHINE", "$COMMIT",
       measure, value, reference, diff, notes]
if os.environ.get("BENCH_RECORD") == "0":
    w = csv.writer(sys.stderr); w.writerow(row); sys.exit()
new = not os.path.exists("$CSV")
with open("$CSV", "a", newline="") as f:
    w = csv.writer(f)
    if new:
        w.writerow(["date", "machine", "commit", "measure", "value", "reference", "difference", "notes"])
    w.writerow(row)
PY
}

run_net() {
  local net=$1
  local steps_var=FLOAT_STEPS_$net batch_var=BATCH_$net lr_var=LR_$net size_var=SIZE_$net
  [[ -n "${!steps_var:-}" ]] || { echo "no recipe for $net: set $steps_var, $batch_var, $lr_var and $size_var" >&2; exit 1; }
  local steps=${!steps_var} batch=${!batch_var} lr=${!lr_var} size=${!size_var}
  local qat_steps_var=QAT_STEPS_$net
  local qat_steps=${!qat_steps_var:-$((steps / 4))} qat_lr
  qat_lr=$(python3 -c "print($lr / 10)")
  dir=$WORK/$net
  mkdir -p "$dir"
  local common=(--dataset_name=fashion_mnist --dataset_dir="$DATA" --model_name="$net"
    --preprocessing_name=lenet --num_intra_op_threads="$THREADS")
  local train=("$BIN/train_image_classifier" "${common[@]}" --train_image_size="$size"
    --seed="$SEED" --batch_size="$batch" --optimizer=momentum --learning_rate_decay_type=fixed
    --log_every_n_steps=100 --save_summaries_secs=0)
  local eval=("$BIN/eval_image_classifier" "${common[@]}" --eval_image_size="$size"
    --dataset_split_name=test)

  echo "== $net: float training, $steps steps of $batch at lr $lr" >&2
  timed float_train "${train[@]}" --train_dir="$dir/float" --learning_rate="$lr" \
    --max_number_of_steps="$steps"
  timed float_eval "${eval[@]}" --checkpoint_path="$dir/float"
  echo "== $net: QAT, $qat_steps steps at lr $qat_lr" >&2
  # A QAT run that diverges (per-tensor weight ranges can) is a result too:
  # recorded as such, and the other phases still run.
  if timed qat_train "${train[@]}" --train_dir="$dir/qat" --checkpoint_path="$dir/float" \
    --quantize_delay=0 --learning_rate="$qat_lr" --max_number_of_steps="$qat_steps"; then
    timed qat_eval "${eval[@]}" --checkpoint_path="$dir/qat" --quantize
  fi
  # The control for QAT: the same fine-tuning without quantization, since the
  # float model is not converged and more steps alone change its top-1.
  echo "== $net: float fine-tuning control, $qat_steps steps at lr $qat_lr" >&2
  timed tuned_train "${train[@]}" --train_dir="$dir/tuned" --checkpoint_path="$dir/float" \
    --learning_rate="$qat_lr" --max_number_of_steps="$qat_steps"
  timed tuned_eval "${eval[@]}" --checkpoint_path="$dir/tuned"
  for m in $METHODS; do
    echo "== $net: calibration, $m" >&2
    timed "ptq_${m}_eval" "${eval[@]}" --checkpoint_path="$dir/float" --quantize \
      --calibration_dataset_dir="$DATA" --calibration_method="$m"
  done
  local diag_var=DIAGNOSIS_$net
  if [[ "${!diag_var:-${DIAGNOSIS:-1}}" == 1 ]]; then
    # Diagnosis, not a fourth method: minmax with one weight range per output
    # channel instead of TF-Slim's one per tensor (eval --quantize_per_channel).
    timed ptq_minmax_per_channel_eval "${eval[@]}" --checkpoint_path="$dir/float" --quantize \
      --calibration_dataset_dir="$DATA" --calibration_method=minmax --quantize_per_channel

    # Diagnosis: QAT again with per-channel weight ranges (train and eval).
    timed qat_per_channel_train "${train[@]}" --train_dir="$dir/qat_per_channel" \
      --checkpoint_path="$dir/float" --quantize_delay=0 --quantize_per_channel \
      --learning_rate="$qat_lr" --max_number_of_steps="$qat_steps"
    timed qat_per_channel_eval "${eval[@]}" --checkpoint_path="$dir/qat_per_channel" --quantize \
      --quantize_per_channel
  fi

  local float qat tuned t
  float=$(top1 float_eval)
  tuned=$(top1 tuned_eval)
  local recipe="${size}x${size}, lenet preprocessing, momentum 0.9, seed $SEED, $THREADS threads (shared 2-core machine)"
  record "$net float top-1 (test 10k)" "$float" "" \
    "$steps steps of batch $batch at lr $lr from scratch, $(cat "$dir/float_train.time") s; eval $(cat "$dir/float_eval.time") s; $recipe"
  record "$net float fine-tuned top-1 (test 10k), control for QAT" "$tuned" "$float" \
    "the QAT fine-tuning without --quantize_delay: $qat_steps steps at lr $qat_lr, $(cat "$dir/tuned_train.time") s; $recipe"
  if [[ -f "$dir/qat_eval.time" ]]; then
    qat=$(top1 qat_eval)
    record "$net QAT top-1 (test 10k, --quantize)" "$qat" "$float" \
      "--quantize_delay=0 from the float checkpoint: $qat_steps steps at lr $qat_lr, $(cat "$dir/qat_train.time") s; eval $(cat "$dir/qat_eval.time") s; target >= -1; $recipe"
    record "$net QAT top-1 against the float fine-tuned control" "$qat" "$tuned" \
      "the same QAT run, compared with the same fine-tuning in float; target >= -1; $recipe"
  else
    qat=diverged
    record "$net QAT top-1 (test 10k, --quantize)" "" "$float" \
      "training diverged: $(grep -m1 -o 'error: .\{0,160\}' "$dir/qat_train.log" || tail -1 "$dir/qat_train.log"); --quantize_delay=0 from the float checkpoint, $qat_steps steps at lr $qat_lr; $recipe"
  fi
  if [[ -f "$dir/qat_per_channel_eval.time" ]]; then
    t=$(top1 qat_per_channel_eval)
    record "$net QAT, per-channel weights, top-1 against the float fine-tuned control" "$t" "$tuned" \
      "diagnosis: as QAT but --quantize_per_channel in training and eval, $(cat "$dir/qat_per_channel_train.time") s; $recipe"
  fi
  for m in $METHODS; do
    t=$(top1 "ptq_${m}_eval")
    record "$net PTQ $m top-1 (test 10k, --quantize --calibration_method=$m)" "$t" "$float" \
      "float checkpoint calibrated on 10 batches of 32 training images; calibration + eval $(cat "$dir/ptq_${m}_eval.time") s; target >= -2; $recipe"
  done
  if [[ -f "$dir/ptq_minmax_per_channel_eval.time" ]]; then
    t=$(top1 ptq_minmax_per_channel_eval)
    record "$net PTQ minmax, per-channel weights, top-1 (test 10k, --quantize --quantize_per_channel)" "$t" "$float" \
      "diagnosis: as PTQ minmax but one weight range per output channel (TF-Slim's rewrite has one per tensor); calibration + eval $(cat "$dir/ptq_minmax_per_channel_eval.time") s; $recipe"
  fi
  printf '%s: float %s, QAT %s (float fine-tuned %s)' "$net" "$float" "$qat" "$tuned" >&2
  for m in $METHODS; do printf ', %s %s' "$m" "$(top1 "ptq_${m}_eval")" >&2; done
  echo >&2
}

for net in $NETS; do run_net "$net"; done
