#!/usr/bin/env bash
# Photo input path throughput, side by side in one run on the same real
# photographs (bench/input/make_photo_set.sh: 640 JPEGs at ImageNet-like sizes), batch
# 32 at 224x224, for 1 and 2 threads and three modes (inception train, vgg
# train, inception eval):
#   slimtorch:   build/bench/input_bench over the TFRecords (skipped, and said so,
#                when it is not built);
#   torchvision: bench/input/photo_input_torchvision.py over the files: ImageFolder,
#                PIL decode, RandomResizedCrop + flip + ColorJitter (train),
#                DataLoader with num_workers = threads;
#   tf.data:     bench/input/photo_input_tf.py over the TFRecords: TF-Slim's decoder
#                and its own inception/vgg preprocessing, num_parallel_calls =
#                TF's thread pools = threads.
# Each prints images_per_sec=<float> last; the table gives images/s and the
# ratios slimtorch/torchvision and slimtorch/tf.data (the issue's goal in
# TF-exact mode: >= 1.5 and >= 1.2). With ROUNDS > 1 the runs alternate and
# each cell is the median round.
#
#   bench/lib/setup_python_peers.sh      # once: torchvision, TF-Slim preprocessing
#   bench/input/photo_input.sh             # WARMUP=5 BATCHES=40 ROUNDS=1
#   WARMUP=1 BATCHES=3 THREADS_LIST=1 MODES=inception:true bench/input/photo_input.sh
#
# Environment: WARMUP (untimed batches, 5), BATCHES (timed batches, 40),
# ROUNDS (1), THREADS_LIST ("1 2"), MODES ("inception:true vgg:true
# inception:false", name:is_training), BATCH_SIZE (32), IMAGE_SIZE (224),
# INPUT_BENCH_ARGS (extra input_bench flags, e.g. an inexact mode), PEERS
# ("slimtorch torchvision tf.data", any subset), BUILD_DIR (build),
# PHOTO_DATA (BUILD_DIR/bench_data/photos), TF_PYTHON (/opt/tfenv/bin/python),
# TORCH_PYTHON (/opt/benchenv/bin/python if it exists, else /usr/bin/python3).
# Appends two rows per mode and thread count (vs torchvision, vs tf.data) to
# bench/results/input.csv (bench/lib/results.sh); writes the table to stdout
# and bench/results/logs/photo_input-<date>.md, each run's log to
# bench/results/logs/photo_input-logs/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
WARMUP=${WARMUP:-5}
BATCHES=${BATCHES:-40}
ROUNDS=${ROUNDS:-1}
THREADS_LIST=${THREADS_LIST:-1 2}
MODES=${MODES:-inception:true vgg:true inception:false}
BATCH_SIZE=${BATCH_SIZE:-32}
IMAGE_SIZE=${IMAGE_SIZE:-224}
INPUT_BENCH_ARGS=${INPUT_BENCH_ARGS:-}
PEERS=${PEERS:-slimtorch torchvision tf.data}
DATA=${PHOTO_DATA:-$BIN/bench_data/photos}
TF_PYTHON=${TF_PYTHON:-/opt/tfenv/bin/python}
if [[ -z "${TORCH_PYTHON:-}" ]]; then
  TORCH_PYTHON=/usr/bin/python3
  [[ -x /opt/benchenv/bin/python ]] && TORCH_PYTHON=/opt/benchenv/bin/python
fi
INPUT_BENCH=$BIN/bench/input_bench
[[ -x "$INPUT_BENCH" ]] || INPUT_BENCH=$BIN/input_bench
. "$root/bench/lib/results.sh"

"$here/make_photo_set.sh" "$DATA"
RESULTS=$root/bench/results/logs
LOGS=$RESULTS/photo_input-logs
mkdir -p "$LOGS"
out="$RESULTS/photo_input-$(date +%F).md"
common=(--image_size="$IMAGE_SIZE" --batch_size="$BATCH_SIZE"
        --warmup_batches="$WARMUP" --batches="$BATCHES")

# run PEER NAME TRAINING THREADS ROUND: prints images/s, or "fail" (log kept).
run() {
  local peer=$1 name=$2 training=$3 threads=$4 round=$5 cmd
  local log="$LOGS/$peer-$name-$training-t$threads-r$round.log"
  local mode=(--preprocessing_name="$name" --is_training="$training"
              --num_preprocessing_threads="$threads")
  case $peer in
    slimtorch)
      [[ -x "$INPUT_BENCH" ]] || { echo missing; return; }
      cmd=("$INPUT_BENCH" --file_pattern="$DATA/tfrecord/photos-*" "${mode[@]}"
           --num_readers=1 "${common[@]}" $INPUT_BENCH_ARGS) ;;
    torchvision)
      cmd=("$TORCH_PYTHON" "$here/photo_input_torchvision.py"
           --data_dir="$DATA/files" "${mode[@]}" "${common[@]}") ;;
    tf.data)
      cmd=("$TF_PYTHON" "$here/photo_input_tf.py"
           --file_pattern="$DATA/tfrecord/photos-*" "${mode[@]}"
           --num_readers=1 "${common[@]}") ;;
  esac
  if "${cmd[@]}" >"$log" 2>&1; then
    tail -n 1 "$log" | sed -n 's/^images_per_sec=//p'
  else
    echo fail
  fi
}

