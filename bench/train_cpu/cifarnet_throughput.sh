#!/usr/bin/env bash
# CifarNet training throughput, side by side in one run (batch 128, SGD
# lr 0.1, weight decay 0.004, the same number of threads for all):
#   tool:      train_image_classifier, the whole tool (TFRecord reading, PNG
#              decoding, cifarnet preprocessing, the step, a checkpoint at
#              the end); steady state from its "examples/sec" log lines, the
#              windows of the first WARMUP steps dropped;
#   step:      bench/step_profile, the same net's training step cycling
#              through 50 batches of the same data made before timing (no
#              data path);
#   input %:   the tool's own count of the time it waited for batches
#              ("Finished training ... (X%)"), the data path's direct cost;
#   peer:      bench/train_cpu/cifarnet_pytorch.py, the same model in Python PyTorch
#              (Debian's python3-torch, the same LibTorch) with a torchvision
#              Dataset/transforms/DataLoader (NUM_WORKERS workers);
#   peer-pre:  the same with --premade: the model step on one pre-made batch.
# Rounds alternate (the VM's speed drifts); each side's median round is
# reported, with the ratios of the medians.
#
# Data: Fashion-MNIST repackaged as CIFAR-10 (scripts/fashion_mnist_to_cifar.py)
# and converted with download_and_convert_data, cached in BENCH_DATA (default
# <build>/bench_data/cifar10_fmnist) between runs.
#
#   bench/train_cpu/cifarnet_throughput.sh                  # STEPS=100 WARMUP=20 ROUNDS=3
#   STEPS=20 WARMUP=10 ROUNDS=1 MODEL=lenet LEARNING_RATE=0.01 \
#     bench/train_cpu/cifarnet_throughput.sh
#                                                 # plumbing check with lenet
# Environment: STEPS (timed steps, a multiple of LOG_EVERY), WARMUP (untimed
# steps first, a multiple of LOG_EVERY), LOG_EVERY (10), ROUNDS (3), THREADS
# (2), NUM_WORKERS (the peer's DataLoader workers, 1), MODEL (net of the tool
# and step_profile, cifarnet; the peer is always CifarNet), LEARNING_RATE
# (0.1; lenet needs 0.01 not to diverge), TOOL_ARGS (extra
# train_image_classifier flags), PY_OMP_WAIT_POLICY (the peer's
# OMP_WAIT_POLICY; unset: as a user runs it), BUILD_DIR, BENCH_DATA,
# SKIP_BUILD=1 (use the build as it is).
# Appends rows to bench/results/train_cpu.csv (bench/lib/results.sh); the
# text log goes to bench/results/logs/cifarnet_throughput-<date>.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-20}
LOG_EVERY=${LOG_EVERY:-10}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
NUM_WORKERS=${NUM_WORKERS:-1}
MODEL=${MODEL:-cifarnet}
LEARNING_RATE=${LEARNING_RATE:-0.1}
TOOL_ARGS=${TOOL_ARGS:-}
BATCH=128
DATA=${BENCH_DATA:-$BIN/bench_data/cifar10_fmnist}
if ((STEPS % LOG_EVERY || WARMUP % LOG_EVERY || STEPS == 0)); then
  echo "STEPS ($STEPS) and WARMUP ($WARMUP) must be multiples of LOG_EVERY ($LOG_EVERY), STEPS > 0" >&2
  exit 1
fi

. "$root/bench/lib/results.sh"
if [[ "${SKIP_BUILD:-}" != 1 ]]; then
  "$root/scripts/install_deps.sh" --bench
  "$root/scripts/build.sh" -DSLIMTORCH_BUILD_BENCH=ON
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$root/bench/results/logs"
out="$root/bench/results/logs/cifarnet_throughput-$(date +%F).txt"

