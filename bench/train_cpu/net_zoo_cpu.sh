#!/usr/bin/env bash
# Training-step throughput of every net of the zoo on CPU at batch 8, side by
# side with TF-Slim where tf_slim ships the net (alexnet_v2, overfeat, vgg,
# inception v1-v3, resnet v1/v2) or TF-Slim's research/slim files are at
# $TFSLIM_DIR (default /work/tfslim/research/slim: MobileNet v3 / EdgeTPU,
# NASNet, PNASNet; scripts/golden/tfslim_compat.py imports them):
#   slimtorch: bench/step_profile (forward, softmax cross entropy + 0.4 x aux
#              logits, L2 terms at weight_decay 4e-5, backward, SGD update)
#              on one random batch of 8 at the net's default size;
#   peer:      bench/train_cpu/net_zoo_tf.py, the same step in TensorFlow 1-style graph
#              mode with tf_slim's net and arg scope.
# Both: 2 intra-op threads, 10 classes, WARMUP untimed steps then STEPS timed.
#
#   bench/train_cpu/net_zoo_cpu.sh            # STEPS=3, WARMUP=1; NETS="a b" for a subset
#   PRECISION=bf16 bench/train_cpu/net_zoo_cpu.sh   # both sides in bfloat16 autocast
#   ROUNDS=3 bench/train_cpu/net_zoo_cpu.sh   # per net, ours and TF's alternate 3 times
#                                   # and each side's median counts (a shared
#                                   # VM's load then weighs on both alike)
# Appends a row per net to bench/results/train_cpu.csv (bench/lib/results.sh;
# no peer for the nets tf_slim lacks) and writes the table to
# bench/results/logs/net_zoo_cpu-<date>[-bf16][-subset].txt. SKIP_BUILD=1 uses
# the build as it is.
# The TF peer needs tensorflow-cpu, tf-slim and tf_keras from PyPI (installed
# with pip when missing; never a dependency of slimtorch itself).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
ROUNDS=${ROUNDS:-1}
PRECISION=${PRECISION:-fp32}
PYTHON=${PYTHON:-python3}
. "$root/bench/lib/results.sh"
if [[ "${SKIP_BUILD:-}" != 1 ]]; then
  "$root/scripts/install_deps.sh" --bench
  "$root/scripts/build.sh" -DSLIMTORCH_BUILD_BENCH=ON
fi
if ! "$PYTHON" -c "import tensorflow, tf_slim, tf_keras" 2>/dev/null; then
  "$PYTHON" -m pip install --quiet tensorflow-cpu tf-slim
  tfv=$("$PYTHON" -c "import tensorflow as t; print(t.__version__)")
  "$PYTHON" -m pip install --quiet "tf_keras==$tfv"
fi
mkdir -p "$root/bench/results/logs"
suffix=$([[ "$PRECISION" == fp32 ]] || echo "-$PRECISION")${NETS:+-subset}
out="$root/bench/results/logs/net_zoo_cpu-$(date +%F)$suffix.txt"
all_nets="lenet cifarnet alexnet_v2 overfeat vgg_a vgg_16 vgg_19 inception_v1
  inception_v2 inception_v3 inception_v4 inception_resnet_v2 resnet_v1_50
  resnet_v1_101 resnet_v1_152 resnet_v1_200 resnet_v2_50 resnet_v2_101
  resnet_v2_152 resnet_v2_200 mobilenet_v1 mobilenet_v1_075 mobilenet_v1_050
  mobilenet_v1_025 mobilenet_v2 mobilenet_v2_140 mobilenet_v2_035
  mobilenet_v3_large mobilenet_v3_small mobilenet_v3_large_minimalistic
  mobilenet_v3_small_minimalistic mobilenet_edgetpu mobilenet_edgetpu_075
  nasnet_cifar nasnet_mobile nasnet_large pnasnet_mobile pnasnet_large"
TFSLIM_DIR=${TFSLIM_DIR:-/work/tfslim/research/slim}
tf_nets=" alexnet_v2 overfeat vgg_a vgg_16 vgg_19 inception_v1 inception_v2
  inception_v3 resnet_v1_50 resnet_v1_101 resnet_v1_152 resnet_v1_200
  resnet_v2_50 resnet_v2_101 resnet_v2_152 resnet_v2_200"
if [[ -f "$TFSLIM_DIR/nets/nasnet/nasnet.py" ]]; then
  tf_nets+=" mobilenet_v3_large mobilenet_v3_small mobilenet_v3_large_minimalistic
    mobilenet_v3_small_minimalistic mobilenet_edgetpu mobilenet_edgetpu_075
    nasnet_cifar nasnet_mobile nasnet_large pnasnet_mobile pnasnet_large"
fi
tf_nets=" $(echo $tf_nets) "  # one space around every name
tfv=$("$PYTHON" -c "import tensorflow as t; print(t.__version__)" 2>/dev/null || echo "?")
{
  echo "# net_zoo_cpu $(date -u +%FT%TZ) on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# batch 8, default image size, 2 threads, steps=$STEPS after warmup=$WARMUP, precision $PRECISION, rounds $ROUNDS (medians)"
  echo "# net | size | slimtorch img/s | tf_slim img/s | ratio"
} >"$out"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
for net in ${NETS:-$all_nets}; do
  ours_all="" peer_all="" size="-"
  for ((round = 1; round <= ROUNDS; ++round)); do
    ours=$("$BIN/bench/step_profile" --model_name="$net" --batch_size=8 \
      --threads=2 --steps="$STEPS" --warmup="$WARMUP" --weight_decay=0.00004 \
      --precision="$PRECISION" \
      --breakdown=false 2>/dev/null | grep '^step_profile ')
    size=$(sed -E 's/.*image_size=([0-9]+).*/\1/' <<<"$ours")
    ours_all+=" $(sed -E 's/.*images_per_sec=([0-9.]+).*/\1/' <<<"$ours")"
    if [[ "$tf_nets" == *" $net "* ]]; then
      peer=$(OMP_NUM_THREADS=2 "$PYTHON" "$here/net_zoo_tf.py" --model "$net" \
        --batch 8 --steps "$STEPS" --warmup "$WARMUP" --precision "$PRECISION" \
        --slim-dir "$TFSLIM_DIR" \
        2>/dev/null | grep '^tf_slim ')
      peer_all+=" $(sed -E 's/.*images_per_sec=([0-9.]+).*/\1/' <<<"$peer")"
    fi
  done
  ours_ips=$(median <<<"$ours_all")
  peer_ips="-" ratio="-"
  if [[ -n "$peer_all" ]]; then
    peer_ips=$(median <<<"$peer_all")
    ratio=$(awk -v a="$ours_ips" -v b="$peer_ips" 'BEGIN { printf "%.2f", a / b }')
  fi
  bench_record train_cpu "$net train step, batch 8, 2 threads, $PRECISION" "$ours_ips" "$peer_ips" images/s \
    "$([[ -n "$peer_all" ]] && echo "tf_slim, TensorFlow $tfv graph mode")" \
    "image size $size; $STEPS steps after $WARMUP; median of $ROUNDS alternated rounds: ours${ours_all}; tf_slim${peer_all:- -}"
  line="| $net | $size | $ours_ips | $peer_ips | $ratio |"
  echo "$line" | tee -a "$out"
  if ((ROUNDS > 1)); then
    echo "#   $net rounds: ours${ours_all}; tf_slim${peer_all:- -}" | tee -a "$out"
  fi
done
echo "wrote $out"
