#!/usr/bin/env bash
# Configures and builds slimtorch into build/ (or $BUILD_DIR) with ninja,
# ccache and precompiled LibTorch headers. Extra arguments go to cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.ccache}
  export CCACHE_BASEDIR=$root CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
fi
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$build" -j "$jobs"
