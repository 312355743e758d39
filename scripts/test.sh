#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (CTest:
# unit tests + end-to-end tests of the executables).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-1}"
