#!/usr/bin/env bash
# LeNet training throughput, side by side in one run (issue: >= 1.2x Python):
#   slimtorch: train_image_classifier, the whole tool (TFRecord reading, PNG
#              decoding, preprocessing threads, checkpoint at the end),
#   peer:      the same model/batch/optimizer in Python PyTorch (Debian's
#              python3-torch, same LibTorch), data preprocessed in memory.
# Both: Fashion-MNIST train split, batch 50, SGD lr 0.01, 2 threads.
# Steady state: slimtorch's sec/step windows after the first; Python's timed
# loop after warm-up steps. The Python peer runs twice per round: as a user
# runs it (libgomp's default spinning wait) and with OMP_WAIT_POLICY=passive,
# which slimtorch's tools set for themselves (see tools/tool_common.h).
#
#   bench/train_cpu/lenet_throughput.sh            # STEPS=500, ROUNDS=3 by default
# Appends rows to bench/results/train_cpu.csv (bench/lib/results.sh); the
# text log goes to bench/results/logs/lenet_throughput-<date>.txt.
# SKIP_BUILD=1 uses the build as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
STEPS=${STEPS:-500}
THREADS=${THREADS:-2}
. "$root/bench/lib/results.sh"
if [[ "${SKIP_BUILD:-}" != 1 ]]; then
  "$root/scripts/install_deps.sh" --bench
  "$root/scripts/build.sh" -DSLIMTORCH_BUILD_BENCH=ON
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$root/bench/results/logs"
out="$root/bench/results/logs/lenet_throughput-$(date +%F).txt"

"$BIN/download_and_convert_data" --dataset_name=fashion_mnist --dataset_dir="$TMP/data" \
  --source_url=file:///usr/share/datasets/fashion-mnist/ 2>/dev/null

run_slimtorch() {
  rm -rf "$TMP/train"
  "$BIN/train_image_classifier" --train_dir="$TMP/train" --dataset_name=fashion_mnist \
    --dataset_dir="$TMP/data" --model_name=lenet --optimizer=sgd --learning_rate=0.01 \
    --learning_rate_decay_type=fixed --batch_size=50 --weight_decay=0 \
    --max_number_of_steps="$STEPS" --log_every_n_steps=50 \
    --num_intra_op_threads="$THREADS" --num_readers=1 --num_preprocessing_threads=1 \
    >/dev/null 2>"$TMP/slim.log"
  # Median examples/sec over the logged windows, the first (warm-up) dropped.
  sed -n 's/.*sec\/step, \([0-9.]*\) examples\/sec.*/\1/p' "$TMP/slim.log" | tail -n +2 |
    sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
run_python() {  # extra arguments: environment assignments
  env "$@" /usr/bin/python3 "$here/lenet_pytorch.py" --steps="$STEPS" --warmup=50 \
    --threads="$THREADS" | sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p'
}

# Alternate ROUNDS rounds of each (the VM's speed drifts by +-10% over
# minutes); report each side's median round and the ratio of the medians.
ROUNDS=${ROUNDS:-3}
slim_rounds=(); py_rounds=(); pyp_rounds=()
for ((r = 0; r < ROUNDS; r++)); do
  slim_rounds+=("$(run_slimtorch)")
  py_rounds+=("$(run_python)")
  pyp_rounds+=("$(run_python OMP_WAIT_POLICY=passive)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
slim=$(median "${slim_rounds[@]}")
py=$(median "${py_rounds[@]}")
pyp=$(median "${pyp_rounds[@]}")
ratio=$(python3 -c "print('%.2f' % ($slim / $py))")
ratio_p=$(python3 -c "print('%.2f' % ($slim / $pyp))")
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
{
  echo "date: $(date +%F)"
  echo "machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "threads: $THREADS, steps: $STEPS, batch: 50"
  echo "slimtorch train_image_classifier:        $slim images/s (median; rounds: ${slim_rounds[*]})"
  echo "python pytorch, default environment:     $py images/s (median; rounds: ${py_rounds[*]})"
  echo "python pytorch, OMP_WAIT_POLICY=passive: $pyp images/s (median; rounds: ${pyp_rounds[*]})"
  echo "ratio vs python as run by default: ${ratio}x; vs python with passive OpenMP wait: ${ratio_p}x"
} | tee "$out"
m="lenet tool, batch 50, $THREADS threads"
how="median of $ROUNDS alternated rounds of $STEPS steps; ours: the whole train_image_classifier, the peer's data preprocessed in memory"
bench_record train_cpu "$m" "$slim" "$py" images/s "PyTorch Python (python3-torch), default env" "$how; rounds ${slim_rounds[*]} / ${py_rounds[*]}"
bench_record train_cpu "$m" "$slim" "$pyp" images/s "PyTorch Python, OMP_WAIT_POLICY=passive" "$how; rounds ${slim_rounds[*]} / ${pyp_rounds[*]}"
echo "--- where the time goes"
"$BIN/bench/step_profile" --model_name=lenet --input_channels=1 --batch_size=50 \
  --learning_rate=0.01 --steps=200 --warmup=20 --threads="$THREADS" \
  --dataset_name=fashion_mnist --dataset_dir="$TMP/data" | tee -a "$out"
