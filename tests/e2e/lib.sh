# Shared helpers of the end-to-end tests (sourced).
#   BIN: the build directory holding the executables.

# expect_failure <case> <message fragment> <command...>: the command must
# exit non-zero and print exactly one non-empty stderr line containing the
# fragment.
expect_failure() {
  local name="$1" fragment="$2"
  shift 2
  local err="$TMP/$name.err" rc=0
  "$@" >"$TMP/$name.out" 2>"$err" || rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "FAIL $name: exit status 0"; cat "$err"; exit 1
  fi
  local errors
  errors=$(grep -c '^error: ' "$err" || true)
  if [[ $errors -ne 1 ]]; then
    echo "FAIL $name: expected one 'error:' line, got $errors"; cat "$err"; exit 1
  fi
  if ! grep -qF -- "$fragment" "$err"; then
    echo "FAIL $name: error does not mention '$fragment'"; cat "$err"; exit 1
  fi
  echo "ok   $name: $(grep '^error: ' "$err")"
}

# convert_fashion_mnist <dir>: the real dataset from the Debian package.
convert_fashion_mnist() {
  "$BIN/download_and_convert_data" --dataset_name=fashion_mnist \
    --dataset_dir="$1" --source_url=file:///usr/share/datasets/fashion-mnist/ \
    2>"$TMP/convert.log" || { cat "$TMP/convert.log"; exit 1; }
}

# set_lenet_resume_flags: sets the array `common` to the LeNet recipe of the
# resume tests (train_signals.sh, storage_faults.sh): deterministic (seed,
# fixed learning rate), no summaries, on the Fashion-MNIST that
# convert_fashion_mnist put in $TMP/data.
set_lenet_resume_flags() {
  common=(--dataset_name=fashion_mnist --dataset_dir="$TMP/data" --model_name=lenet
    --optimizer=momentum --learning_rate=0.01 --learning_rate_decay_type=fixed
    --batch_size=50 --weight_decay=0 --log_every_n_steps=1 --seed=5
    --num_intra_op_threads=2 --num_preprocessing_threads=2
    --save_summaries_secs=1000000)
}

# make_photo_dataset <photos dir> <train per class> <validation per class>:
# a photo folder of real Fashion-MNIST images (make_photo_folder.py) with
# train/ and validation/ subfolders of the classes shirt, sneaker and bag,
# converted with download_and_convert_data --dataset_name=image_folder into
# $TMP/data.
make_photo_dataset() {
  local photos="$1" split
  for split in train validation; do
    local count="$2"; [[ $split == validation ]] && count="$3"
    python3 "$(dirname "${BASH_SOURCE[0]}")/make_photo_folder.py" "$photos/$split" "$count" \
      "shirt" "sneaker" "bag"
  done
  "$BIN/download_and_convert_data" --dataset_name=image_folder --image_dir="$photos" \
    --dataset_dir="$TMP/data" 2>"$TMP/convert.log" || { cat "$TMP/convert.log"; exit 1; }
}

# expect_convert_failure <case> <message fragment> <args...>: $TOOL run with
# the arguments must exit non-zero with exactly one stderr line containing the
# fragment, and leave no final-named TFRecord in $TMP/out_<case>.
expect_convert_failure() {
  local name="$1" fragment="$2"
  shift 2
  local out="$TMP/$name.err" rc=0
  "$TOOL" "$@" >"$TMP/$name.out" 2>"$out" || rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "FAIL $name: exit status 0"; cat "$out"; exit 1
  fi
  local lines
  lines=$(grep -c . "$out" || true)
  if [[ $lines -ne 1 ]]; then
    echo "FAIL $name: expected one line on stderr, got $lines:"; cat "$out"
    exit 1
  fi
  if ! grep -qF -- "$fragment" "$out"; then
    echo "FAIL $name: stderr lacks '$fragment':"; cat "$out"; exit 1
  fi
  if compgen -G "$TMP/out_$name/*.tfrecord" >/dev/null; then
    echo "FAIL $name: left a final-named TFRecord:"; ls "$TMP/out_$name"
    exit 1
  fi
  echo "ok   $name: $(cat "$out")"
}

