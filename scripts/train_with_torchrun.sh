#!/usr/bin/env bash
# Data-parallel training launched by PyTorch's torchrun (where PyTorch is
# installed): NPROC processes on each of NNODES machines, one replica each,
# gradients averaged with c10d all-reduce (Gloo, CPU replicas). Run the same
# command on every machine, with its own NODE_RANK:
#
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 NPROC=2 \
#     scripts/train_with_torchrun.sh --train_dir=/shared/lenet \
#       --dataset_name=mnist --dataset_dir=/shared/mnist --model_name=lenet
#
# --batch_size is per replica, as TF-Slim's is per clone; --train_dir must
# be shared by the machines (replica 0 writes the checkpoints, every replica
# resumes from them). torchrun sets RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR and MASTER_PORT, which train_image_classifier reads.
# BUILD_DIR overrides the build directory; the cores of a machine are shared
# by its processes unless --num_intra_op_threads says otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BUILD_DIR:-$root/build}
command -v torchrun >/dev/null || { echo "error: torchrun not found (pip install torch)" >&2; exit 1; }
exec torchrun --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
  --nproc_per_node="${NPROC:-2}" --master_addr="${MASTER_ADDR:-127.0.0.1}" \
  --master_port="${MASTER_PORT:-29500}" --no-python \
  "$BIN/train_image_classifier" --clone_on_cpu "$@"
