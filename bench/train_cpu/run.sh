#!/usr/bin/env bash
# Training on the CPU, against its peers: the entry script of bench/train_cpu/.
#
#   bench/train_cpu/run.sh [PART...]     # default: lenet cifarnet zoo lrn bn
#
# Parts (each side by side in one run, rounds alternated, medians):
#   lenet     lenet_throughput.sh: LeNet, the whole train_image_classifier
#             against Python PyTorch (lenet_pytorch.py)
#   cifarnet  cifarnet_throughput.sh: CifarNet, the tool and step_profile
#             against Python PyTorch + torchvision (cifarnet_pytorch.py)
#   zoo       net_zoo_cpu.sh: every net's training step (step_profile)
#             against tf_slim in TensorFlow (net_zoo_tf.py)
#   lrn       build/bench/lrn_bench: the fused LRN against LibTorch's composite
#   bn        build/bench/bn_bench: the fused batch norm + ReLU (no peer)
# Every part appends rows to bench/results/train_cpu.csv (bench/lib/results.sh);
# knobs: each part's own (see its header: STEPS, WARMUP, ROUNDS, THREADS,
# NETS, PRECISION, ...), BUILD_DIR, SKIP_BUILD=1 (use the build as it is),
# BENCH_RECORD=0 (print the rows instead). LRN_ARGS / BN_ARGS: extra flags of
# lrn_bench / bn_bench (e.g. --threads=1 --repeats=10).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
. "$root/bench/lib/results.sh"
parts=${*:-lenet cifarnet zoo lrn bn}
if [[ "${SKIP_BUILD:-}" != 1 ]]; then
  "$root/scripts/install_deps.sh" --bench
  "$root/scripts/build.sh" -DSLIMTORCH_BUILD_BENCH=ON
fi
export SKIP_BUILD=1

lrn() {
  local out threads
  out=$("$BIN/bench/lrn_bench" ${LRN_ARGS:-}) || return 1
  echo "$out"
  threads=$(sed -n '1s/.*, \([0-9]*\) threads.*/\1/p' <<<"$out")
  # "[128,64,16,16] cifarnet norm1/norm2  composite fused 7.0x (forward only: a vs b)"
  sed -n 's/^\(\[[0-9,]*\]\) *\(.*[^ ]\) \+\([0-9.]\+\) \+\([0-9.]\+\) \+[0-9.]\+x.*forward only: \([0-9.]*\) vs \([0-9.]*\).*/\1|\2|\3|\4|\5|\6/p' <<<"$out" |
    while IFS='|' read -r shape where composite fused fwd_c fwd_f; do
      bench_record train_cpu "LRN forward+backward $shape, $where, $threads thread$([[ $threads == 1 ]] || echo s)" "$fused" "$composite" ms \
        "LibTorch's composite LRN (~7 ops)" "forward alone: $fwd_f vs $fwd_c ms; median of the timed runs"
    done
}
bn() {
  local out head setting repeats
  out=$("$BIN/bench/bn_bench" ${BN_ARGS:-}) || return 1
  echo "$out"
  head=$(head -n 1 <<<"$out")  # "batch norm + relu, batch 8, 2 threads, median of 20, kernels avx512"
  repeats=$(sed -n 's/.*median of \([0-9]*\).*/\1/p' <<<"$head")
  setting=$(sed -n 's/^batch norm + relu, \(batch [0-9]*, [0-9]* threads\), median of [0-9]*, \(kernels .*\)/\1, \2/p' <<<"$head")
  awk 'NR > 2 && NF == 6 { print $1, $2, $4, $5, $6 }' <<<"$out" |
    while read -r shape order copy fwd bwd; do
      bench_record train_cpu "batch norm + ReLU forward+backward ${shape} ${order}, $setting" \
        "$(awk -v a="$fwd" -v b="$bwd" 'BEGIN { printf "%.3f", a + b }')" "" ms "" \
        "forward $fwd / backward $bwd ms, medians of $repeats; a plain copy of the tensor $copy ms"
    done
}

for part in $parts; do
  echo "=== train_cpu: $part" >&2
  case $part in
    lenet) "$here/lenet_throughput.sh" ;;
    cifarnet) "$here/cifarnet_throughput.sh" ;;
    zoo) "$here/net_zoo_cpu.sh" ;;
    lrn) lrn ;;
    bn) bn ;;
    *) echo "unknown part $part (lenet cifarnet zoo lrn bn)" >&2; exit 2 ;;
  esac
done
