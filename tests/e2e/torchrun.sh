#!/usr/bin/env bash
# The real torchrun launching train_image_classifier through
# scripts/train_with_torchrun.sh (Debian's python3-torch, or TORCHRUN=...;
# more torchruns to run the same checks with in SLIMTORCH_EXTRA_TORCHRUNS,
# space-separated, e.g. PyPI's from a virtual environment), on real
# Fashion-MNIST with cifarnet_tutorial, 2 processes on CPUs:
# 1. The static rendezvous (--master_addr/--master_port: torchrun's agent
#    serves the store, the replicas join it) and the c10d rendezvous
#    (--rdzv_endpoint) each write the checkpoint --num_clones=2 writes,
#    byte for byte.
# 2. Elastic restart: kill -9 of a worker under --max_restarts=1: torchrun
#    restarts both, they resume from the latest checkpoint, and the last
#    checkpoint equals the uninterrupted run's, byte for byte.
# 3. kill -9 of a worker without restarts: the other exits within 30 s with
#    an error naming the lost replica (rank, host, pid); the same for two
#    processes started by hand (torchrun's environment, no torchrun).
# 4. One trainer per train_dir: a second trainer on a running one's
#    train_dir is refused at once naming the holder's host and pid; after a
#    kill -9 of the holder a new trainer starts at once and resumes.
# 5. Errors: a taken MASTER_PORT, a replica that never comes, nothing
#    serving the store: each names the replica, the address, the seconds
#    waited and the cause.
# 6. The GPU form of the command, printed.
#   bash torchrun.sh <build dir>
set -euo pipefail
BIN="$1"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TMP="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"

torchruns=("${TORCHRUN:-torchrun}")
for t in ${SLIMTORCH_EXTRA_TORCHRUNS:-}; do torchruns+=("$t"); done
command -v "${torchruns[0]}" >/dev/null || { echo "SKIP: no torchrun (python3-torch)"; exit 77; }

convert_fashion_mnist "$TMP/data"
common=(--dataset_name=fashion_mnist --dataset_dir="$TMP/data" --model_name=cifarnet_tutorial
        --optimizer=sgd --learning_rate=0.05 --learning_rate_decay_type=fixed
        --weight_decay=0 --log_every_n_steps=1 --seed=5 --save_summaries_secs=1000000
        --num_preprocessing_threads=1 --batch_size=24)
if ! "$BIN/train_image_classifier" --train_dir="$TMP/ref" "${common[@]}" --max_number_of_steps=40 \
    --save_interval_secs=1000000 --num_clones=2 --clone_on_cpu >"$TMP/ref.out" 2>"$TMP/ref.log"; then
  if grep -q "built without c10d" "$TMP/ref.log"; then echo "SKIP: built without c10d"; exit 77; fi
  cat "$TMP/ref.log"; exit 1
fi
ref="$TMP/ref/model.ckpt-40.safetensors"

# launch <torchrun> <train_dir> <log> <env...> -- <flags...>: the script,
# in the background; $launched is its pid.
launch() {
  local tr="$1" dir="$2" log="$3"
  shift 3
  local envs=()
  while [[ "$1" != -- ]]; do envs+=("$1"); shift; done
  shift
  env TORCHRUN="$tr" BUILD_DIR="$BIN" NPROC=2 GPUS=0 "${envs[@]}" \
    "$ROOT/scripts/train_with_torchrun.sh" --train_dir="$dir" "${common[@]}" "$@" \
    >"$log.out" 2>"$log" &
  launched=$!
}