# expect_exact_resume <train flags...>: trains 3 steps into $RESUME_B
# (default $TMP/b), resumes to 6 and checks that the resume used the saved
# reader state (its log holds $RESUME_LOG, default the message of batch 8:
# "resumed at example 24 from the saved reader state") and that the
# checkpoint equals $RESUME_A/model.ckpt-6 (default $TMP/a: 6 uninterrupted
# steps) byte for byte. Set the RESUME_* variables on the call to check
# several runs in one test.
expect_exact_resume() {
  local a="${RESUME_A:-$TMP/a}" b="${RESUME_B:-$TMP/b}"
  local want="${RESUME_LOG:-resumed at example 24 from the saved reader state}"
  "$BIN/train_image_classifier" --train_dir="$b" --max_number_of_steps=3 \
    "$@" 2>"$b.1.log" || { cat "$b.1.log"; exit 1; }
  "$BIN/train_image_classifier" --train_dir="$b" --max_number_of_steps=6 \
    "$@" 2>"$b.2.log" || { cat "$b.2.log"; exit 1; }
  grep -q -- "$want" "$b.2.log" \
    || { echo "FAIL resume did not use the saved reader state ('$want')"; cat "$b.2.log"; exit 1; }
  cmp "$a/model.ckpt-6.safetensors" "$b/model.ckpt-6.safetensors" \
    || { echo "FAIL resumed checkpoint differs from the uninterrupted one"; exit 1; }
  echo "ok   resume: 3 + 3 steps == 6 steps, byte for byte, without replay"
}

# make_flower_photos_tgz <dir>: <dir>/flower_photos.tgz in TF-Slim's layout
# with as many photos per class as the real one (3670), made from real
# Fashion-MNIST images by make_photo_folder.py.
make_flower_photos_tgz() {
  local out="$1" src="$1/flower_photos"
  local here
  here="$(dirname "${BASH_SOURCE[0]}")"
  make_class() {
    python3 "$here/make_photo_folder.py" "$TMP/gen_$1" "$2" "$1"
    mv "$TMP/gen_$1/$1" "$src/$1"
  }
  mkdir -p "$src"
  make_class daisy 633 & make_class dandelion 898 & wait
  make_class roses 641 & make_class sunflowers 699 & wait
  make_class tulips 799
  echo "made by tests/e2e/make_photo_folder.py" >"$src/LICENSE.txt"
  tar -C "$out" -czf "$out/flower_photos.tgz" flower_photos
  rm -rf "$src"
}

# wait_for_step <log> <n>: until a training run has logged global step n
# (at most 60 s).
wait_for_step() {
  for _ in $(seq 1200); do
    grep -q "global step $2: loss" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "FAIL no global step $2 in $1"; cat "$1"; exit 1
}

# replica_pid <train_dir> <rank>: the pid of the training process of
# --train_dir=<train_dir> whose environment says RANK=<rank> (from /proc,
# so that no procps is needed); "" when there is none.
replica_pid() {
  local d args env
  for d in /proc/[0-9]*; do
    args=$(tr '\0' '\n' 2>/dev/null <"$d/cmdline") || continue
    env=$(tr '\0' '\n' 2>/dev/null <"$d/environ") || continue
    if grep -qx -- "--train_dir=$1" <<<"$args" && grep -qx "RANK=$2" <<<"$env" &&
       grep -q "train_image_classifier" <<<"$args"; then
      echo "${d#/proc/}"
      return 0
    fi
  done
}

# free_port: a TCP port free on 127.0.0.1 now.
free_port() {
  python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}

# wait_for_file <path> [seconds]: until the file exists (default 60 s).
wait_for_file() {
  for _ in $(seq $(( ${2:-60} * 20 ))); do
    [[ -e "$1" ]] && return 0
    sleep 0.05
  done
  echo "FAIL no $1 within ${2:-60} s"; exit 1
}