# Data, made once: the archive, its extracted files (the peer reads them) and
# the TFRecords (the tool reads them).
if [[ ! -f "$DATA/tfrecords/labels.txt" ]]; then
  mkdir -p "$DATA"
  python3 "$root/scripts/fashion_mnist_to_cifar.py" --output="$DATA/source/cifar-10-binary.tar.gz"
  rm -rf "$DATA/source/cifar-10-batches-bin"
  tar -xzf "$DATA/source/cifar-10-binary.tar.gz" -C "$DATA/source"
  "$BIN/download_and_convert_data" --dataset_name=cifar10 --dataset_dir="$DATA/tfrecords" \
    --source_url="file://$DATA/source/" 2>"$TMP/convert.log" ||
    { cat "$TMP/convert.log" >&2; exit 1; }
fi

# The tool and step_profile need MODEL registered (cifarnet joins the library
# separately); without it only the Python peer runs.
have_model=1
if ! "$BIN/bench/step_profile" --model_name="$MODEL" --steps=1 --warmup=0 \
  --breakdown=false >/dev/null 2>"$TMP/probe.log"; then
  have_model=0
  echo "note: $(tail -1 "$TMP/probe.log") -- skipping train_image_classifier and step_profile" >&2
fi

# Median of the arguments; "-" when there are none.
median() {
  printf '%s\n' "$@" | { grep -v '^-$' || true; } | sort -g |
    awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'
}
run_tool() {
  rm -rf "$TMP/train"
  "$BIN/train_image_classifier" --train_dir="$TMP/train" --dataset_name=cifar10 \
    --dataset_dir="$DATA/tfrecords" --model_name="$MODEL" --batch_size=$BATCH \
    --optimizer=sgd --learning_rate="$LEARNING_RATE" --learning_rate_decay_type=fixed \
    --weight_decay=0.004 --max_number_of_steps=$((WARMUP + STEPS)) \
    --log_every_n_steps="$LOG_EVERY" --num_intra_op_threads="$THREADS" \
    --num_readers=1 --num_preprocessing_threads=1 $TOOL_ARGS \
    >/dev/null 2>"$TMP/tool.log" || { tail -3 "$TMP/tool.log" >&2; echo -; return; }
  # Each window has LOG_EVERY steps, so the steady rate over the windows after
  # the warm-up ones is the harmonic mean of their examples/sec.
  sed -n 's/.*sec\/step, \([0-9.]*\) examples\/sec.*/\1/p' "$TMP/tool.log" |
    tail -n +$((WARMUP / LOG_EVERY + 1)) |
    awk '{s += 1 / $1; n++} END {if (n) printf "%.1f\n", n / s; else print "-"}'
  sed -n 's/.*waiting for input batches (\([0-9.e-]*\)%).*/\1/p' "$TMP/tool.log" \
    >"$TMP/input_share"
}
run_step() {
  "$BIN/bench/step_profile" --model_name="$MODEL" --batch_size=$BATCH \
    --learning_rate="$LEARNING_RATE" --weight_decay=0.004 --steps="$STEPS" --warmup="$WARMUP" \
    --threads="$THREADS" --breakdown=false --dataset_name=cifar10 \
    --dataset_dir="$DATA/tfrecords" --premade_batches=50 |
    sed -n 's/^step_profile .*images_per_sec=\([0-9.]*\).*/\1/p'
}
run_peer() {  # extra arguments go to the peer
  env ${PY_OMP_WAIT_POLICY:+OMP_WAIT_POLICY=$PY_OMP_WAIT_POLICY} /usr/bin/python3 \
    "$here/cifarnet_pytorch.py" --data_dir="$DATA/source" --batch_size=$BATCH \
    --learning_rate="$LEARNING_RATE" \
    --steps="$STEPS" --warmup="$WARMUP" --threads="$THREADS" "$@" |
    sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p'
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
tool_rounds=(); step_rounds=(); peer_rounds=(); pre_rounds=(); input_rounds=()
for ((r = 0; r < ROUNDS; r++)); do
  if ((have_model)); then
    tool_rounds+=("$(run_tool)")
    input_rounds+=("$(printf '%.2f' "$(cat "$TMP/input_share" 2>/dev/null || echo 0)")")
    step_rounds+=("$(run_step)")
  else
    tool_rounds+=(-); step_rounds+=(-); input_rounds+=(-)
  fi
  peer_rounds+=("$(run_peer --num_workers="$NUM_WORKERS")")
  pre_rounds+=("$(run_peer --premade)")
  echo "round $((r + 1))/$ROUNDS: tool ${tool_rounds[r]} (input ${input_rounds[r]}%), step ${step_rounds[r]}," \
    "peer ${peer_rounds[r]}, peer premade ${pre_rounds[r]} images/s" >&2
done
tool=$(median "${tool_rounds[@]}")
input_share=$(median "${input_rounds[@]}")
step=$(median "${step_rounds[@]}")
peer=$(median "${peer_rounds[@]}")
pre=$(median "${pre_rounds[@]}")
# ratio A B: A / B, "-" when either is missing.
ratio() {
  [[ "$1" == - || "$2" == - ]] && { echo -; return; }
  python3 -c "print('%.2fx' % ($1 / $2))"
}
# overhead FULL BARE: the share of FULL's time per image not spent in BARE's
# step, in percent.
overhead() {
  [[ "$1" == - || "$2" == - ]] && { echo -; return; }
  python3 -c "print('%.1f%%' % (100 * (1 - $1 / $2)))"
}
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
{
  echo "date: $(date +%F)"
  echo "machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "model: $MODEL (peer: cifarnet), learning rate: $LEARNING_RATE, threads: $THREADS, batch: $BATCH, timed steps: $STEPS after $WARMUP warm-up steps, rounds: $ROUNDS"
  [[ "$MODEL" == cifarnet ]] || echo "NOTE: MODEL=$MODEL, a plumbing check: the ratios compare different nets"
  echo "tool (train_image_classifier):    $tool images/s (median; rounds: ${tool_rounds[*]})"
  echo "step_profile (pre-made batch):    $step images/s (median; rounds: ${step_rounds[*]})"
  echo "python peer, DataLoader (${NUM_WORKERS} workers): $peer images/s (median; rounds: ${peer_rounds[*]})"
  echo "python peer, --premade:           $pre images/s (median; rounds: ${pre_rounds[*]})"
  echo "python peer OMP_WAIT_POLICY: ${PY_OMP_WAIT_POLICY:-(unset)}; tool and step_profile: ${OMP_WAIT_POLICY:-unset (the tools set GOMP_SPINCOUNT=30000, OPENBLAS_THREAD_TIMEOUT=16)}"
  echo "tool vs step_profile: $(ratio "$tool" "$step") (data path overhead $(overhead "$tool" "$step"))"
  echo "tool's time waiting for input batches: ${input_share}% (median; rounds: ${input_rounds[*]})"
  echo "tool vs python peer: $(ratio "$tool" "$peer"); step_profile vs python --premade: $(ratio "$step" "$pre")"
  echo "python peer vs its --premade: $(ratio "$peer" "$pre") (data path overhead $(overhead "$peer" "$pre"))"
} | tee "$out"
how="median of $ROUNDS alternated rounds of $STEPS steps after $WARMUP"
[[ "$MODEL" == cifarnet ]] || how="MODEL=$MODEL against the peer's cifarnet: a plumbing check; $how"
bench_record train_cpu "$MODEL tool, batch $BATCH, $THREADS threads" "$tool" "$peer" images/s \
  "PyTorch Python + torchvision DataLoader ($NUM_WORKERS worker)" \
  "$how; the tool waited ${input_share}% for input; tool vs step_profile $(overhead "$tool" "$step")"
bench_record train_cpu "$MODEL step on pre-made batches, batch $BATCH, $THREADS threads" "$step" "$pre" images/s \
  "PyTorch Python --premade" "$how; ours: step_profile on 50 real batches"
