#!/usr/bin/env bash
# The GPU training step, side by side in one run on one GPU (issue 13):
# Phases, run in this order whatever the order of the arguments:
#   tutorial  the TensorFlow CIFAR-10 tutorial's recipe
#             (configs/cifar10_tutorial.flags) with the whole
#             train_image_classifier: eager with the augmentation parameters
#             drawn per example on the CPU (the path before this work), eager
#             with them hashed on the GPU, the captured step (--cuda_graph),
#             and the captured step on a synthetic batch (the net alone)
#   resnet    TF-Slim's resnet_v1_50 at 224, bf16, channels-last, momentum,
#             on one synthetic batch on the GPU: ours eager and --cuda_graph,
#             PyTorch-Python eager AMP channels-last
#             (bench/train_gpu/resnet50_torch_gpu.py)
#   full      the tutorial recipe's 100 000 steps with --cuda_graph, timed
#             whole, and its moving averages evaluated
#   profile   where the step's time goes: --profile_steps over 20 steps of
#             the tutorial (captured and eager) and 5 of ResNet-50 (captured
#             and eager), the device time kernel by kernel
#             ($OUT/profile_*.txt, the traces beside them)
#   bn        batch norm alone, LibTorch's native kernels against cuDNN's
#             (bench/train_gpu/batch_norm_gpu.py)
#   compile   the PyTorch peer under torch.compile
#   jpeg      ResNet-50 as in resnet but fed by the streaming JPEG path:
#             PHOTO_DIR's image_folder TFRecords (bench/train_gpu/gpu_device_prepare.sh
#             PHOTOS=...), decoded and preprocessed (vgg: resnet's) per image
#             on JPEG_THREADS CPU threads (all cores), eager and --cuda_graph
# Results: one line per measurement on stdout and in $OUT/gpu_step_speed.txt,
# rows in bench/results/train_gpu.csv (bench/lib/results.sh; on a GPU machine
# whose copy is thrown away, BENCH_RESULTS_DIR=$OUT keeps them and
# `bench/lib/results.py merge FILE` appends them here); logs under $OUT.
#
#   BIN=build DATASET_DIR=/tmp/c10 bench/train_gpu/gpu_step_speed.sh tutorial resnet full compile
#
# Environment: BIN (folder with the tools; build), DATASET_DIR (CIFAR-10
# TFRecords; for tutorial), PHOTO_DIR (for jpeg), JPEG_THREADS (nproc),
# JPEG_RUNS (as RESNET_RUNS), PYTHON (python3 with torch, for resnet),
# BUDGET (seconds the whole script may take; 540), RESNET_BATCH (256),
# FULL_TIMEOUT (seconds for the 100 000 steps; 150), FULL_FLAGS (flags added
# to the full run, e.g. --precision=bf16), RESULTS (the results
# file), TUTORIAL_RUNS / RESNET_RUNS (which runs:
# name:steps:log_every:flags[:VAR=value ...] / name:flags[:VAR=value ...],
# separated by ';'; e.g.
# RESNET_RUNS="graph:--cuda_graph;graph_unfused:--cuda_graph:SLIMTORCH_FUSED_KERNELS=0").
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/build}
OUT=${OUT:-/tmp/gpu_step_speed}
PYTHON=${PYTHON:-python3}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT"
results=${RESULTS:-$OUT/gpu_step_speed.txt}
t0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - t0))); }
say() { echo "$*" | tee -a "$results"; }
. "$root/bench/lib/results.sh"
export BENCH_DEVICE=gpu
declare -A ours_ms  # ResNet-50 runs of ours: name -> ms/step, for the peers' rows
torch_peer="PyTorch-Python eager, AMP bf16 + channels-last"
# resnet_row MEASURE OURS_MS PEER_MS PEER_NAME NOTES
resnet_row() { bench_record train_gpu "$1" "$2" "$3" ms/step "$4" "$5"; }
torch_ms() {  # the "torch MODE batch B: X ms/step" line of a peer log
  sed -n "s/^torch $1 batch [0-9]*: \([0-9.]*\) ms\/step.*/\1/p" "$2" | tail -1
}

