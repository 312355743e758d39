#!/usr/bin/env bash
# Storage faults through the tools, on real Fashion-MNIST with LeNet
# (docs/storage_faults.md). Faults come from SLIMTORCH_FAULT_INJECT (the
# file layer's seam) or real means (ulimit -f, rm -rf); each outcome is
# asserted:
# 1. disk full writing a TFRecord shard: one error naming it, no temporary,
#    no labels.txt (the dataset does not look converted); a rerun converts.
# 2. disk full saving checkpoint 4: exit 1 naming it, the step and the last
#    good checkpoint; the index names checkpoint 3, which loads; nothing of
#    checkpoint 4 is left; the same command resumes == uninterrupted run.
# 3. the file size limit (ulimit -f): EFBIG naming the checkpoint, the index
#    unchanged.
# 4. train_dir read-only mid-run (EROFS from the seam): exit 1 naming the
#    file; every checkpoint left is whole; resuming == uninterrupted run.
# 5. train_dir removed mid-run (rm -rf): exit 1 naming it, not recreated.
# 6. disk full writing the event file: exit 1 naming it; the file holds
#    whole records.
# 7. the latest checkpoint bit-flipped, then truncated: resume refused,
#    naming it and the exact way back; removing it resumes from the one
#    before == uninterrupted run.
# 8. disk full writing an export: exit 1 naming it, no file left.
#   bash storage_faults.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
TRAIN="$BIN/train_image_classifier"
steps=8

# no_temp <dir> <case>: no temporary file of an atomic write is left.
no_temp() {
  if compgen -G "$1/*.tmp.*" >/dev/null; then
    echo "FAIL $2: temporary file left in $1:"; ls "$1"; exit 1
  fi
}

# expect_in <case> <fragment>: the case's error line holds the fragment.
expect_in() {
  grep -qF -- "$2" "$TMP/$1.err" || { echo "FAIL $1: error lacks '$2'"; cat "$TMP/$1.err"; exit 1; }
}

# latest_step <dir>: the global step of the checkpoint the index names,
# loading it whole (fails on an unreadable one).
# resume_to_the_end DIR CASE: trains $TMP/DIR on to $steps; its final
# checkpoint must equal the uninterrupted run's byte for byte.
resume_to_the_end() {
  "$TRAIN" --train_dir="$TMP/$1" --max_number_of_steps=$steps --save_interval_secs=0 \
    "${common[@]}" 2>"$TMP/${1}2.log" || { tail -20 "$TMP/${1}2.log"; exit 1; }
  cmp "$TMP/ref/$final" "$TMP/$1/$final" \
    || { echo "FAIL $2: resumed run differs from the uninterrupted one"; exit 1; }
}
latest_step() {
  "$BIN/inspect_checkpoint" --file_name="$1" --tensor_name=global_step 2>"$TMP/inspect.log" \
    | tr -dc '0-9' || { echo "FAIL unreadable latest checkpoint in $1"; cat "$TMP/inspect.log"; exit 1; }
}

# 1. The converter: disk full in the test shard (after the train shard).
source_url=file:///usr/share/datasets/fashion-mnist/
expect_failure convert_full "fashion_mnist_test.tfrecord" \
  env SLIMTORCH_FAULT_INJECT="write:*/fashion_mnist_test.tfrecord:100000:ENOSPC" \
  "$BIN/download_and_convert_data" --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --source_url=$source_url
expect_in convert_full "No space left on device"
no_temp "$TMP/data" convert_full
[[ ! -e "$TMP/data/fashion_mnist_test.tfrecord" && ! -e "$TMP/data/labels.txt" ]] \
  || { echo "FAIL convert_full: the dataset looks converted"; ls "$TMP/data"; exit 1; }
convert_fashion_mnist "$TMP/data"
grep -q "Finished converting" "$TMP/convert.log" \
  || { echo "FAIL convert_full: the rerun did not convert"; cat "$TMP/convert.log"; exit 1; }
echo "ok   rerun converts: $(ls "$TMP/data" | tr '\n' ' ')"

