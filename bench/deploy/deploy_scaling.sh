#!/usr/bin/env bash
# Data-parallel scaling on the CPU, side by side in one run: steps per second
# of cifarnet and resnet_v1_50 with 1 and 2 clones,
#   tool:  train_image_classifier --num_clones=N --clone_on_cpu (the whole
#          tool: in-memory CIFAR-format input, each clone augmenting its own
#          slice, the Gloo all-reduce overlapping backward), steady state from
#          its log windows after WARMUP steps;
#   peer:  bench/deploy/ddp_peer.py, PyTorch DistributedDataParallel over
#          torch.distributed Gloo (Debian's python3-torch, the same LibTorch),
#          same model and per-clone batch, on one pre-made batch (no input
#          path at all).
# One clone gets every core (THREADS), two clones THREADS/2 each, on both
# sides. Rounds alternate (the VM's speed drifts); each cell is the median
# round. "scaling" = 2-clone images/s over 1-clone images/s; the all-reduce
# path's cost shows as the gap between that and the compute's own scaling.
#
# Data: Fashion-MNIST repackaged as CIFAR-10 (scripts/fashion_mnist_to_cifar.py),
# converted once into BENCH_DATA (default <build>/bench_data/cifar10_fmnist).
#
#   bench/deploy/deploy_scaling.sh                 # ROUNDS=3
# Environment: ROUNDS (3), THREADS (2), CIFARNET_BATCH (64), RESNET_BATCH (32),
# RESNET_SIZE (32: resnet_v1_50 on 32x32 crops with cifarnet preprocessing),
# CIFARNET_STEPS (60) / CIFARNET_WARMUP (20), RESNET_STEPS (20) /
# RESNET_WARMUP (5) (multiples of LOG_EVERY=5), MODELS ("cifarnet
# resnet_v1_50"), BUILD_DIR, BENCH_DATA, SKIP_BUILD=1.
# Appends rows to bench/results/deploy.csv (bench/lib/results.sh) and writes
# the table to bench/results/logs/deploy_scaling-<date>.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
LOG_EVERY=5
MODELS=${MODELS:-"cifarnet resnet_v1_50"}
DATA=${BENCH_DATA:-$BIN/bench_data/cifar10_fmnist}

if [[ "${SKIP_BUILD:-}" != 1 ]]; then
  "$root/scripts/install_deps.sh" --bench
  "$root/scripts/build.sh"
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. "$root/bench/lib/results.sh"
mkdir -p "$root/bench/results/logs"
out="$root/bench/results/logs/deploy_scaling-$(date +%F).txt"

if [[ ! -f "$DATA/tfrecords/labels.txt" ]]; then
  mkdir -p "$DATA"
  python3 "$root/scripts/fashion_mnist_to_cifar.py" --output="$DATA/source/cifar-10-binary.tar.gz"
  # Extracted too: bench/train_cpu/cifarnet_throughput.sh shares this folder and its
  # Python peer reads the binary files.
  rm -rf "$DATA/source/cifar-10-batches-bin"
  tar -xzf "$DATA/source/cifar-10-binary.tar.gz" -C "$DATA/source"
  "$BIN/download_and_convert_data" --dataset_name=cifar10 --dataset_dir="$DATA/tfrecords" \
    --source_url="file://$DATA/source/" 2>"$TMP/convert.log" ||
    { cat "$TMP/convert.log" >&2; exit 1; }
fi