n=0
for tr in "${torchruns[@]}"; do
  n=$((n + 1))
  version=$("$(head -1 "$(command -v "$tr")" | sed -n 's/^#! *//p')" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "?")
  echo "     torchrun $tr (PyTorch $version)"
  # 1. Both rendezvous forms == --num_clones=2.
  launch "$tr" "$TMP/static$n" "$TMP/static$n.log" MASTER_PORT="$(free_port)" -- \
    --max_number_of_steps=40 --save_interval_secs=1000000
  wait $launched || { echo "FAIL static torchrun job"; tail -30 "$TMP/static$n.log"; exit 1; }
  grep -q "replica 1 of 2 (torchrun)" "$TMP/static$n.log" || { echo "FAIL no replica 1 of 2"; tail "$TMP/static$n.log"; exit 1; }
  cmp "$ref" "$TMP/static$n/model.ckpt-40.safetensors" \
    || { echo "FAIL static torchrun differs from --num_clones=2"; exit 1; }
  echo "ok   static rendezvous (--master_port) == --num_clones=2, byte for byte"
  launch "$tr" "$TMP/c10d$n" "$TMP/c10d$n.log" RDZV_ENDPOINT="127.0.0.1:$(free_port)" RDZV_ID="job$n" -- \
    --max_number_of_steps=40 --save_interval_secs=1000000
  wait $launched || { echo "FAIL c10d torchrun job"; tail -30 "$TMP/c10d$n.log"; exit 1; }
  cmp "$ref" "$TMP/c10d$n/model.ckpt-40.safetensors" \
    || { echo "FAIL c10d torchrun differs from --num_clones=2"; exit 1; }
  echo "ok   c10d rendezvous (--rdzv_endpoint) == --num_clones=2, byte for byte"

  # 2. kill -9 under --max_restarts=1: restarted, resumed, equal.
  launch "$tr" "$TMP/elastic$n" "$TMP/elastic$n.log" RDZV_ENDPOINT="127.0.0.1:$(free_port)" \
    RDZV_ID="elastic$n" MAX_RESTARTS=1 -- --max_number_of_steps=40 --save_interval_secs=0
  wait_for_file "$TMP/elastic$n/model.ckpt-15.safetensors"
  victim=$(replica_pid "$TMP/elastic$n" 1)
  [[ -n "$victim" ]] || { echo "FAIL cannot find replica 1"; exit 1; }
  kill -9 "$victim"
  wait $launched || { echo "FAIL the restarted job failed"; tail -30 "$TMP/elastic$n.log"; exit 1; }
  grep -q "Resuming from" "$TMP/elastic$n.log" || { echo "FAIL no resume after the restart"; tail -30 "$TMP/elastic$n.log"; exit 1; }
  cmp "$ref" "$TMP/elastic$n/model.ckpt-40.safetensors" \
    || { echo "FAIL the restarted job differs from the uninterrupted one"; exit 1; }
  echo "ok   kill -9 with --max_restarts=1: restarted, resumed, == uninterrupted, byte for byte"

  # 3. kill -9 without restarts: the survivor names the lost replica.
  launch "$tr" "$TMP/lost$n" "$TMP/lost$n.log" MASTER_PORT="$(free_port)" -- \
    --max_number_of_steps=1000000 --save_interval_secs=1000000
  wait_for_step "$TMP/lost$n.log" 5
  victim=$(replica_pid "$TMP/lost$n" 1)
  [[ -n "$victim" ]] || { echo "FAIL cannot find replica 1"; exit 1; }
  start=$(date +%s.%N)
  kill -9 "$victim"
  rc=0; wait $launched || rc=$?
  secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  [[ $rc -ne 0 ]] || { echo "FAIL torchrun exited 0 after a killed worker"; exit 1; }
  grep -q "replica 1 (host [^,]*, pid $victim) is gone" "$TMP/lost$n.log" \
    || { echo "FAIL the survivor's error does not name replica 1 (pid $victim)"; grep -i "error" "$TMP/lost$n.log" | head; exit 1; }
  python3 -c "import sys; sys.exit(0 if $secs <= 30 else 1)" \
    || { echo "FAIL torchrun took $secs s to end after the kill"; exit 1; }
  echo "ok   kill -9 of replica 1: torchrun ended in $secs s; the survivor: $(grep -o 'replica 1 (host[^)]*) is gone' "$TMP/lost$n.log" | head -1)"
done

# 3b. The same for two processes started by hand (torchrun's environment).
port=$(free_port)
for rank in 0 1; do
  RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$BIN/train_image_classifier" --train_dir="$TMP/hand" "${common[@]}" --clone_on_cpu \
    --max_number_of_steps=1000000 --save_interval_secs=1000000 --num_intra_op_threads=1 \
    >"$TMP/hand$rank.out" 2>"$TMP/hand$rank.log" &
  pids[$rank]=$!
done
wait_for_step "$TMP/hand0.log" 5
start=$(date +%s.%N)
kill -9 "${pids[1]}"
rc=0; wait "${pids[0]}" || rc=$?
secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
[[ $rc -ne 0 ]] || { echo "FAIL replica 0 exited 0 after replica 1 was killed"; exit 1; }
grep -q "failed on replica 0 (host .*replica 1 (host [^,]*, pid ${pids[1]}) is gone" "$TMP/hand0.log" \
  || { echo "FAIL replica 0's error does not name replica 1"; grep "error" "$TMP/hand0.log"; exit 1; }
python3 -c "import sys; sys.exit(0 if $secs <= 30 else 1)" || { echo "FAIL $secs s"; exit 1; }
echo "ok   by hand: kill -9 of replica 1, replica 0 exits in $secs s naming it"

# 4. One trainer per train_dir.
"$BIN/train_image_classifier" --train_dir="$TMP/locked" "${common[@]}" \
  --max_number_of_steps=1000000 --save_interval_secs=0 >"$TMP/holder.out" 2>"$TMP/holder.log" &
