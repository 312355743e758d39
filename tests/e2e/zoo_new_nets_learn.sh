#!/usr/bin/env bash
# The NASNet, PNASNet, MobileNet v3 and EdgeTPU nets learn and resume exactly, through the tools, on one
# small photo folder (12 photos in 3 classes made from real Fashion-MNIST
# images by make_photo_folder.py, converted once with
# --dataset_name=image_folder). For each net:
# 1. Learning: the whole split as one batch, no augmentation (lenet
#    preprocessing: crop or pad to the size), plain SGD, fixed seed, so the
#    net memorizes the 12 photos; every logged loss must be finite and the
#    mean of the last 5 below half the mean of the first 5 (both printed).
#    The first losses of NASNet / PNASNet are large (10-90: TF-Slim's
#    FAN_OUT init of the final FC), hence means, and a smaller rate.
# 2. Resume: with the net's own preprocessing (random crops, colour,
#    dropout, NASNet's drop path on the global step), 3 steps then a resume
#    to 6 equal 6 uninterrupted steps byte for byte.
# Sizes are the smallest that work: 64 for the MobileNets, 96 for NASNet /
# PNASNet (the smallest whose aux head has a 5x5 map to pool), 32 for
# nasnet_cifar (CIFAR stem, its own cifarnet preprocessing in the resume).
# nasnet_large and pnasnet_large (even at 96) and nasnet_cifar (full-size
# cells on 32 x 32 maps) take minutes on 2 cores: they run with the argument
# "slow" (CTest label slow, left out by scripts/test.sh unless
# SLIMTORCH_SLOW_TESTS=1).
#   bash zoo_new_nets_learn.sh <build dir> [fast|slow|<model name>...]
set -euo pipefail
BIN="$1"
shift
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
command -v cjpeg >/dev/null || { echo "SKIP: cjpeg (libjpeg-turbo-progs) missing"; exit 77; }

# model, image size, learning steps, learning rate.
fast=(
  "mobilenet_v3_small 64 20 0.02"
  "mobilenet_v3_large 64 20 0.02"
  "mobilenet_v3_small_minimalistic 64 20 0.02"
  "mobilenet_v3_large_minimalistic 64 20 0.02"
  "mobilenet_edgetpu_075 64 20 0.02"
  "mobilenet_edgetpu 64 20 0.02"
  "nasnet_mobile 96 30 0.005"
  "pnasnet_mobile 96 30 0.005"
)
slow=(
  "nasnet_cifar 32 30 0.005"
  "nasnet_large 96 30 0.005"
  "pnasnet_large 96 30 0.005"
)
runs=()
case "${1:-fast}" in
  fast) runs=("${fast[@]}") ;;
  slow) runs=("${slow[@]}") ;;
  *) for name in "$@"; do
       for run in "${fast[@]}" "${slow[@]}"; do
         [[ "${run%% *}" == "$name" ]] && runs+=("$run")
       done
     done
     [[ ${#runs[@]} -eq $# ]] || { echo "FAIL unknown net among: $*"; exit 1; } ;;
esac

python3 "$(dirname "$0")/make_photo_folder.py" "$TMP/photos" 4 "t-shirt" "trouser" "bag"
"$BIN/download_and_convert_data" --dataset_name=image_folder --image_dir="$TMP/photos" \
  --dataset_dir="$TMP/data" --validation_percentage=0 2>"$TMP/convert.log" \
  || { cat "$TMP/convert.log"; exit 1; }
grep -q "^split: train 12$" "$TMP/data/dataset_description.txt" \
  || { echo "FAIL expected 12 train photos"; cat "$TMP/data/dataset_description.txt"; exit 1; }

common=(--dataset_name=image_folder --dataset_dir="$TMP/data" --seed=3
        --learning_rate_decay_type=fixed --log_every_n_steps=1
        --num_intra_op_threads=2 --num_preprocessing_threads=1 --num_readers=1
        --save_summaries_secs=1000000 --save_interval_secs=1000000)

# expect_learns <model> <size> <steps> <lr>: mean loss of the last 5 steps
# below half that of the first 5, every loss finite.
expect_learns() {
  local model="$1" size="$2" steps="$3" lr="$4" log="$TMP/learn_$1.log"
  "$BIN/train_image_classifier" "${common[@]}" --train_dir="$TMP/learn_$model" \
    --model_name="$model" --train_image_size="$size" --preprocessing_name=lenet \
    --batch_size=12 --optimizer=sgd --learning_rate="$lr" \
    --max_number_of_steps="$steps" >"$TMP/learn_$model.out" 2>"$log" || { cat "$log"; exit 1; }
  python3 - "$log" "$model" "$steps" <<'PY' || { echo "FAIL $2: loss did not go down"; cat "$log"; exit 1; }
import math, re, sys
log, model, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
losses = [float(x) for x in re.findall(r"global step \d+: loss = (\S+) ", open(log).read())]
first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
print("     %s: %d losses, mean of the first 5 %.3f, of the last 5 %.3f" % (model, len(losses), first, last))
sys.exit(0 if len(losses) == steps and all(map(math.isfinite, losses)) and last < 0.5 * first else 1)
PY
}

for run in "${runs[@]}"; do
  read -r model size steps lr <<<"$run"
  start=$SECONDS
  expect_learns "$model" "$size" "$steps" "$lr"
  own=("${common[@]}" --model_name="$model" --train_image_size="$size" --batch_size=5
       --optimizer=momentum --learning_rate=0.001)
  "$BIN/train_image_classifier" --train_dir="$TMP/a_$model" --max_number_of_steps=6 \
    "${own[@]}" >"$TMP/a_$model.out" 2>"$TMP/a_$model.log" || { cat "$TMP/a_$model.log"; exit 1; }
  RESUME_A="$TMP/a_$model" RESUME_B="$TMP/b_$model" \
    RESUME_LOG="Resuming from .*model.ckpt-3" expect_exact_resume "${own[@]}"
  echo "ok   $model at $size px: $steps steps at rate $lr learn; resume exact; $((SECONDS - start)) s"
done
echo "zoo new nets learn: all ok"
