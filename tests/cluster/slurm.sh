#!/usr/bin/env bash
# scripts/train_on_slurm.sbatch under a real SLURM: Debian's slurm-wlm and
# munge as a one-machine cluster that this test starts and stops itself (its
# own munge key and socket, slurm.conf, ports, state and spool under a
# temporary folder; nothing of the system's is used or left), 2 tasks of
# cifarnet_tutorial on real Fashion-MNIST, CPU replicas:
# 1. The time limit: --time=2 --signal=TERM@100 sends SIGTERM early; every
#    task finishes its step, replica 0 saves, the job ends COMPLETED with
#    exit code 0 and the result line says "stopped by signal".
# 2. scontrol requeue: the running job is stopped (SIGTERM: a checkpoint)
#    and runs again, resuming there; its last checkpoint equals the one of
#    an uninterrupted --num_clones=2 run, byte for byte.
# 3. The GPU form (DRY_RUN=1 with the variables SLURM sets for GPUs): no
#    --clone_on_cpu.
# Needs root (slurmd runs the tasks as the submitting user) and exits 77
# (skipped) without root or the packages, or where the daemons do not come
# up (their logs are printed).
#   bash slurm.sh <build dir>
set -euo pipefail
BIN="$1"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$ROOT/tests/e2e/lib.sh"
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
for tool in slurmctld slurmd munged mungekey sbatch scontrol; do
  command -v $tool >/dev/null || { echo "SKIP: no $tool (slurm-wlm, munge)"; exit 77; }
done
TMP="$(mktemp -d)"
chmod 755 "$TMP"
export SLURM_CONF="$TMP/slurm.conf"
stop_cluster() {
  for pid in "$TMP/slurmd.pid" "$TMP/slurmctld.pid" "$TMP/munge/munged.pid"; do
    [[ -f "$pid" ]] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  sleep 1
  for pid in "$TMP/slurmd.pid" "$TMP/slurmctld.pid" "$TMP/munge/munged.pid"; do
    [[ -f "$pid" ]] && kill -9 "$(cat "$pid")" 2>/dev/null || true
  done
  # Tasks a daemon left behind (none expected).
  for p in $(replica_pid "$TMP/limit" 0) $(replica_pid "$TMP/limit" 1) \
           $(replica_pid "$TMP/requeue" 0) $(replica_pid "$TMP/requeue" 1); do
    kill -9 "$p" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap stop_cluster EXIT

# munge: its own key and socket.
mkdir -p "$TMP/munge" "$TMP/state" "$TMP/spool" "$TMP/log"
chmod 700 "$TMP/munge"
mungekey -c -k "$TMP/munge/munge.key" -f
munged -f --socket="$TMP/munge/munge.socket" --key-file="$TMP/munge/munge.key" \
  --log-file="$TMP/log/munged.log" --pid-file="$TMP/munge/munged.pid" \
  --seed-file="$TMP/munge/munged.seed"
chmod 755 "$TMP/munge"

host=$(hostname)
ctld_port=$(free_port)
slurmd_port=$(free_port)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 2048 ))
cat >"$SLURM_CONF" <<EOF
ClusterName=slimtorchtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$TMP/munge/munge.socket
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool/%n
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=30
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
up=0
for _ in $(seq 60); do
  if sinfo -h -o %t 2>/dev/null | grep -q idle; then up=1; break; fi
  sleep 0.5
