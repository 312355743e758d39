#!/usr/bin/env bash
# Configures and builds slimtorch into build/ (or $BUILD_DIR) with ninja,
# ccache and precompiled LibTorch headers. Extra arguments go to cmake.
#
# Which LibTorch: the CUDA one that `scripts/install_deps.sh --cuda` put in
# .venv-cuda/ (or $SLIMTORCH_CUDA_VENV) when it is there, else Debian's
# libtorch-dev; -DTorch_DIR=... or -DCMAKE_PREFIX_PATH=... among the
# arguments (or Torch_DIR in the environment) choose another. A build folder
# configured for another LibTorch is configured afresh.
# CUDA kernels: for the compute capability of the GPUs nvidia-smi lists,
# else CMakeLists.txt's default (8.0;9.0+PTX); TORCH_CUDA_ARCH_LIST chooses.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.ccache}
  export CCACHE_BASEDIR=$root CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
fi

args=("$@")
# A LibTorch named among the arguments: -DTorch_DIR[:PATH]=X (or -D Torch_DIR=X),
# or a -DCMAKE_PREFIX_PATH entry that holds a TorchConfig.cmake.
named=""
prev=""
for arg in "$@"; do
  [[ "$prev" == "-D" ]] && arg="-D$arg"
  prev=$arg
  case "$arg" in
    -DTorch_DIR=*|-DTorch_DIR:*=*) named=${arg#*=} ;;
    -DCMAKE_PREFIX_PATH=*|-DCMAKE_PREFIX_PATH:*=*)
      IFS=';' read -ra entries <<<"${arg#*=}"
      for p in "${entries[@]}"; do
        for d in "$p" "$p/Torch" "$p/share/cmake/Torch" "$p/lib/cmake/Torch"; do
          if [[ -z "$named" && -f "$d/TorchConfig.cmake" ]]; then named=$d; fi
        done
      done ;;
  esac
done
want=${named:-${Torch_DIR:-}}
if [[ -z "$want" ]]; then
  venv=${SLIMTORCH_CUDA_VENV:-$root/.venv-cuda}
  if [[ -x "$venv/bin/python" ]]; then
    prefix=$("$venv/bin/python" -W ignore -c \
      'import torch; print(torch.utils.cmake_prefix_path)') \
      || { echo "build: $venv has no importable torch: rerun scripts/install_deps.sh --cuda" >&2; exit 1; }
    want=$prefix/Torch
    args+=("-DTorch_DIR=$want")
    echo "build: LibTorch from $venv ($want)"
  fi
fi
# A build folder configured for another LibTorch starts afresh: its cached
# library paths would otherwise mix the two.
cache=$build/CMakeCache.txt
if [[ -f "$cache" ]]; then
  cached=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$cache")
  if [[ -n "$want" && -n "$cached" && "$(readlink -f "$cached")" != "$(readlink -f "$want")" ]] ||
     [[ -z "$want" && "$cached" == */.venv-cuda/* ]]; then
    echo "build: $build was configured with the LibTorch at $cached; configuring afresh"
    rm -rf "$cache" "$build/CMakeFiles"
  fi
fi
if [[ -z "${TORCH_CUDA_ARCH_LIST:-}" ]] && command -v nvidia-smi >/dev/null; then
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u | paste -sd';' || true)
  if [[ "$caps" =~ ^[0-9.\;]+$ ]]; then
    export TORCH_CUDA_ARCH_LIST=$caps
    echo "build: CUDA kernels for compute capability $caps (the GPUs present)"
  fi
fi
# cmake's own lines only on failure; slimtorch's summary lines always.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "${args[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
grep '^-- slimtorch:' "$log" || true
ninja -C "$build" -j "$jobs"
