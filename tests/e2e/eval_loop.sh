#!/usr/bin/env bash
# eval_image_classifier's evaluation loop (--eval_interval_secs, --timeout)
# beside a training run, as TF-Slim users run a second process: LeNet on
# real Fashion-MNIST saving a checkpoint every step and keeping only the
# newest two (so checkpoints are deleted under the evaluator). The loop
# evaluates several of them in increasing global step, the last one being
# the final step, writes one event file per evaluation, tolerates
# checkpoints deleted before it reads them, and ends --timeout seconds after
# training stops writing. Then the flag rules.
#   bash eval_loop.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
steps=150

convert_fashion_mnist "$TMP/data"
"$BIN/train_image_classifier" --train_dir="$TMP/train" --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --model_name=lenet --optimizer=sgd --learning_rate=0.05 \
  --learning_rate_decay_type=fixed --batch_size=50 --weight_decay=0 \
  --max_number_of_steps=$steps --save_interval_secs=0 --max_checkpoints_to_keep=2 \
  --log_every_n_steps=1 --num_intra_op_threads=1 --num_preprocessing_threads=1 \
  --save_summaries_secs=1000000 >"$TMP/train.out" 2>"$TMP/train.log" &
train=$!
wait_for_step "$TMP/train.log" 1

start=$(date +%s)
"$BIN/eval_image_classifier" --checkpoint_path="$TMP/train" --eval_dir="$TMP/eval" \
  --dataset_name=fashion_mnist --dataset_dir="$TMP/data" --dataset_split_name=test \
  --model_name=lenet --batch_size=100 --max_num_batches=10 \
  --num_intra_op_threads=1 --num_preprocessing_threads=1 \
  --eval_interval_secs=0.5 --timeout=6 >"$TMP/eval.out" 2>"$TMP/eval.log" &
evaluator=$!
wait $train || { echo "FAIL training"; tail -20 "$TMP/train.log"; exit 1; }
trained=$(date +%s)
rc=0; wait $evaluator || rc=$?
ended=$(date +%s)
[[ $rc -eq 0 ]] || { echo "FAIL evaluation loop: exit $rc"; tail -20 "$TMP/eval.log"; exit 1; }

mapfile -t evaluated < <(sed -n 's/^Evaluated .* (global step \([0-9]*\)).*/\1/p' "$TMP/eval.out")
n=${#evaluated[@]}
(( n >= 3 )) || { echo "FAIL only $n evaluations"; cat "$TMP/eval.out"; exit 1; }
for ((i = 1; i < n; ++i)); do
  (( evaluated[i] > evaluated[i - 1] )) \
    || { echo "FAIL global steps not increasing: ${evaluated[*]}"; exit 1; }
done
[[ ${evaluated[n - 1]} -eq $steps ]] \
  || { echo "FAIL last evaluation at step ${evaluated[n - 1]}, not $steps"; exit 1; }
grep -q "eval/Accuracy\[" "$TMP/eval.out" || { echo "FAIL no accuracy printed"; exit 1; }
summary=$(grep "^Evaluation loop: $n evaluations" "$TMP/eval.out") \
  || { echo "FAIL no loop summary for $n evaluations"; cat "$TMP/eval.out"; exit 1; }
[[ $summary == *"timed out waiting for a checkpoint"* ]] \
  || { echo "FAIL loop did not end on --timeout: $summary"; exit 1; }
files=$(ls "$TMP/eval"/events.out.tfevents.* | wc -l)
[[ $files -eq $n ]] || { echo "FAIL $files event files for $n evaluations"; exit 1; }
# Ends about --timeout (6 s) after the last new checkpoint, not long after.
(( ended - trained <= 6 + 15 )) || { echo "FAIL loop ran $((ended - trained)) s past training"; exit 1; }
skipped=$(echo "$summary" | sed -n 's/.*, \([0-9]*\) checkpoints deleted.*/\1/p')
echo "ok   evaluation loop beside training: $n evaluations at steps ${evaluated[*]}, $skipped deleted under it, ended $((ended - trained)) s after training"

# The flag rules.
common=(--dataset_name=fashion_mnist --dataset_dir="$TMP/data" --model_name=lenet
        --eval_dir="$TMP/eval2")
expect_failure loop_on_file "is not a directory" "$BIN/eval_image_classifier" "${common[@]}" \
  --checkpoint_path="$TMP/train/model.ckpt-$steps.safetensors" --eval_interval_secs=1
expect_failure timeout_alone "set --eval_interval_secs too" "$BIN/eval_image_classifier" \
  "${common[@]}" --checkpoint_path="$TMP/train" --timeout=5
expect_failure negative_interval "--eval_interval_secs must be > 0" \
  "$BIN/eval_image_classifier" "${common[@]}" --checkpoint_path="$TMP/train" \
  --eval_interval_secs=-1
# SIGTERM while waiting: the loop stops, exit 0.
"$BIN/eval_image_classifier" "${common[@]}" --checkpoint_path="$TMP/train" \
  --max_num_batches=1 --eval_interval_secs=0.5 >"$TMP/term.out" 2>"$TMP/term.log" &
pid=$!
for _ in $(seq 600); do grep -q "^Evaluated" "$TMP/term.out" && break; sleep 0.05; done
kill -TERM $pid
rc=0; wait $pid || rc=$?
[[ $rc -eq 0 ]] && grep -q "(stopped by signal)" "$TMP/term.out" \
  || { echo "FAIL SIGTERM: exit $rc"; cat "$TMP/term.out" "$TMP/term.log"; exit 1; }
echo "ok   SIGTERM while waiting: exit 0"
