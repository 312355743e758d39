#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after
# bench/train_gpu/gpu_device_prepare.sh filled .device/ here and .device was carried
# there:  bash .device/run.sh PHASE...   (results under $OUT)
# Phases:
#   build      unpack the .debs into .device/prefix, configure against
#              PyTorch's LibTorch (torch.utils.cmake_prefix_path), build
#   fulltests  the whole GoogleTest binary (CUDA tests included)
#   tests      the same with --gtest_brief, then the CUDA tests alone
#   data       convert .device/data/cifar-10-binary.tar.gz to TFRecords
#   photos     convert .device/data/photos (class folders of JPEG photos,
#              bench/train_gpu/gpu_device_prepare.sh PHOTOS=...) to image_folder
#              TFRecords in /tmp/photos, for the speed phase jpeg
#   train      bench/train_gpu/cifar10_tutorial_speed.sh on the GPU (STEPS, WARMUP,
#              LOG_EVERY), then the moving averages evaluated
#   long       the tutorial recipe for whatever is left of BUDGET seconds
#   cifarnet   TF-Slim's CifarNet recipe cut at 10 epochs (CIFARNET_RUNS:
#              kind:seed words, kind scaled = decay scaled to 7.8125 epochs,
#              fixed = lr 0.1 throughout; CIFARNET_FLAGS added to each,
#              CIFARNET_TAG appended to their names)
#   debug      the trainer tests alone
#   gputests   with PREBUILT=1: the tests of slimtorch_gpu_tests that touch
#              the GPU, the device update, the counter draws and the captured
#              step
#   speed      bench/train_gpu/gpu_step_speed.sh on the converted data (SPEED_PHASES:
#              any of tutorial resnet profile full bn compile; default
#              tutorial resnet full compile)
# PREBUILT=1: no build; the tools, library and test binary that
# bench/train_gpu/gpu_device_prepare.sh copied into .device/bin run against this
# machine's PyTorch (the same version they were built against).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
root=$(pwd)
P=$root/.device/prefix
B=$root/${BUILD_NAME:-build-gpu}
export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [[ -n "${PREBUILT:-}" ]]; then
  B=$root/.device/bin
  mkdir -p "$P" "$B/tests"
  for d in .device/debs/*.deb; do dpkg-deb -x "$d" "$P"; done
  ln -sf "$B/slimtorch_gpu_tests" "$B/tests/slimtorch_gpu_tests"
  site=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  nv=$(ls -d "$site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
  export LD_LIBRARY_PATH=$B:$site/torch/lib:$nv$LD_LIBRARY_PATH
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt"
  python3 -c 'import torch;print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())' >> "$OUT/gpu.txt"
  cat "$OUT/gpu.txt"
  ldd "$B/train_image_classifier" | grep -E "not found" && echo "MISSING LIBRARIES"
fi
# Results rows (bench/lib/results.sh) go to $OUT/train_gpu.csv, to be merged
# into bench/results/ on the development machine with
# `python3 bench/lib/results.py merge <files>/train_gpu.csv`.
export BENCH_RESULTS_DIR=${BENCH_RESULTS_DIR:-$OUT}
[[ -z "${BENCH_COMMIT:-}" && -f .device/commit ]] && export BENCH_COMMIT=$(cat .device/commit)
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/phases.log"; }

if [[ " $* " == *" build "* ]]; then
  stamp "unpack"
  mkdir -p "$P"
  for d in .device/debs/*.deb; do dpkg-deb -x "$d" "$P"; done
  # glog's config names its find modules by absolute path.
  sed -i "s|\"/usr/share/glog/cmake\"|\"$P/usr/share/glog/cmake\"|" "$P/usr/lib/x86_64-linux-gnu/cmake/glog/glog-modules.cmake"
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  stamp "cmake (torch at $TP)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
  python3 -c 'import torch;print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())' >> "$OUT/gpu.txt"
  cmake -G Ninja -S . -B "$B" -DCMAKE_BUILD_TYPE=Release ${CMAKE_EXTRA:-} \
    -DCMAKE_PREFIX_PATH="$TP;$P/usr" > "$OUT/cmake.log" 2>&1 || { stamp "cmake failed"; tail -40 "$OUT/cmake.log"; exit 1; }
  stamp "ninja"
  ninja -C "$B" -k 0 -j 16 > "$OUT/build.log" 2>&1 || { stamp "build failed"; grep -B3 -A12 'error' "$OUT/build.log" | head -120; exit 1; }
  stamp "built"
fi

if [[ " $* " == *" tests "* ]]; then
  stamp "unit tests"
  timeout ${TEST_TIMEOUT:-200} "$B/tests/slimtorch_tests" --gtest_brief=1 > "$OUT/tests.log" 2>&1
  echo "tests rc $?" >> "$OUT/tests.log"
  tail -30 "$OUT/tests.log"
  grep -E 'Cuda|CUDA' "$OUT/tests.log" | head
  "$B/tests/slimtorch_tests" --gtest_filter='*Cuda*:*CUDA*' > "$OUT/cuda_tests.log" 2>&1
  grep -E 'OK|FAILED|SKIPPED|PASSED' "$OUT/cuda_tests.log" | head -30
  stamp "tests done"
fi

if [[ " $* " == *" gputests "* ]]; then
  stamp "gpu tests"
  timeout ${TEST_TIMEOUT:-200} "$B/tests/slimtorch_gpu_tests" \
    --gtest_filter="${GPU_TEST_FILTER:-*Cuda*:*DeviceUpdate*:CounterDraw*:CifarPreprocessingTest.*:MemoryPipelineTest.*:TrainerTest.Synthetic*}" \
    > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc $?" | tee -a "$OUT/gpu_tests.log"
  grep -E '^\[  (FAILED|PASSED|SKIPPED|  OK) |tests ran|Failure|Expected|Which is|actual' "$OUT/gpu_tests.log" | grep -v "^I20" | head -60
  stamp "gpu tests done"
fi

if [[ " $* " == *" data "* ]]; then
  stamp "convert"
  "$B/download_and_convert_data" --dataset_name=cifar10 --dataset_dir=/tmp/c10 \
    --source_url="file://$root/.device/data/" > "$OUT/convert.log" 2>&1 || { tail "$OUT/convert.log"; exit 1; }
  stamp "converted"
fi

if [[ " $* " == *" photos "* ]]; then
  stamp "convert photos"
  "$B/download_and_convert_data" --dataset_name=image_folder --image_dir="$root/.device/data/photos" \
    --dataset_dir=/tmp/photos --validation_percentage=0 > "$OUT/photos.log" 2>&1 || { tail "$OUT/photos.log"; exit 1; }
  stamp "photos converted"
fi

if [[ " $* " == *" train "* ]]; then
  stamp "tutorial speed"
  BUILD_DIR=$B DATASET_DIR=/tmp/c10 TRAIN_DIR=/tmp/tut STEPS=${STEPS:-4000} WARMUP=${WARMUP:-1000} \
    LOG_EVERY=${LOG_EVERY:-500} EVAL=1 bash bench/train_gpu/cifar10_tutorial_speed.sh > "$OUT/speed.txt" 2>&1
  cat "$OUT/speed.txt"
  cp /tmp/tut/train.log "$OUT/train.log" 2>/dev/null
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv >> "$OUT/gpu.txt"
  stamp "trained"
fi

if [[ " $* " == *" long "* ]]; then
  left=$(( ${BUDGET:-560} - ($(date +%s) - t0) - 40 ))
  stamp "long tutorial run for ${left}s"
  if (( left > 30 )); then
    timeout --signal=INT "$left" "$B/train_image_classifier" --flagfile=configs/cifar10_tutorial.flags \
      --dataset_dir=/tmp/c10 --train_dir=/tmp/long --log_every_n_steps=5000 \
      --save_interval_secs=30 --save_summaries_secs=600 > "$OUT/long.log" 2>&1
    grep -E 'global step|Saved' "$OUT/long.log" | tail -4
    "$B/eval_image_classifier" --checkpoint_path=/tmp/long --eval_dir=/tmp/long/eval \
      --dataset_name=cifar10 --dataset_split_name=test --dataset_dir=/tmp/c10 \
      --model_name=cifarnet_tutorial --moving_average_decay=0.9999 2>&1 | grep -E 'eval/|Evaluated|error'
  fi
  stamp "long done"
fi

if [[ " $* " == *" speed "* ]]; then
  stamp "speed (${SPEED_PHASES:-tutorial resnet full compile})"
  BIN=$B DATASET_DIR=/tmp/c10 PHOTO_DIR=/tmp/photos OUT=$OUT BUDGET=$(( ${BUDGET:-560} - ($(date +%s) - t0) - 15 )) \
    bash bench/train_gpu/gpu_step_speed.sh ${SPEED_PHASES:-tutorial resnet full compile}
  stamp "speed done"
fi

if [[ " $* " == *" debug "* ]]; then
  stamp "trainer test under the failure handler"
  command -v gdb && GDB=1
  timeout 120 "$B/tests/slimtorch_tests" --gtest_filter='TrainerTest.*' > "$OUT/trainer_test.log" 2>&1
  echo "rc $?" >> "$OUT/trainer_test.log"
  grep -vE '^I2026' "$OUT/trainer_test.log" | tail -40
  if [[ -n "${GDB:-}" ]]; then
    timeout 120 gdb -batch -ex run -ex bt --args "$B/tests/slimtorch_tests" --gtest_filter='TrainerTest.*' 2>&1 | grep -vE '^I2026|New Thread|Thread .* exited' | tail -40
  fi
  stamp "debug done"
fi

if [[ " $* " == *" fulltests "* ]]; then
  stamp "full unit tests"
  timeout ${TEST_TIMEOUT:-200} "$B/tests/slimtorch_tests" > "$OUT/unit.log" 2>&1
  echo "rc $?" >> "$OUT/unit.log"
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |tests ran|rc ' "$OUT/unit.log" | tail -30
  grep -B2 -A30 '\*\*\* ' "$OUT/unit.log" | head -60
  stamp "full tests done"
fi

if [[ " $* " == *" cifarnet "* ]]; then
  # CIFARNET_FLAGS: flags added to every training run (e.g. --precision=fp16),
  # CIFARNET_TAG: appended to the runs' names.
  for run in ${CIFARNET_RUNS:-scaled:1 scaled:2 scaled:3 fixed:1}; do
    kind=${run%%:*}; seed=${run##*:}; cn=cn_${kind}_$seed${CIFARNET_TAG:-}
    extra=""; [[ $kind == scaled ]] && extra="--num_epochs_per_decay=7.8125"
    stamp "cifarnet 10 epochs $kind seed $seed ${CIFARNET_FLAGS:-}"
    "$B/train_image_classifier" --flagfile=configs/cifarnet_cifar10.flags --dataset_dir=/tmp/c10 \
      --train_dir=/tmp/$cn --max_number_of_steps=3907 --seed=$seed $extra ${CIFARNET_FLAGS:-} \
      --log_every_n_steps=1000 --save_interval_secs=600 > "$OUT/$cn.log" 2>&1
    grep -E 'Finished|rror' "$OUT/$cn.log" | tail -3
    "$B/eval_image_classifier" --checkpoint_path=/tmp/$cn --eval_dir=/tmp/$cn/eval \
      --dataset_name=cifar10 --dataset_split_name=test --dataset_dir=/tmp/c10 --model_name=cifarnet 2>&1 | grep -E 'eval/|error'
  done
  stamp "cifarnet done"
fi
