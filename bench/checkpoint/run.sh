#!/usr/bin/env bash
# Restoring a TensorFlow-written checkpoint against TensorFlow's Saver.restore:
# the entry script of bench/checkpoint/.
#
#   bench/checkpoint/run.sh [ARGS...]
#
# Runs checkpoint_restore.sh (its header lists the knobs and the peers) side by side in one
# run, and appends its rows to bench/results/checkpoint.csv (bench/lib/results.sh;
# BENCH_RECORD=0 prints them instead).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/checkpoint_restore.sh" "$@"
