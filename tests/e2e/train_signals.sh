#!/usr/bin/env bash
# Preemption, through the tool, on real Fashion-MNIST with LeNet:
# 1. SIGTERM mid-run: the step in progress finishes, a checkpoint is
#    written, exit 0; resuming to the end equals an uninterrupted run byte
#    for byte.
# 2. SIGINT twice: the second exits at once (130); the latest checkpoint
#    named by the index still loads.
# 3. kill -9 at random moments (KILL_TRIALS, default 12) of runs that save
#    every step: after every kill the latest checkpoint loads whole; then
#    resuming to the end equals the uninterrupted run byte for byte.
# Prints "kill -9 campaign: <trials> trials, <n> advanced the latest
# checkpoint, 0 unreadable; ..." (KILL_TRIALS=200 for a larger campaign).
#   bash train_signals.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
trials=${KILL_TRIALS:-12}
steps=60

convert_fashion_mnist "$TMP/data"
set_lenet_resume_flags
final=model.ckpt-$steps.safetensors

# The uninterrupted reference.
"$BIN/train_image_classifier" --train_dir="$TMP/ref" --max_number_of_steps=$steps \
  --save_interval_secs=1000000 "${common[@]}" 2>"$TMP/ref.log" \
  || { tail -20 "$TMP/ref.log"; exit 1; }

# latest_step <dir>: the global step of the checkpoint the index names, read
# by loading the whole checkpoint (fails on an unreadable one).
latest_step() {
  "$BIN/inspect_checkpoint" --file_name="$1" --tensor_name=global_step 2>"$TMP/inspect.log" \
    | tr -dc '0-9' || { echo "FAIL unreadable latest checkpoint in $1"; cat "$TMP/inspect.log"; exit 1; }
}

# 1. SIGTERM mid-run.
"$BIN/train_image_classifier" --train_dir="$TMP/term" --max_number_of_steps=$steps \
  --save_interval_secs=1000000 "${common[@]}" >"$TMP/term.out" 2>"$TMP/term.log" &
pid=$!
wait_for_step "$TMP/term.log" 5
kill -TERM $pid
rc=0; wait $pid || rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL SIGTERM: exit status $rc"; tail -20 "$TMP/term.log"; exit 1; }
grep -q "(stopped by signal)" "$TMP/term.out" || { echo "FAIL SIGTERM: not reported"; exit 1; }
stopped_at=$(latest_step "$TMP/term")
(( stopped_at >= 5 && stopped_at < steps )) || { echo "FAIL SIGTERM: saved step $stopped_at"; exit 1; }
"$BIN/train_image_classifier" --train_dir="$TMP/term" --max_number_of_steps=$steps \
  --save_interval_secs=1000000 "${common[@]}" 2>"$TMP/term2.log" \
  || { tail -20 "$TMP/term2.log"; exit 1; }
cmp "$TMP/ref/$final" "$TMP/term/$final" \
  || { echo "FAIL SIGTERM at step $stopped_at: resumed run differs from the uninterrupted one"; exit 1; }
echo "ok   SIGTERM at step $stopped_at: checkpoint written, exit 0, resume == uninterrupted, byte for byte"

# 2. SIGINT twice: out at once with 130, the index still names a good one.
"$BIN/train_image_classifier" --train_dir="$TMP/int" --max_number_of_steps=100000 \
  --save_interval_secs=0 "${common[@]}" >"$TMP/int.out" 2>"$TMP/int.log" &
pid=$!
wait_for_step "$TMP/int.log" 3
kill -INT $pid
# Standard signals do not queue: send the second once the first has landed.
for _ in $(seq 200); do grep -q "signal received" "$TMP/int.log" && break; sleep 0.01; done
kill -INT $pid
rc=0; wait $pid || rc=$?
[[ $rc -eq 130 ]] || { echo "FAIL second SIGINT: exit status $rc, expected 130"; tail -5 "$TMP/int.log"; exit 1; }
echo "ok   SIGINT twice: exit 130 at once; latest checkpoint (step $(latest_step "$TMP/int")) loads"

# 3. kill -9 campaign on one train_dir, saving every step: each trial
# resumes, and is killed 0-250 ms after its first logged step (in a step, in
# a save, or between), so that every trial lands mid-training.
kill_steps=$((10 * trials + 20))
"$BIN/train_image_classifier" --train_dir="$TMP/ref_kill" --max_number_of_steps=$kill_steps \
  --save_interval_secs=1000000 "${common[@]}" 2>"$TMP/ref_kill.log" \
  || { tail -20 "$TMP/ref_kill.log"; exit 1; }
mid=0
before=0
for t in $(seq "$trials"); do
  rm -f "$TMP/kill.log"
  "$BIN/train_image_classifier" --train_dir="$TMP/kill" --max_number_of_steps=$kill_steps \
    --save_interval_secs=0 "${common[@]}" >/dev/null 2>"$TMP/kill.log" &
  pid=$!
  for _ in $(seq 600); do
    grep -q "global step [0-9]*: loss" "$TMP/kill.log" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.02
  done
  sleep "$(python3 -c "import random; print(random.uniform(0, 0.25))")"
  kill -9 $pid 2>/dev/null || true
  wait $pid 2>/dev/null || true
  now=0  # killed before the first save: no index yet
  [[ -e "$TMP/kill/checkpoint" ]] && now=$(latest_step "$TMP/kill")
  (( now > before )) && mid=$((mid + 1))
  before=$now
  (( before >= kill_steps )) && break
done
"$BIN/train_image_classifier" --train_dir="$TMP/kill" --max_number_of_steps=$kill_steps \
  --save_interval_secs=1000000 "${common[@]}" 2>"$TMP/kill_end.log" \
  || { tail -20 "$TMP/kill_end.log"; exit 1; }
cmp "$TMP/ref_kill/model.ckpt-$kill_steps.safetensors" "$TMP/kill/model.ckpt-$kill_steps.safetensors" \
  || { echo "FAIL after kill -9: resumed run differs from the uninterrupted one"; exit 1; }
echo "kill -9 campaign: $t trials, $mid advanced the latest checkpoint, 0 unreadable;" \
  "resumed to step $kill_steps == uninterrupted, byte for byte"
echo "PASS train_signals"
