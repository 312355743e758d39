#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (CTest:
# unit tests + end-to-end tests of the executables). Checks that run
# TensorFlow at test time (CTest label "tensorflow", minutes each) are left
# out unless SLIMTORCH_TF_TESTS=1; they skip where TensorFlow is missing.
# Tests too slow for every run on 2 cores (CTest label "slow": the
# nasnet_cifar and large NASNet / PNASNet training checks) are left out
# unless SLIMTORCH_SLOW_TESTS=1. The tests labelled "cluster" (a
# one-machine SLURM, two hosts in network namespaces: ~4 minutes) run as
# root unless SLIMTORCH_CLUSTER_TESTS=0.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
# On a machine with a GPU the suite's CUDA tests run (they skip without one),
# given a CUDA build: scripts/install_deps.sh --cuda, then this script.
if gpus=$(nvidia-smi -L 2>/dev/null) && [[ -n "$gpus" ]]; then
  if [[ "$(ldd libslimtorch.so)" == *libtorch_cuda* ]]; then
    echo "test: CUDA build; the CUDA tests run on: $gpus"
  else
    echo "test: warning: a GPU is present but this build's LibTorch has no CUDA, so the CUDA tests skip; run scripts/install_deps.sh --cuda first" >&2
  fi
fi
left_out=()
if [[ "${SLIMTORCH_TF_TESTS:-0}" != 1 ]]; then left_out+=(tensorflow); fi
if [[ "${SLIMTORCH_SLOW_TESTS:-0}" != 1 ]]; then left_out+=(slow); fi
# The cluster tests (a one-machine SLURM, two network namespaces) need root.
if [[ "${SLIMTORCH_CLUSTER_TESTS:-1}" == 0 || $(id -u) -ne 0 ]]; then left_out+=(cluster); fi
labels=()
if [[ ${#left_out[@]} -gt 0 ]]; then
  labels=(-LE "^($(IFS='|'; echo "${left_out[*]}"))\$")
fi
ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-1}" "${labels[@]}"