median() {
  printf '%s\n' "$@" | { grep -v '^-$' || true; } | sort -g |
    awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'
}
settings() {  # settings <model>: batch size steps warmup
  if [[ $1 == cifarnet ]]; then
    echo "${CIFARNET_BATCH:-64} 32 ${CIFARNET_STEPS:-60} ${CIFARNET_WARMUP:-20}"
  else
    echo "${RESNET_BATCH:-32} ${RESNET_SIZE:-32} ${RESNET_STEPS:-20} ${RESNET_WARMUP:-5}"
  fi
}
run_tool() {  # run_tool <model> <clones>: global images/s
  local model=$1 clones=$2 batch size steps warmup
  read -r batch size steps warmup <<<"$(settings "$model")"
  local extra=(--num_intra_op_threads="$THREADS")
  ((clones > 1)) && extra=(--num_clones="$clones" --clone_on_cpu)
  rm -rf "$TMP/train"
  "$BIN/train_image_classifier" --train_dir="$TMP/train" --dataset_name=cifar10 \
    --dataset_dir="$DATA/tfrecords" --model_name="$model" --preprocessing_name=cifarnet \
    --train_image_size="$size" --batch_size="$batch" --optimizer=sgd --learning_rate=0.01 \
    --learning_rate_decay_type=fixed --weight_decay=0 \
    --max_number_of_steps=$((warmup + steps)) --log_every_n_steps=$LOG_EVERY \
    --save_interval_secs=1000000 --save_summaries_secs=1000000 \
    --num_readers=1 --num_preprocessing_threads=1 "${extra[@]}" \
    >/dev/null 2>"$TMP/tool.log" || { tail -3 "$TMP/tool.log" >&2; echo -; return; }
  # Replica 0 logs its own examples/sec: x clones for the global rate.
  sed -n 's/.*sec\/step, \([0-9.]*\) examples\/sec.*/\1/p' "$TMP/tool.log" |
    tail -n +$((warmup / LOG_EVERY + 1)) |
    awk -v c="$clones" '{s += 1 / $1; n++} END {if (n) printf "%.1f\n", c * n / s; else print "-"}'
}
run_peer() {  # run_peer <model> <clones>: global images/s
  local model=$1 clones=$2 batch size steps warmup
  read -r batch size steps warmup <<<"$(settings "$model")"
  /usr/bin/python3 "$here/ddp_peer.py" --model="$model" --world_size="$clones" \
    --batch_size="$batch" --image_size="$size" --threads=$((THREADS / clones)) \
    --steps="$steps" --warmup="$warmup" 2>"$TMP/peer.log" |
    sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p' || { tail -3 "$TMP/peer.log" >&2; echo -; }
}

declare -A cells
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < ROUNDS; r++)); do
  for model in $MODELS; do
    for clones in 1 2; do
      t=$(run_tool "$model" "$clones"); p=$(run_peer "$model" "$clones")
      cells[$model,$clones,tool]+="$t "; cells[$model,$clones,peer]+="$p "
      echo "round $((r + 1))/$ROUNDS $model $clones clone(s): tool $t, DDP $p images/s" >&2
    done
  done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }
{
  echo "# deploy_scaling $(date -u +%FT%TZ) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
  echo "# threads $THREADS in all (one clone: all of them; two: half each); rounds $ROUNDS; medians; load before: $load_before"
  echo "| net (batch per clone, size) | tool 1 clone | tool 2 clones | tool scaling | DDP 1 process | DDP 2 processes | DDP scaling | tool / DDP, 2 clones |"
  echo "|---|---|---|---|---|---|---|---|"
  for model in $MODELS; do
    read -r batch size _ _ <<<"$(settings "$model")"
    # shellcheck disable=SC2086
    t1=$(median ${cells[$model,1,tool]}); t2=$(median ${cells[$model,2,tool]})
    # shellcheck disable=SC2086
    p1=$(median ${cells[$model,1,peer]}); p2=$(median ${cells[$model,2,peer]})
    echo "| $model ($batch, ${size}x$size) | $t1 img/s | $t2 img/s | $(ratio "$t2" "$t1")x | $p1 img/s | $p2 img/s | $(ratio "$p2" "$p1")x | $(ratio "$t2" "$p2")x |"
    how="batch $batch per clone at ${size}x$size, $THREADS threads in all; median of $ROUNDS alternated rounds"
    bench_record deploy "$model, 1 clone, global images/s" "$t1" "$p1" images/s \
      "PyTorch DDP (Gloo), 1 process" "$how" >&2
    bench_record deploy "$model, 2 clones, global images/s" "$t2" "$p2" images/s \
      "PyTorch DDP (Gloo), 2 processes" "$how; scaling ours $(ratio "$t2" "$t1")x, DDP $(ratio "$p2" "$p1")x" >&2
  done
} | tee "$out"