set_lenet_resume_flags
final=model.ckpt-$steps.safetensors
"$TRAIN" --train_dir="$TMP/ref" --max_number_of_steps=$steps \
  --save_interval_secs=1000000 "${common[@]}" 2>"$TMP/ref.log" \
  || { tail -20 "$TMP/ref.log"; exit 1; }

# 2. Disk full while saving checkpoint 4 (4 KiB of it written).
expect_failure ckpt_full "'$TMP/full/model.ckpt-4.safetensors'" \
  env SLIMTORCH_FAULT_INJECT="write:*/full/model.ckpt-4.safetensors:4096:ENOSPC" \
  "$TRAIN" --train_dir="$TMP/full" --max_number_of_steps=$steps --save_interval_secs=0 "${common[@]}"
expect_in ckpt_full "No space left on device"
expect_in ckpt_full "training stopped at global step 4; the last good checkpoint is $TMP/full/model.ckpt-3.safetensors (the same command resumes from it)"
no_temp "$TMP/full" ckpt_full
[[ ! -e "$TMP/full/model.ckpt-4.safetensors" ]] || { echo "FAIL ckpt_full: checkpoint 4 left"; exit 1; }
[[ $(latest_step "$TMP/full") == 3 ]] || { echo "FAIL ckpt_full: the index does not name checkpoint 3"; exit 1; }
resume_to_the_end full ckpt_full
echo "ok   ckpt_full: index kept checkpoint 3; resume == uninterrupted, byte for byte"

# 3. The file size limit, for real: 1 MiB, less than a LeNet checkpoint.
"$TRAIN" --train_dir="$TMP/fsize" --max_number_of_steps=2 --save_interval_secs=0 \
  "${common[@]}" 2>"$TMP/fsize1.log" || { tail -20 "$TMP/fsize1.log"; exit 1; }
cp "$TMP/fsize/checkpoint" "$TMP/fsize_index"
expect_failure fsize "'$TMP/fsize/model.ckpt-3.safetensors'" \
  bash -c 'ulimit -f 1024 && exec "$@"' _ \
  "$TRAIN" --train_dir="$TMP/fsize" --max_number_of_steps=4 --save_interval_secs=0 "${common[@]}"
expect_in fsize "File too large"
no_temp "$TMP/fsize" fsize
cmp "$TMP/fsize/checkpoint" "$TMP/fsize_index" || { echo "FAIL fsize: the index changed"; exit 1; }
[[ $(latest_step "$TMP/fsize") == 2 ]] || { echo "FAIL fsize: checkpoint 2 does not load"; exit 1; }

# 4. train_dir read-only mid-run: the 6th file opened in it fails (the
# probe, the event file, then a checkpoint and the index per step).
expect_failure read_only "$TMP/ro/" \
  env SLIMTORCH_FAULT_INJECT="open:$TMP/ro/*:5:EROFS" \
  "$TRAIN" --train_dir="$TMP/ro" --max_number_of_steps=$steps --save_interval_secs=0 "${common[@]}"
