#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair
# on a private link this test makes and removes (hosta 10.231.71.1, hostb
# 10.231.71.2, each with its own hostname through a UTS namespace and its
# own /etc/hosts through /etc/netns), torchrun on each (Debian's, then any
# in SLIMTORCH_EXTRA_TORCHRUNS), one replica per host, the train_dir
# shared (one file system):
# 1. The static rendezvous (MASTER_ADDR=hosta) and the c10d one
#    (RDZV_ENDPOINT=hosta:port) each equal --num_clones=2 on one host, byte
#    for byte (all at one thread per replica).
# 2. kill -9 of the worker on hostb: every other process (the worker on
#    hosta, both torchruns) has exited within 30 s, and hosta's worker's
#    error names the lost replica's rank, host and pid.
# 3. The same kill under --max_restarts=1: both torchruns restart their
#    workers, which resume from the latest checkpoint; the last checkpoint
#    equals the uninterrupted run's, byte for byte.
# 4. A membership change (NNODES=1:2): hostb's torchrun and worker killed,
#    hosta's worker restarts alone and resumes the global step at world
#    size 1.
# Needs root (ip netns, unshare); exits 77 (skipped) without it.
#   bash two_hosts.sh <build dir>
set -euo pipefail
BIN="$1"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$ROOT/tests/e2e/lib.sh"
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
command -v ip >/dev/null && command -v unshare >/dev/null || { echo "SKIP: no ip (iproute2) or unshare"; exit 77; }
torchruns=("${TORCHRUN:-torchrun}")
for t in ${SLIMTORCH_EXTRA_TORCHRUNS:-}; do torchruns+=("$t"); done
command -v "${torchruns[0]}" >/dev/null || { echo "SKIP: no torchrun (python3-torch)"; exit 77; }

