#!/usr/bin/env bash
# Step time of the TensorFlow CIFAR-10 tutorial's recipe
# (configs/cifar10_tutorial.flags: cifarnet_tutorial, batch 128, plain SGD,
# moving averages 0.9999, the in-memory batched input path) with the whole
# train_image_classifier, on the device the tool picks: the first CUDA GPU
# when there is one, else the CPU (CLONE_ON_CPU=1 forces the CPU).
# Reports the steady-state sec/step (from the tool's log lines, the first
# WARMUP steps dropped), steps/s, and the projected time of the tutorial's
# 100 000 steps next to the tutorial's own figure (Tesla K40m: 0.25-0.35
# sec/batch, ~86% after 100K steps in ~4 hours). With EVAL=1 the moving
# averages of the last checkpoint are then evaluated on the test split.
#
#   DATASET_DIR=/tmp/cifar10 bench/train_gpu/cifar10_tutorial_speed.sh
#
# Environment: DATASET_DIR (CIFAR-10 TFRecords from download_and_convert_data;
# required), STEPS (timed steps, a multiple of LOG_EVERY; 2000), WARMUP
# (500), LOG_EVERY (100), TRAIN_DIR (a fresh temporary folder), BUILD_DIR,
# CLONE_ON_CPU, EVAL, TOOL_ARGS (extra train_image_classifier flags).
# Appends a row to bench/results/train_gpu.csv (bench/lib/results.sh; the
# machine is the GPU, or the CPU with CLONE_ON_CPU=1 or none).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
: "${DATASET_DIR:?set DATASET_DIR to the CIFAR-10 TFRecords folder}"
STEPS=${STEPS:-2000}
WARMUP=${WARMUP:-500}
LOG_EVERY=${LOG_EVERY:-100}
if ((STEPS % LOG_EVERY || WARMUP % LOG_EVERY || STEPS == 0)); then
  echo "STEPS ($STEPS) and WARMUP ($WARMUP) must be multiples of LOG_EVERY ($LOG_EVERY), STEPS > 0" >&2
  exit 1
fi
TRAIN_DIR=${TRAIN_DIR:-$(mktemp -d)}
mkdir -p "$TRAIN_DIR"
log=$TRAIN_DIR/train.log

"$BIN/train_image_classifier" \
  --flagfile="$root/configs/cifar10_tutorial.flags" \
  --dataset_dir="$DATASET_DIR" --train_dir="$TRAIN_DIR" \
  --max_number_of_steps=$((WARMUP + STEPS)) --log_every_n_steps="$LOG_EVERY" \
  --save_interval_secs=3600 --save_summaries_secs=3600 \
  ${CLONE_ON_CPU:+--clone_on_cpu} ${TOOL_ARGS:-} 2>&1 | tee "$log" |
  grep -E 'Training |Input:|Finished' >&2

# "global step N: loss = L (S sec/step, E examples/sec)", one per LOG_EVERY;
# the time of a step is taken from E (S has only three decimals, TF-Slim's
# format, too coarse for a GPU step of a few milliseconds).
awk -v warmup="$WARMUP" -v every="$LOG_EVERY" '
  /global step [0-9]+: loss/ {
    for (i = 1; i <= NF; ++i) if ($i == "step") step = $(i + 1) + 0
    for (i = 1; i <= NF; ++i) if ($i == "examples/sec)") secs = 128 / $(i - 1)
    if (step > warmup) { total += secs * every; n += every }
  }
  END {
    if (n == 0) { print "no timed steps in the log" > "/dev/stderr"; exit 1 }
    s = total / n
    printf "steps timed: %d (after %d warm-up)\n", n, warmup
    printf "sec/step: %.5f   steps/s: %.1f   examples/s: %.0f\n", s, 1 / s, 128 / s
    printf "ms/step: %.4f\n", s * 1000
    printf "projected 100000 steps: %.2f h (%.1f min); TF tutorial on a Tesla K40m: ~4 h (0.25-0.35 sec/batch)\n",
           s * 100000 / 3600, s * 100000 / 60
  }' "$log" | tee "$TRAIN_DIR/speed.txt"
. "$root/bench/lib/results.sh"
[[ -n "${CLONE_ON_CPU:-}" ]] && export BENCH_DEVICE=cpu
ms=$(awk '/^ms\/step:/ { printf "%.3f", $2 }' "$TRAIN_DIR/speed.txt")
bench_record train_gpu "tutorial recipe step, batch 128, train_image_classifier${CLONE_ON_CPU:+ on the CPU}" \
  "$ms" "" ms/step "" "configs/cifar10_tutorial.flags ${TOOL_ARGS:-}; $STEPS steps after $WARMUP; the TF tutorial on a Tesla K40m: 250-350 ms/step (its README)"

if [[ "${EVAL:-}" == 1 ]]; then
  "$BIN/eval_image_classifier" \
    --checkpoint_path="$TRAIN_DIR" --eval_dir="$TRAIN_DIR/eval" \
    --dataset_name=cifar10 --dataset_split_name=test \
    --dataset_dir="$DATASET_DIR" --model_name=cifarnet_tutorial \
    --moving_average_decay=0.9999 ${CLONE_ON_CPU:+--clone_on_cpu} 2>&1 |
    grep -E 'eval/|Evaluated|error' || true
fi