done
if [[ $up -eq 0 ]]; then
  echo "SKIP: the one-machine SLURM did not come up"; tail -n 20 "$TMP"/log/*.log; exit 77
fi
echo "ok   one-machine SLURM up (slurmctld :$ctld_port, slurmd :$slurmd_port, munge in $TMP)"

convert_fashion_mnist "$TMP/data"
common=(--dataset_name=fashion_mnist --dataset_dir="$TMP/data" --model_name=cifarnet_tutorial
        --optimizer=sgd --learning_rate=0.05 --learning_rate_decay_type=fixed
        --weight_decay=0 --log_every_n_steps=10 --seed=5 --save_summaries_secs=1000000
        --save_interval_secs=1000000 --num_preprocessing_threads=1 --batch_size=24)
submit() {  # submit <train_dir> <sbatch options...> -- <flags...>: prints the job id
  local dir="$1"
  shift
  local opts=()
  while [[ "$1" != -- ]]; do opts+=("$1"); shift; done
  shift
  MASTER_PORT=$(free_port) BUILD_DIR="$BIN" sbatch --parsable --nodes=1 --ntasks-per-node=2 \
    --cpus-per-task=1 --output="$dir.out" "${opts[@]}" "$ROOT/scripts/train_on_slurm.sbatch" \
    --train_dir="$dir" "${common[@]}" "$@"
}
state() { scontrol show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
wait_state() {  # wait_state <job> <state> <seconds>
  for _ in $(seq $(( $3 * 2 ))); do
    [[ "$(state "$1")" == "$2" ]] && return 0
    sleep 0.5
  done
  echo "FAIL job $1 is $(state "$1"), not $2, after $3 s"; scontrol show job "$1"; tail -20 "$TMP/log/slurmctld.log"; exit 1
}

# 1. The time limit's SIGTERM.
job=$(submit "$TMP/limit" --time=2 --signal=TERM@100 -- --max_number_of_steps=100000000)
wait_state "$job" COMPLETED 150
exit_code=$(scontrol show job "$job" | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
[[ "$exit_code" == 0:0 ]] || { echo "FAIL the time-limited job ended with $exit_code"; tail -20 "$TMP/limit.out"; exit 1; }
grep -q "(stopped by signal)" "$TMP/limit.out" || { echo "FAIL no 'stopped by signal'"; tail -20 "$TMP/limit.out"; exit 1; }
grep -q "replica 1 of 2 (slurm)" "$TMP/limit.out" || { echo "FAIL not 2 SLURM replicas"; tail -20 "$TMP/limit.out"; exit 1; }
"$BIN/inspect_checkpoint" --file_name="$TMP/limit" --tensor_name=global_step >/dev/null \
  || { echo "FAIL unreadable checkpoint after the time limit"; exit 1; }
echo "ok   --signal=TERM@100: $(grep -o 'global_step [0-9]*' "$TMP/limit.out"), stopped by signal, COMPLETED, exit 0:0"

# 2. scontrol requeue, then resume exactly.
"$BIN/train_image_classifier" --train_dir="$TMP/ref" "${common[@]}" --max_number_of_steps=400 \
  --num_clones=2 --clone_on_cpu >"$TMP/ref.out" 2>"$TMP/ref.log" || { tail "$TMP/ref.log"; exit 1; }
job=$(submit "$TMP/requeue" -- --max_number_of_steps=400)
wait_for_step "$TMP/requeue.out" 100
scontrol requeue "$job"
wait_state "$job" PENDING 60
# SLURM holds a requeued job for two minutes (its BeginTime); the test
# lets it go at once, as an administrator can.
scontrol update JobId="$job" StartTime=now
wait_state "$job" COMPLETED 240
grep -q "(stopped by signal)" "$TMP/requeue.out" || { echo "FAIL the requeue did not stop the job by signal"; cat "$TMP/requeue.out"; exit 1; }
grep -q "Resuming from $TMP/requeue/model.ckpt-" "$TMP/requeue.out" || { echo "FAIL the requeued job did not resume"; tail -30 "$TMP/requeue.out"; exit 1; }
cmp "$TMP/ref/model.ckpt-400.safetensors" "$TMP/requeue/model.ckpt-400.safetensors" \
  || { echo "FAIL the requeued job differs from the uninterrupted run"; exit 1; }
echo "ok   scontrol requeue at $(grep -o 'global_step [0-9]* .*stopped' "$TMP/requeue.out" | cut -d' ' -f2): resumed, step 400 == --num_clones=2, byte for byte"

# 3. The GPU form, printed.
gpu=$(SLURM_GPUS_ON_NODE=4 SLURM_CPUS_PER_TASK=8 DRY_RUN=1 BUILD_DIR="$BIN" \
  bash "$ROOT/scripts/train_on_slurm.sbatch" --train_dir=/shared/run)
[[ "$gpu" == "srun --kill-on-bad-exit=1 $BIN/train_image_classifier --num_intra_op_threads=8 --train_dir=/shared/run " ]] \
  || { echo "FAIL GPU form: $gpu"; exit 1; }
cpu=$(env -u CUDA_VISIBLE_DEVICES SLURM_GPUS_ON_NODE=0 DRY_RUN=1 BUILD_DIR="$BIN" \
  bash "$ROOT/scripts/train_on_slurm.sbatch" --train_dir=/shared/run)
[[ "$cpu" == *"train_image_classifier --clone_on_cpu "* ]] || { echo "FAIL CPU form: $cpu"; exit 1; }
echo "ok   GPU form: $gpu"
echo "PASS slurm"