TMP="$(mktemp -d)"
tag="st$$"
A="${tag}a" B="${tag}b"
cleanup() {
  for p in $(jobs -p); do kill -9 "$p" 2>/dev/null || true; done
  for d in "$TMP"/*/; do
    for r in 0 1; do
      p=$(replica_pid "${d%/}" $r)
      [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null || true
    done
  done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "/etc/netns/$A" "/etc/netns/$B" "$TMP"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add "v$A" type veth peer name "v$B"
ip link set "v$A" netns "$A"
ip link set "v$B" netns "$B"
ip -n "$A" addr add 10.231.71.1/24 dev "v$A"
ip -n "$B" addr add 10.231.71.2/24 dev "v$B"
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "v$ns" up
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n10.231.71.1 hosta\n10.231.71.2 hostb\n' >"/etc/netns/$ns/hosts"
done
echo "ok   hosta 10.231.71.1 ($A) and hostb 10.231.71.2 ($B) on a veth pair"

convert_fashion_mnist "$TMP/data"
common=(--dataset_name=fashion_mnist --dataset_dir="$TMP/data" --model_name=cifarnet_tutorial
        --optimizer=sgd --learning_rate=0.05 --learning_rate_decay_type=fixed
        --weight_decay=0 --log_every_n_steps=1 --seed=5 --save_summaries_secs=1000000
        --num_preprocessing_threads=1 --batch_size=24 --num_intra_op_threads=1
        --collective_timeout_secs=60)
"$BIN/train_image_classifier" --train_dir="$TMP/ref" "${common[@]}" --max_number_of_steps=40 \
  --save_interval_secs=1000000 --num_clones=2 --clone_on_cpu >"$TMP/ref.out" 2>"$TMP/ref.log" \
  || { tail "$TMP/ref.log"; exit 1; }
ref="$TMP/ref/model.ckpt-40.safetensors"

# on_host <a|b> <torchrun> <log> <env...> -- <flags...>: the script on that
# host in the background; $launched is its pid.
on_host() {
  local host="$1" tr="$2" log="$3" ns="$A" rank=0
  shift 3
  [[ $host == b ]] && { ns="$B"; rank=1; }
  local envs=()
  while [[ "$1" != -- ]]; do envs+=("$1"); shift; done
  shift
  ip netns exec "$ns" unshare --uts env HOSTNAME_SET="host$host" sh -c 'hostname "$HOSTNAME_SET"; exec "$@"' _ \
    env TORCHRUN="$tr" BUILD_DIR="$BIN" NPROC=1 NNODES=2 NODE_RANK=$rank GPUS=0 "${envs[@]}" \
    "$ROOT/scripts/train_with_torchrun.sh" "${common[@]}" "$@" >"$log.out" 2>"$log" &
  launched=$!
}

n=0
for tr in "${torchruns[@]}"; do
  n=$((n + 1))
  echo "     torchrun $tr"
  # 1. Both rendezvous forms across the hosts == --num_clones=2.
  port=$(free_port)
  on_host a "$tr" "$TMP/s$n.a" MASTER_ADDR=hosta MASTER_PORT=$port -- \
    --train_dir="$TMP/static$n" --max_number_of_steps=40 --save_interval_secs=1000000
  pa=$launched
  on_host b "$tr" "$TMP/s$n.b" MASTER_ADDR=hosta MASTER_PORT=$port -- \
    --train_dir="$TMP/static$n" --max_number_of_steps=40 --save_interval_secs=1000000
  pb=$launched
  wait $pa && wait $pb || { echo "FAIL static two-host job"; tail -n 20 "$TMP/s$n.a" "$TMP/s$n.b"; exit 1; }
  grep -q "replica 1 of 2 (torchrun)" "$TMP/s$n.b" || { echo "FAIL hostb ran no replica 1"; exit 1; }
  cmp "$ref" "$TMP/static$n/model.ckpt-40.safetensors" || { echo "FAIL static two-host job differs"; exit 1; }
  echo "ok   static rendezvous across two hosts == --num_clones=2, byte for byte"
  port=$(free_port)
  for h in a b; do
    on_host $h "$tr" "$TMP/c$n.$h" RDZV_ENDPOINT=hosta:$port RDZV_ID=c$n -- \
      --train_dir="$TMP/c10d$n" --max_number_of_steps=40 --save_interval_secs=1000000
    eval "p$h=$launched"
  done
  wait $pa && wait $pb || { echo "FAIL c10d two-host job"; tail -n 20 "$TMP/c$n.a" "$TMP/c$n.b"; exit 1; }
  cmp "$ref" "$TMP/c10d$n/model.ckpt-40.safetensors" || { echo "FAIL c10d two-host job differs"; exit 1; }
  echo "ok   c10d rendezvous across two hosts == --num_clones=2, byte for byte"

  # 2. kill -9 of hostb's worker: everyone else out within 30 s, named.
  port=$(free_port)
  for h in a b; do
    on_host $h "$tr" "$TMP/k$n.$h" MASTER_ADDR=hosta MASTER_PORT=$port -- \
      --train_dir="$TMP/kill$n" --max_number_of_steps=1000000 --save_interval_secs=1000000
    eval "p$h=$launched"
  done
  wait_for_step "$TMP/k$n.a" 5
  victim=$(replica_pid "$TMP/kill$n" 1)
  [[ -n "$victim" ]] || { echo "FAIL cannot find hostb's worker"; exit 1; }
  start=$(date +%s.%N)
  kill -9 "$victim"
  wait $pa || true
  wait $pb || true
  secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  [[ -z "$(replica_pid "$TMP/kill$n" 0)" ]] || { echo "FAIL hosta's worker still runs"; exit 1; }
  grep -q "failed on replica 0 (host hosta 10.231.71.1, pid [0-9]*): replica 1 (host hostb 10.231.71.2, pid $victim) is gone" "$TMP/k$n.a" \
    || { echo "FAIL hosta's error does not name replica 1 on hostb"; grep "error" "$TMP/k$n.a"; exit 1; }
  python3 -c "import sys; sys.exit(0 if $secs <= 30 else 1)" || { echo "FAIL the job took $secs s to end"; exit 1; }
  echo "ok   kill -9 on hostb: all exited in $secs s; $(grep -o 'replica 1 (host hostb[^)]*) is gone' "$TMP/k$n.a" | head -1)"

  # 3. The same under --max_restarts=1: restarted and resumed exactly.
  port=$(free_port)
  for h in a b; do
    on_host $h "$tr" "$TMP/r$n.$h" RDZV_ENDPOINT=hosta:$port RDZV_ID=r$n MAX_RESTARTS=1 -- \
      --train_dir="$TMP/restart$n" --max_number_of_steps=40 --save_interval_secs=0
    eval "p$h=$launched"
  done
  wait_for_file "$TMP/restart$n/model.ckpt-15.safetensors"
  victim=$(replica_pid "$TMP/restart$n" 1)
  [[ -n "$victim" ]] || { echo "FAIL cannot find hostb's worker"; exit 1; }
  kill -9 "$victim"
  wait $pa && wait $pb || { echo "FAIL the restarted two-host job failed"; tail -n 20 "$TMP/r$n.a" "$TMP/r$n.b"; exit 1; }
  grep -q "Resuming from" "$TMP/r$n.b" || { echo "FAIL hostb did not resume"; tail -20 "$TMP/r$n.b"; exit 1; }
  cmp "$ref" "$TMP/restart$n/model.ckpt-40.safetensors" || { echo "FAIL the restarted job differs"; exit 1; }
  echo "ok   kill -9 on hostb with --max_restarts=1: $(grep -o 'Resuming from [^ ]* at global step [0-9]*' "$TMP/r$n.b" | head -1 | sed 's|.*/||'), == uninterrupted, byte for byte"

  # 4. A membership change: NNODES=1:2, hostb's torchrun and worker killed
  #    (the host gone): hosta's torchrun restarts its worker alone, which
  #    resumes the global step at world size 1 and trains to the end.
  port=$(free_port)
  for h in a b; do
    on_host $h "$tr" "$TMP/m$n.$h" NNODES=1:2 RDZV_ENDPOINT=hosta:$port RDZV_ID=m$n MAX_RESTARTS=1 -- \
      --train_dir="$TMP/member$n" --max_number_of_steps=60 --save_interval_secs=0
    eval "p$h=$launched"
  done
  wait_for_file "$TMP/member$n/model.ckpt-15.safetensors"
  grep -q "batch 24 x 2 replicas" "$TMP/m$n.a" || { echo "FAIL the elastic job did not start with 2 replicas"; exit 1; }
  victim=$(replica_pid "$TMP/member$n" 1)
  kill -9 "$pb" $victim
  wait $pb 2>/dev/null || true
  start=$(date +%s.%N)
  wait $pa || { echo "FAIL hosta's elastic job failed after hostb left"; tail -n 30 "$TMP/m$n.a"; exit 1; }
  secs=$(python3 -c "import time; print(f'{time.time() - $start:.0f}')")
  resumed=$(grep -o "Resuming from [^ ]* at global step [0-9]*" "$TMP/m$n.a" | tail -1 | grep -o "[0-9]*$")
  [[ -n "$resumed" ]] && grep -q "batch 24, optimizer\|batch 24 on\|batch 24," "$TMP/m$n.a" \
    || { echo "FAIL hosta did not resume alone"; grep "Training\|Resuming" "$TMP/m$n.a"; exit 1; }
  grep -q "global_step 60 " "$TMP/m$n.a.out" || { echo "FAIL hosta did not reach step 60"; tail "$TMP/m$n.a.out"; exit 1; }
  echo "ok   NNODES=1:2, hostb gone: hosta resumed alone at step $resumed (world size 1) and reached step 60 (${secs} s after hostb's kill)"
done
echo "PASS two_hosts"
