#!/usr/bin/env bash
# The photo input path (TFRecords of JPEGs to batches) against torchvision and tf.data:
# the entry script of bench/input/.
#
#   bench/input/run.sh [ARGS...]
#
# Runs photo_input.sh (its header lists the knobs and the peers) side by side in one
# run, and appends its rows to bench/results/input.csv (bench/lib/results.sh;
# BENCH_RECORD=0 prints them instead).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/photo_input.sh" "$@"