median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g |
  awk '{v[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR+1)/2];
       else printf "%.2f\n", (v[NR/2] + v[NR/2+1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {
  if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2fx", a / b; else print "-" }'; }

declare -A got
for round in $(seq 1 "$ROUNDS"); do
  for mode in $MODES; do
    for threads in $THREADS_LIST; do
      for peer in $PEERS; do
        name=${mode%%:*} training=${mode##*:}
        v=$(run "$peer" "$name" "$training" "$threads" "$round")
        echo "round $round $peer $name is_training=$training threads=$threads: $v" >&2
        got[$peer/$mode/$threads]+="$v "
      done
    done
  done
done

cell() {
  local v=${got[$1/$2/$3]:-}
  case "$v" in *missing*) echo missing ;; *fail*) echo fail ;;
    "") echo - ;; *) echo "$v" | median ;; esac
}
{
  echo "## Photo input path: images/s (batch $BATCH_SIZE, ${IMAGE_SIZE}x$IMAGE_SIZE)"
  echo
  echo "- date: $(date -u '+%F %H:%M UTC')"
  echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1)," \
    "$(nproc) cores usable ($(lscpu | sed -n 's/^CPU(s): *//p') CPUs)"
  echo "- data: $(head -n 1 "$DATA/README")"
  echo "  $(sed -n 2p "$DATA/README")"
  echo "- runs: $WARMUP warm-up + $BATCHES timed batches, median of $ROUNDS round(s);" \
    "slimtorch flags: ${INPUT_BENCH_ARGS:-(none)}"
  echo "- torchvision: $("$TORCH_PYTHON" -c 'import torch, torchvision, PIL
print("torch", torch.__version__, "torchvision", torchvision.__version__, "Pillow", PIL.__version__)' 2>/dev/null)"
  echo "- tf.data: $("$TF_PYTHON" -c 'import importlib.metadata as m
print("tensorflow", m.version("tensorflow-cpu"), "tf_slim", m.version("tf-slim"))' 2>/dev/null)"
  echo
  echo "| mode | threads | slimtorch | torchvision | tf.data | slimtorch/torchvision | slimtorch/tf.data |"
  echo "|---|---|---|---|---|---|---|"
  for mode in $MODES; do
    for threads in $THREADS_LIST; do
      s=$(cell slimtorch "$mode" "$threads")
      t=$(cell torchvision "$mode" "$threads")
      f=$(cell tf.data "$mode" "$threads")
      label="${mode%%:*} $([[ ${mode##*:} == true ]] && echo train || echo eval)"
      echo "| $label | $threads | $s | $t | $f | $(ratio "$s" "$t") | $(ratio "$s" "$f") |"
    done
  done
  [[ -x "$INPUT_BENCH" ]] || echo -e "\nslimtorch: $INPUT_BENCH is missing (build it first)."
} | tee "$out"
tvv=$("$TORCH_PYTHON" -c 'import torchvision; print(torchvision.__version__)' 2>/dev/null || echo "?")
tfv=$("$TF_PYTHON" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))' 2>/dev/null || echo "?")
num() { [[ $1 =~ ^[0-9.]+$ ]] && echo "$1" || echo -; }
for mode in $MODES; do
  for threads in $THREADS_LIST; do
    s=$(num "$(cell slimtorch "$mode" "$threads")")
    [[ $s == - ]] && continue
    m="photo input ${mode%%:*} $([[ ${mode##*:} == true ]] && echo train || echo eval), batch $BATCH_SIZE at $IMAGE_SIZE, $threads threads"
    how="median of $ROUNDS round(s) of $BATCHES batches after $WARMUP; data: $(head -n 1 "$DATA/README" 2>/dev/null)"
    if [[ " $PEERS " == *" torchvision "* ]]; then
      bench_record input "$m" "$s" "$(num "$(cell torchvision "$mode" "$threads")")" images/s \
        "torchvision $tvv (ImageFolder, PIL, DataLoader)" "$how"
    fi
    if [[ " $PEERS " == *" tf.data "* ]]; then
      bench_record input "$m" "$s" "$(num "$(cell tf.data "$mode" "$threads")")" images/s \
        "tf.data, TensorFlow $tfv with TF-Slim's preprocessing" "$how"
    fi
  done
done