# Mean sec/step over the log lines after WARMUP steps of a training log,
# from each line's examples/sec (its sec/step has only three decimals).
sec_per_step() {  # log warmup every batch
  awk -v warmup="$2" -v every="$3" -v batch="$4" '
    /global step [0-9]+: loss/ {
      for (i = 1; i <= NF; ++i) if ($i == "step") step = $(i + 1) + 0
      for (i = 1; i <= NF; ++i) if ($i == "examples/sec)") secs = batch / $(i - 1)
      if (step > warmup) { total += secs * every; n += every }
    }
    END { if (n) printf "%.6f", total / n; else printf "nan" }' "$1"
}

train() {  # name steps every extra-args...
  local name=$1 steps=$2 every=$3
  shift 3
  rm -rf "/tmp/gss_$name"
  # The flags after the flagfile override its values.
  timeout "$(($(left) > 20 ? $(left) - 10 : 10))" "$BIN/train_image_classifier" \
    "$@" --train_dir="/tmp/gss_$name" --max_number_of_steps="$steps" \
    --log_every_n_steps="$every" --save_interval_secs=100000 \
    --save_summaries_secs=100000 > "$OUT/$name.log" 2>&1
  local rc=$?
  grep -E "could not be captured|captured;|Error|error" "$OUT/$name.log" | head -3
  return $rc
}

# TF-Slim's resnet_v1_50 at 224, bf16, channels-last, momentum, L2 1e-4 (the
# resnet, profile and jpeg phases; later flags override these).
B=${RESNET_BATCH:-256}
RESNET=(--model_name=resnet_v1_50 --batch_size="$B" --precision=bf16 --data_format=channels_last
        --optimizer=momentum --learning_rate=0.1 --weight_decay=0.0001)

# 60 ResNet-50 steps of batch $B per run, timed after 20. runs: name:flags[:VAR=value ...]
# (the environment of that run) separated by ';'; the net's flags follow.
resnet_runs() {  # log_prefix label label_suffix runs flags...
  local prefix=$1 label=$2 suffix=$3 spec=$4 run name args envs s
  local -a runs
  shift 4
  IFS=';' read -ra runs <<< "$spec"
  for run in "${runs[@]}"; do
    IFS=: read -r name args envs <<< "$run"
    (
      [[ -n "$envs" ]] && export $envs
      train "${prefix}_$name" 60 10 "$@" $args
    )
    s=$(sec_per_step "$OUT/${prefix}_$name.log" 20 10 "$B")
    say "$label $name batch $B$suffix: $(awk -v s="$s" -v b="$B" 'BEGIN { printf "%.2f ms/step, %.0f images/s", s * 1000, b / s }')"
    ours_ms[${prefix}_$name]=$(awk -v s="$s" 'BEGIN { if (s == "nan") print "-"; else printf "%.2f", s * 1000 }')
  done
}

if [[ " $* " == *" tutorial "* ]]; then
  : "${DATASET_DIR:?set DATASET_DIR to the CIFAR-10 TFRecords}"
  T=(--flagfile="$root/configs/cifar10_tutorial.flags" --dataset_dir="$DATASET_DIR")
  IFS=';' read -ra runs <<< "${TUTORIAL_RUNS:-eager_host_draws:3000:500:--augmentation_draws=host;eager_device_draws:3000:500:--augmentation_draws=device;graph:20000:2000:--cuda_graph;graph_synthetic:20000:2000:--cuda_graph --input_mode=synthetic}"
  for run in "${runs[@]}"; do
    IFS=: read -r name steps every args envs <<< "$run"
    (
      [[ -n "$envs" ]] && export $envs
      train "tutorial_$name" "$steps" "$every" "${T[@]}" $args
    )
    s=$(sec_per_step "$OUT/tutorial_$name.log" "$every" "$every" 128)
    say "tutorial $name: $(awk -v s="$s" 'BEGIN { printf "%.3f ms/step, %.0f images/s; 100000 steps: %.1f s", s * 1000, 128 / s, s * 100000 }')"
    bench_record train_gpu "tutorial recipe step, batch 128, $name" \
      "$(awk -v s="$s" 'BEGIN { if (s == "nan") print "-"; else printf "%.3f", s * 1000 }')" "" ms/step "" \
      "configs/cifar10_tutorial.flags $args ${envs:-}; $steps steps, the first $every untimed"
  done
