#!/usr/bin/env bash
# Data-parallel training launched by PyTorch's torchrun: NPROC processes on
# each of NNODES machines, one replica each, gradients averaged with c10d
# all-reduce (NCCL on GPUs, one GPU per process by LOCAL_RANK; Gloo on
# CPUs). Run the same command on every machine.
#
# Static rendezvous (torchrun's --master_addr/--master_port; each machine
# its own NODE_RANK):
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 \
#     scripts/train_with_torchrun.sh --train_dir=/shared/lenet \
#       --dataset_name=mnist --dataset_dir=/shared/mnist --model_name=lenet
# Elastic (c10d) rendezvous: no ranks to hand out, NNODES may be MIN:MAX,
# and MAX_RESTARTS restarts the workers after a failure, resuming from the
# latest checkpoint:
#   NNODES=1:2 RDZV_ENDPOINT=node0:29400 RDZV_ID=lenet MAX_RESTARTS=3 \
#     scripts/train_with_torchrun.sh --train_dir=/shared/lenet ...
#
# Environment: NPROC (processes per machine; default the GPUs nvidia-smi
# lists, or 2 without GPUs), NNODES (1), NODE_RANK (0), MASTER_ADDR
# (127.0.0.1), MASTER_PORT (29500), RDZV_ENDPOINT, RDZV_ID (slimtorch),
# MAX_RESTARTS (0), TORCHRUN (the torchrun to run; default the one on
# PATH: Debian's python3-torch or PyPI's torch), BUILD_DIR (the build
# folder), GPUS (the GPU count to assume instead of asking nvidia-smi),
# DRY_RUN=1 (print the command instead of running it).
# Without GPUs (or with --clone_on_cpu among the arguments) the replicas
# train on CPUs and the script adds --clone_on_cpu. --batch_size is per
# replica, as TF-Slim's is per clone; --train_dir must be shared by the
# machines (replica 0 writes the checkpoints and holds its lock, every
# replica resumes from them). The cores of a machine are shared by its
# processes unless --num_intra_op_threads says otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BUILD_DIR:-$root/build}
TORCHRUN=${TORCHRUN:-torchrun}
command -v "$TORCHRUN" >/dev/null || {
  echo "error: $TORCHRUN not found: install Debian's python3-torch or PyPI's torch, or set TORCHRUN" >&2
  exit 1
}
if [[ -z "${GPUS:-}" ]]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
cpu=0
for arg in "$@"; do
  [[ "$arg" == --clone_on_cpu || "$arg" == --clone_on_cpu=true ]] && cpu=1
done
extra=()
if [[ "${GPUS:-0}" -eq 0 && $cpu -eq 0 ]]; then extra+=(--clone_on_cpu); fi
if [[ -z "${NPROC:-}" ]]; then
  if [[ "${GPUS:-0}" -gt 0 && $cpu -eq 0 ]]; then NPROC=$GPUS; else NPROC=2; fi
fi

# torchrun's own flags, as this torchrun spells them: --no-python (PyTorch 2)
# or --no_python (PyTorch 1.x, Debian 12's python3-torch).
help=$("$TORCHRUN" --help 2>&1 || true)
if [[ "$help" == *--no-python* ]]; then no_python=--no-python; else no_python=--no_python; fi
run=("$TORCHRUN" --nnodes="${NNODES:-1}" --nproc_per_node="$NPROC"
     --max_restarts="${MAX_RESTARTS:-0}")
if [[ -n "${RDZV_ENDPOINT:-}" ]]; then
  run+=(--rdzv_backend=c10d --rdzv_endpoint="$RDZV_ENDPOINT" --rdzv_id="${RDZV_ID:-slimtorch}")
else
  run+=(--node_rank="${NODE_RANK:-0}" --master_addr="${MASTER_ADDR:-127.0.0.1}"
        --master_port="${MASTER_PORT:-29500}")
fi
# PyTorch 1.13's torchrun on Python 3.11 crashes in its log set-up
# ('NoneType' object has no attribute 'get': its Std flag no longer parses
# "0" there) unless each of --redirects and --tee is a stream it parses:
# stdout to a log file and on to the terminal, stderr untouched.
py=$(head -1 "$(command -v "$TORCHRUN")" | sed -n 's/^#! *//p')
if [[ -n "$py" ]] && ! $py -c 'import sys
from torch.distributed.elastic.multiprocessing.api import Std
sys.exit(0 if isinstance(Std.from_str("0"), Std) else 1)' 2>/dev/null; then
  run+=(--redirects=1 --tee=1)
fi
run+=("$no_python" "$BIN/train_image_classifier" "${extra[@]}" "$@")
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' "${run[@]}"
  echo
  exit 0
fi
exec "${run[@]}"
