#!/usr/bin/env bash
# Exported nets in onnxruntime, OpenCV DNN and TensorFlow against LibTorch eager:
# the entry script of bench/export/.
#
#   bench/export/run.sh [ARGS...]
#
# Runs export_inference.sh (its header lists the knobs and the peers) side by side in one
# run, and appends its rows to bench/results/export.csv (bench/lib/results.sh;
# BENCH_RECORD=0 prints them instead).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/export_inference.sh" "$@"