expect_in read_only "Read-only file system"
no_temp "$TMP/ro" read_only
ro_step=$(latest_step "$TMP/ro")
for f in "$TMP/ro"/model.ckpt-*; do
  s=${f##*model.ckpt-}; s=${s%%.*}
  (( s <= ro_step )) || { echo "FAIL read_only: $f is newer than the index's latest ($ro_step)"; exit 1; }
done
resume_to_the_end ro read_only
echo "ok   read_only: stopped with checkpoint $ro_step whole; resume == uninterrupted, byte for byte"

# 5. train_dir removed mid-run (saving every step).
"$TRAIN" --train_dir="$TMP/gone" --max_number_of_steps=100000 --save_interval_secs=0 \
  "${common[@]}" >"$TMP/gone.out" 2>"$TMP/gone.err" &
pid=$!
wait_for_step "$TMP/gone.err" 3
for _ in $(seq 100); do
  rm -rf "$TMP/gone" 2>/dev/null || true
  [[ -e "$TMP/gone" ]] || break
done
( sleep 120; kill -9 $pid 2>/dev/null ) & watchdog=$!
rc=0; wait $pid || rc=$?
kill $watchdog 2>/dev/null || true
[[ $rc -eq 1 ]] || { echo "FAIL gone: exit status $rc, expected 1"; tail -5 "$TMP/gone.err"; exit 1; }
grep '^error: ' "$TMP/gone.err" | grep -qF "$TMP/gone" \
  || { echo "FAIL gone: the error does not name the train_dir"; tail -5 "$TMP/gone.err"; exit 1; }
[[ ! -e "$TMP/gone" ]] || { echo "FAIL gone: train_dir created again"; ls -R "$TMP/gone"; exit 1; }
echo "ok   gone: $(grep '^error: ' "$TMP/gone.err")"

# 6. Disk full writing the event file.
expect_failure events_full "error writing event file '$TMP/ev/events.out.tfevents." \
  env SLIMTORCH_FAULT_INJECT="write:*/events.out.tfevents.*:3000:ENOSPC" \
  "$TRAIN" --train_dir="$TMP/ev" --max_number_of_steps=$steps --save_interval_secs=0 \
  "${common[@]}" --save_summaries_secs=0
expect_in events_full "No space left on device"
python3 - "$TMP"/ev/events.out.tfevents.* <<'EOF' || exit 1
import struct, sys
data = open(sys.argv[1], "rb").read()
at = n = 0
while at < len(data):
    (length,) = struct.unpack_from("<Q", data, at)
    at += 8 + 4 + length + 4
    n += 1
if at != len(data):
    sys.exit(f"FAIL events_full: {sys.argv[1]} ends in a partial record")
print(f"ok   events_full: {n} whole records, {len(data)} bytes")
EOF

# 7. The latest checkpoint damaged after it was written: a bit flipped,
# then cut short. The index of $TMP/full lists checkpoints 4..8.
ckpt8="$TMP/full/model.ckpt-8.safetensors"
python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 4; open(p, 'wb').write(b)" "$ckpt8"
expect_failure flipped "cannot resume from the latest checkpoint '$ckpt8'" \
  "$TRAIN" --train_dir="$TMP/full" --max_number_of_steps=10 "${common[@]}"
expect_in flipped "is damaged"
expect_in flipped "To resume from the checkpoint before it, '$TMP/full/model.ckpt-7.safetensors', remove '$ckpt8' and run again"
truncate -s -1000 "$ckpt8"
expect_failure truncated "cannot resume from the latest checkpoint '$ckpt8'" \
  "$TRAIN" --train_dir="$TMP/full" --max_number_of_steps=10 "${common[@]}"
expect_in truncated "truncated"
rm "$ckpt8"
"$TRAIN" --train_dir="$TMP/full" --max_number_of_steps=$steps "${common[@]}" 2>"$TMP/back.log" \
  || { tail -20 "$TMP/back.log"; exit 1; }
grep -q "resuming from $TMP/full/model.ckpt-7.safetensors" "$TMP/back.log" \
  || { echo "FAIL damaged: did not fall back to checkpoint 7"; tail -20 "$TMP/back.log"; exit 1; }
cmp "$TMP/ref/$final" "$ckpt8" \
  || { echo "FAIL damaged: 7 + 1 steps differ from the uninterrupted run"; exit 1; }
echo "ok   damaged: removing it resumed from checkpoint 7; == uninterrupted, byte for byte"

# 8. Disk full writing an export.
export_args=(--model_name=lenet --dataset_name=fashion_mnist --dataset_dir="$TMP/data"
             --checkpoint_path="$TMP/full" --output_file="$TMP/export/lenet.onnx")
mkdir -p "$TMP/export"
expect_failure export_full "'$TMP/export/lenet.onnx'" \
  env SLIMTORCH_FAULT_INJECT="write:*/lenet.onnx:1000:ENOSPC" \
  "$BIN/export_inference_graph" "${export_args[@]}"
expect_in export_full "No space left on device"
[[ -z "$(ls -A "$TMP/export")" ]] || { echo "FAIL export_full: left"; ls "$TMP/export"; exit 1; }
"$BIN/export_inference_graph" "${export_args[@]}" 2>"$TMP/export.log" \
  || { tail -20 "$TMP/export.log"; exit 1; }
[[ -s "$TMP/export/lenet.onnx" ]]
echo "PASS storage_faults"
