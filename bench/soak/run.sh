#!/usr/bin/env bash
# The soak of issue 33 (docs/soak.md): a long CPU training of CifarNet,
# interrupted by SIGTERM every few minutes and resumed, beside the
# evaluation loop and an uninterrupted twin; final weights compared byte for
# byte, RSS and file descriptors sampled. The entry script of bench/soak/.
#
#   bench/soak/run.sh [BUILD_DIR]          # default: build
#   DURATION=600 INTERVAL=75 bench/soak/run.sh build   # a 10-minute check
#
# bench/soak/soak.py's header lists the settings (DURATION, STEPS,
# INTERVAL, JITTER, SEED, CLONES, ...). Rows go to bench/results/soak.csv,
# samples and summaries to bench/results/soak/ (BENCH_RECORD=0: neither);
# regenerate the docs' table after a run with
#   python3 bench/soak/soak.py --write-docs docs/soak.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/soak.py" "$@"