fi

if [[ " $* " == *" resnet "* ]]; then
  mkdir -p /tmp/gss_none
  R=("${RESNET[@]}" --dataset_name=imagenet --dataset_dir=/tmp/gss_none --input_mode=synthetic)
  resnet_runs resnet "resnet_v1_50 ours" "" "${RESNET_RUNS:-eager:;graph:--cuda_graph}" "${R[@]}"
  env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 timeout 120 "$PYTHON" "$here/resnet50_torch_gpu.py" \
    --batch_size "$B" --steps 40 --warmup 10 --modes eager 2>&1 | tee "$OUT/resnet_torch_eager.log" | grep -E "^torch" | tee -a "$results"
  t=$(torch_ms eager "$OUT/resnet_torch_eager.log")
  for name in "${!ours_ms[@]}"; do
    [[ $name == resnet_* ]] || continue
    resnet_row "resnet_v1_50 step, bf16 channels-last, batch $B, synthetic, ${name#resnet_}" \
      "${ours_ms[$name]}" "$t" "$torch_peer" "60 steps, the first 20 untimed; the peer 40 after 10"
  done
fi
# The table train_image_classifier logs after the profiled steps.
profile_table() {  # log
  awk '/Profiled global steps/ { on = 1; sub(/^.*\] /, ""); print; next }
       on && /^[IWEF][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9] / { on = 0 }
       on { print }' "$1"
}

