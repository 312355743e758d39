#!/usr/bin/env bash
# Two builds of slimtorch side by side: a change that must not cost speed (a
# refactor) against the commit before it, in one run on one machine.
#
#   bench/train_cpu/commit_ab.sh BEFORE_BUILD [AFTER_BUILD]   # AFTER: build/
#
# Parts (PARTS, default "lenet cifarnet zoo"), each side run in alternated
# rounds (ROUNDS, default 5; a VM's speed drifts over minutes), medians:
#   lenet     train_image_classifier, LeNet on Fashion-MNIST, batch 50, SGD,
#             STEPS (300) steps: as bench/train_cpu/lenet_throughput.sh
#   cifarnet  train_image_classifier, CifarNet on Fashion-MNIST packed as
#             CIFAR-10 (BENCH_DATA, as cifarnet_throughput.sh), batch 128,
#             CIFAR_STEPS (60) steps after 20 warm-up steps
#   zoo       bench/step_profile on NETS (default: inception_v1 inception_v3
#             resnet_v1_50 mobilenet_v1 vgg_a), batch 8, 2 threads, as
#             net_zoo_cpu.sh (its TensorFlow peer is unchanged by our commits)
# With the zoo part, both builds need -DSLIMTORCH_BUILD_BENCH=ON
# (bench/step_profile); every part needs the same LibTorch. Rows go to bench/results/train_cpu.csv: ours = the AFTER
# build's commit, peer = "slimtorch <BEFORE's commit>"; a ratio within the
# rounds' spread is noise. BENCH_RECORD=0 prints the rows instead.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BEFORE=$(cd "${1:?usage: commit_ab.sh BEFORE_BUILD [AFTER_BUILD]}" && pwd)
AFTER=$(cd "${2:-$root/build}" && pwd)
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-300}
CIFAR_STEPS=${CIFAR_STEPS:-60}
THREADS=${THREADS:-2}
PARTS=${PARTS:-lenet cifarnet zoo}
NETS=${NETS:-inception_v1 inception_v3 resnet_v1_50 mobilenet_v1 vgg_a}
DATA=${BENCH_DATA:-$AFTER/bench_data}
. "$root/bench/lib/results.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The commit a build folder was configured from.
build_commit() {
  local src
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt")
  git -C "$src" rev-parse --short HEAD
}
before_commit=$(build_commit "$BEFORE")
if [[ " $PARTS " == *" zoo "* ]]; then
  for b in "$BEFORE" "$AFTER"; do
    [[ -x "$b/bench/step_profile" ]] ||
      { echo "$b/bench/step_profile missing: configure with -DSLIMTORCH_BUILD_BENCH=ON" >&2; exit 1; }
  done
fi
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Data, made once by the AFTER build.
if [[ ! -f "$DATA/fashion_mnist/labels.txt" ]]; then
  "$AFTER/download_and_convert_data" --dataset_name=fashion_mnist \
    --dataset_dir="$DATA/fashion_mnist" \
    --source_url=file:///usr/share/datasets/fashion-mnist/ 2>/dev/null
fi
if [[ ! -f "$DATA/cifar10_fmnist/tfrecords/labels.txt" ]]; then
  src="$DATA/cifar10_fmnist/source"
  mkdir -p "$src"
  python3 "$root/scripts/fashion_mnist_to_cifar.py" --output="$src/cifar-10-binary.tar.gz"
  "$AFTER/download_and_convert_data" --dataset_name=cifar10 \
    --dataset_dir="$DATA/cifar10_fmnist/tfrecords" --source_url="file://$src/" 2>/dev/null
fi

# Steady examples/sec of one tool run (harmonic mean of the logged windows
# after the first `skip`).
tool_rate() {  # build skip flags...
  local bin=$1 skip=$2
  shift 2
  rm -rf "$TMP/train"
  "$bin/train_image_classifier" --train_dir="$TMP/train" --optimizer=sgd \
    --learning_rate_decay_type=fixed --num_intra_op_threads="$THREADS" \
    --num_readers=1 --num_preprocessing_threads=1 "$@" >/dev/null 2>"$TMP/tool.log" ||
    { tail -3 "$TMP/tool.log" >&2; exit 1; }
  sed -n 's/.*sec\/step, \([0-9.]*\) examples\/sec.*/\1/p' "$TMP/tool.log" |
    tail -n +$((skip + 1)) | awk '{s += 1 / $1; n++} END {printf "%.1f\n", n / s}'
}
lenet() {
  tool_rate "$1" 1 --dataset_name=fashion_mnist --dataset_dir="$DATA/fashion_mnist" \
    --model_name=lenet --learning_rate=0.01 --batch_size=50 --weight_decay=0 \
    --max_number_of_steps="$STEPS" --log_every_n_steps=50
}
cifarnet() {
  tool_rate "$1" 2 --dataset_name=cifar10 --dataset_dir="$DATA/cifar10_fmnist/tfrecords" \
    --model_name=cifarnet --learning_rate=0.1 --batch_size=128 --weight_decay=0.004 \
    --max_number_of_steps=$((CIFAR_STEPS + 20)) --log_every_n_steps=10
}
zoo_net() {  # build net
  "$1/bench/step_profile" --model_name="$2" --batch_size=8 --threads="$THREADS" \
    --steps=3 --warmup=1 --weight_decay=0.00004 --breakdown=false 2>/dev/null |
    sed -n 's/^step_profile .*images_per_sec=\([0-9.]*\).*/\1/p'
}

# compare <measure> <command...>: ROUNDS alternated rounds of `command BUILD`.
compare() {
  local measure=$1
  shift
  local a=() b=()
  for ((r = 0; r < ROUNDS; r++)); do
    b+=("$("$@" "$BEFORE")")
    a+=("$("$@" "$AFTER")")
  done
  local ours peer
  ours=$(median "${a[@]}")
  peer=$(median "${b[@]}")
  echo "$measure: after $ours, before ($before_commit) $peer images/s; rounds ${a[*]} / ${b[*]}"
  bench_record train_cpu "$measure" "$ours" "$peer" images/s "slimtorch $before_commit (before)" \
    "A/B of two builds, median of $ROUNDS alternated rounds; rounds ${a[*]} / ${b[*]}"
}

for part in $PARTS; do
  case $part in
    lenet) compare "lenet tool, batch 50, $THREADS threads, A/B vs the commit before" lenet ;;
    cifarnet) compare "cifarnet tool, batch 128, $THREADS threads, A/B vs the commit before" cifarnet ;;
    zoo)
      for net in $NETS; do
        zoo_one() { zoo_net "$1" "$net"; }
        compare "$net training step (step_profile), batch 8, $THREADS threads, A/B vs the commit before" zoo_one
      done ;;
    *) echo "unknown part $part (lenet, cifarnet, zoo)" >&2; exit 1 ;;
  esac
done