holder=$!
wait_for_step "$TMP/holder.log" 3
start=$(date +%s.%N)
expect_failure second_trainer "is in use by another trainer (host $(hostname) pid $holder since" \
  "$BIN/train_image_classifier" --train_dir="$TMP/locked" "${common[@]}" --max_number_of_steps=10
expect_failure second_job "pid $holder since" env TORCHRUN="${torchruns[0]}" BUILD_DIR="$BIN" NPROC=2 GPUS=0 \
  MASTER_PORT="$(free_port)" "$ROOT/scripts/train_with_torchrun.sh" --train_dir="$TMP/locked" "${common[@]}" \
  --max_number_of_steps=10
expect_failure second_clones "pid $holder since" "$BIN/train_image_classifier" --train_dir="$TMP/locked" \
  "${common[@]}" --max_number_of_steps=10 --num_clones=2 --clone_on_cpu
kill -9 $holder; wait $holder || true
step=$(ls "$TMP/locked" | sed -n 's/^model\.ckpt-\([0-9]*\)\.safetensors$/\1/p' | sort -n | tail -1)
"$BIN/train_image_classifier" --train_dir="$TMP/locked" "${common[@]}" --max_number_of_steps=$((step + 2)) \
  >"$TMP/after.out" 2>"$TMP/after.log" || { echo "FAIL no trainer after the holder's kill -9"; tail "$TMP/after.log"; exit 1; }
grep -q "global_step $((step + 2)) " "$TMP/after.out" || { echo "FAIL the next trainer did not resume at $step"; cat "$TMP/after.out"; exit 1; }
"$BIN/eval_image_classifier" --checkpoint_path="$TMP/locked" --eval_dir="$TMP/locked_eval" \
  --dataset_name=fashion_mnist --dataset_split_name=test --dataset_dir="$TMP/data" \
  --model_name=cifarnet_tutorial --max_num_batches=1 --batch_size=10 >/dev/null 2>"$TMP/eval.log" \
  || { echo "FAIL evaluation of a locked train_dir"; tail "$TMP/eval.log"; exit 1; }
echo "ok   the lock: second trainer, torchrun job and --num_clones refused naming pid $holder; kill -9 frees it; the evaluator reads"

# 5. Errors a user can act on.
python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0)); s.listen(); open('$TMP/taken', 'w').write(str(s.getsockname()[1]))
time.sleep(120)" &
wait_for_file "$TMP/taken"
sleep 0.2
expect_failure port_taken "is taken: another job" env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT="$(cat "$TMP/taken")" "$BIN/train_image_classifier" --train_dir="$TMP/e1" "${common[@]}" --clone_on_cpu
expect_failure never_joined "s at the rendezvous 127.0.0.1:" env RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT="$(free_port)" "$BIN/train_image_classifier" --train_dir="$TMP/e2" "${common[@]}" --clone_on_cpu \
  --collective_timeout_secs=3
grep -q "for replicas 1, 2 of 3, which never joined" "$TMP/never_joined.err" || { echo "FAIL never_joined names no ranks"; exit 1; }
expect_failure no_store "nothing served the store at 127.0.0.1:" env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT="$(free_port)" "$BIN/train_image_classifier" --train_dir="$TMP/e3" "${common[@]}" --clone_on_cpu \
  --collective_timeout_secs=3
# 6. The GPU form, printed (DRY_RUN=1, 8 GPUs assumed): one process per GPU,
#    no --clone_on_cpu; --clone_on_cpu given keeps the CPU form.
gpu=$(GPUS=8 DRY_RUN=1 TORCHRUN="${torchruns[0]}" BUILD_DIR="$BIN" NNODES=2 NODE_RANK=1 MASTER_ADDR=node0 \
  "$ROOT/scripts/train_with_torchrun.sh" --train_dir=/shared/run)
[[ "$gpu" == *"--nnodes=2 --nproc_per_node=8 --max_restarts=0 --node_rank=1 --master_addr=node0 --master_port=29500 "*"$BIN/train_image_classifier --train_dir=/shared/run "* &&
   "$gpu" != *--clone_on_cpu* ]] || { echo "FAIL GPU form: $gpu"; exit 1; }
cpu=$(GPUS=8 DRY_RUN=1 TORCHRUN="${torchruns[0]}" BUILD_DIR="$BIN" "$ROOT/scripts/train_with_torchrun.sh" \
  --clone_on_cpu --train_dir=/shared/run)
[[ "$cpu" == *"--nproc_per_node=2 "*"train_image_classifier --clone_on_cpu --train_dir=/shared/run "* ]] \
  || { echo "FAIL CPU form on a GPU machine: $cpu"; exit 1; }
echo "ok   GPU form: $gpu"
echo "PASS torchrun"
