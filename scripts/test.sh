#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (CTest:
# unit tests + end-to-end tests of the executables). Checks that run
# TensorFlow at test time (CTest label "tensorflow", minutes each) are left
# out unless SLIMTORCH_TF_TESTS=1; they skip where TensorFlow is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
labels=(-LE tensorflow)
if [[ "${SLIMTORCH_TF_TESTS:-0}" == 1 ]]; then labels=(); fi
ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-1}" "${labels[@]}"