if [[ " $* " == *" profile "* ]]; then
  : "${DATASET_DIR:?set DATASET_DIR to the CIFAR-10 TFRecords}"
  mkdir -p /tmp/gss_none
  T=(--flagfile="$root/configs/cifar10_tutorial.flags" --dataset_dir="$DATASET_DIR")
  R=("${RESNET[@]}" --dataset_name=imagenet --dataset_dir=/tmp/gss_none --input_mode=synthetic)
  IFS=';' read -ra runs <<< "${PROFILE_RUNS:-tutorial_graph:T:330:301,320:--cuda_graph;tutorial_eager:T:330:301,320:--augmentation_draws=host;resnet_graph:R:40:31,35:--cuda_graph;resnet_eager:R:40:31,35:}"
  for run in "${runs[@]}"; do
    IFS=: read -r name which steps range args <<< "$run"
    if [[ $which == T ]]; then base=("${T[@]}"); else base=("${R[@]}"); fi
    train "profile_$name" "$steps" 100 "${base[@]}" --profile_steps="$range" $args
    profile_table "$OUT/profile_$name.log" > "$OUT/profile_$name.txt"
    for f in /tmp/gss_profile_$name/profile/*.json; do
      [[ -f $f ]] && gzip -c "$f" > "$OUT/profile_$name.trace.json.gz"
    done
    say "profile $name (steps $range): $(grep -m1 "us/step in" "$OUT/profile_$name.txt")"
    head -14 "$OUT/profile_$name.txt"
  done
fi

if [[ " $* " == *" full "* ]]; then
  : "${DATASET_DIR:?set DATASET_DIR to the CIFAR-10 TFRecords}"
  T=(--flagfile="$root/configs/cifar10_tutorial.flags" --dataset_dir="$DATASET_DIR")
  full=$(( $(left) - 30 ))
  full=$(( full > ${FULL_TIMEOUT:-150} ? ${FULL_TIMEOUT:-150} : full ))
  if (( full > 30 )); then
    rm -rf /tmp/gss_full
    start=$(date +%s.%N)
    timeout --signal=INT "$full" "$BIN/train_image_classifier" "${T[@]}" --cuda_graph \
      ${FULL_FLAGS:-} --train_dir=/tmp/gss_full > "$OUT/tutorial_full.log" 2>&1
    rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    last=$(grep -oE "global step [0-9]+" "$OUT/tutorial_full.log" | tail -1)
    say "tutorial full recipe --cuda_graph ${FULL_FLAGS:-}: rc $rc, $last, wall $wall s (tool start, decode and final save included)"
    grep -E "Finished training" "$OUT/tutorial_full.log" | sed 's/^.*\] //' | tee -a "$results"
    bench_record train_gpu "tutorial recipe run whole, --cuda_graph ${FULL_FLAGS:-}" "$wall" "" s "" \
      "wall time incl. start, decode, capture, final save; rc $rc, $last (100000 = the whole recipe)"
    "$BIN/eval_image_classifier" --checkpoint_path=/tmp/gss_full --eval_dir=/tmp/gss_full/eval \
      --dataset_name=cifar10 --dataset_split_name=test --dataset_dir="$DATASET_DIR" \
      --model_name=cifarnet_tutorial --moving_average_decay=0.9999 > "$OUT/tutorial_eval.log" 2>&1
    grep -E "eval/Accuracy|eval/Recall" "$OUT/tutorial_eval.log" | sed 's/^.*\] //' | tee -a "$results"
  fi
fi

if [[ " $* " == *" jpeg "* ]]; then
  : "${PHOTO_DIR:?set PHOTO_DIR to image_folder TFRecords of JPEG photos}"
  # lr 0.01: the same work per step, and 5 classes of 192 real photos stay
  # finite where the synthetic batch's 0.1 could diverge and stop the run.
  J=("${RESNET[@]}" --dataset_name=image_folder --dataset_dir="$PHOTO_DIR"
     --input_mode=streaming --num_preprocessing_threads="${JPEG_THREADS:-$(nproc)}"
     --learning_rate=0.01)
  resnet_runs jpeg "resnet_v1_50 streaming JPEG" ", ${JPEG_THREADS:-$(nproc)} threads" \
    "${JPEG_RUNS:-eager:;graph:--cuda_graph}" "${J[@]}"
  t=$(torch_ms eager "$OUT/resnet_torch_eager.log" 2>/dev/null)
  for name in "${!ours_ms[@]}"; do
    [[ $name == jpeg_* ]] || continue
    resnet_row "resnet_v1_50 step, bf16 channels-last, batch $B, streaming JPEG, ${name#jpeg_}" \
      "${ours_ms[$name]}" "$t" "${t:+$torch_peer (synthetic batch)}" \
      "PHOTO_DIR image_folder, ${JPEG_THREADS:-$(nproc)} decoding threads; 60 steps, the first 20 untimed"
  done
fi

if [[ " $* " == *" bn "* ]]; then
  env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 timeout 120 "$PYTHON" "$here/batch_norm_gpu.py" \
    > "$OUT/batch_norm_gpu.log" 2>&1
  cat "$OUT/batch_norm_gpu.log"
  grep -E "^batch norm per" "$OUT/batch_norm_gpu.log" | tee -a "$results"
fi

if [[ " $* " == *" compile "* ]]; then
  if (( $(left) > 100 )); then
    env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 timeout $(( $(left) - 20 )) "$PYTHON" "$here/resnet50_torch_gpu.py" \
      --batch_size "$B" --steps 40 --warmup 10 --modes compile > "$OUT/resnet_torch_compile.log" 2>&1
    grep -E "^torch" "$OUT/resnet_torch_compile.log" | tee -a "$results" || say "torch compile: no result in the time left (rc $?)"
    t=$(torch_ms compile "$OUT/resnet_torch_compile.log")
    if [[ -n "$t" && -n "${ours_ms[resnet_graph]:-}" ]]; then
      resnet_row "resnet_v1_50 step, bf16 channels-last, batch $B, synthetic, graph" \
        "${ours_ms[resnet_graph]}" "$t" "PyTorch-Python torch.compile, AMP bf16 + channels-last" \
        "the peer after its compile; 40 steps after 10"
    fi
  else
    say "torch compile: skipped, $(left) s left"
  fi
fi

say "gpu_step_speed: done in $(( $(date +%s) - t0 )) s"
