#!/usr/bin/env bash
# Data-parallel clones on the CPU against PyTorch DDP:
# the entry script of bench/deploy/.
#
#   bench/deploy/run.sh [ARGS...]
#
# Runs deploy_scaling.sh (its header lists the knobs and the peers) side by side in one
# run, and appends its rows to bench/results/deploy.csv (bench/lib/results.sh;
# BENCH_RECORD=0 prints them instead).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/deploy_scaling.sh" "$@"
