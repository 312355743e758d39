#!/usr/bin/env bash
# Restoring Inception v3 (1001 classes, ~95 MB of variables) from a
# checkpoint written by TensorFlow, side by side in one run:
#   TensorFlow: Saver.restore of the model variables (what TF-Slim's
#               assign_from_checkpoint_fn runs for --checkpoint_path);
#   slimtorch:  bench/restore_bench (LoadCheckpointFor + RestoreVariables,
#               what train/eval run for --checkpoint_path).
# Both on warm page cache (one untimed round), median of ROUNDS, V2 and V1.
#
#   bench/checkpoint/checkpoint_restore.sh      # ROUNDS=5, MODEL=inception_v3
# Appends a row per checkpoint format to bench/results/checkpoint.csv
# (bench/lib/results.sh) and writes the table to
# bench/results/logs/checkpoint_restore-<date>.txt.
# The TensorFlow side needs tensorflow-cpu, tf-slim and tf_keras from PyPI
# (PYTHON; installed with pip when missing; never a dependency of slimtorch).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BUILD_DIR:-$root/build}
ROUNDS=${ROUNDS:-5}
MODEL=${MODEL:-inception_v3}
DIR=${DIR:-/tmp/slimtorch_restore_bench/$MODEL}
PYTHON=${PYTHON:-python3}
if [[ ! -x "$BIN/bench/restore_bench" ]]; then
  "$root/scripts/install_deps.sh"
  "$root/scripts/build.sh" -DSLIMTORCH_BUILD_BENCH=ON
fi
if ! "$PYTHON" -c "import tensorflow, tf_slim, tf_keras" 2>/dev/null; then
  "$PYTHON" -m pip install --quiet tensorflow-cpu tf-slim
  tfv=$("$PYTHON" -c "import tensorflow as t; print(t.__version__)")
  "$PYTHON" -m pip install --quiet "tf_keras==$tfv"
fi
if [[ ! -f "$DIR/v2/model.ckpt-1.index" || ! -f "$DIR/v1/model.ckpt-1" ]]; then
  "$PYTHON" "$here/restore_tf.py" --model "$MODEL" --write "$DIR"
fi
. "$root/bench/lib/results.sh"
mkdir -p "$root/bench/results/logs"
tfv=$("$PYTHON" -c "import tensorflow as t; print(t.__version__)" 2>/dev/null || echo "?")
out="$root/bench/results/logs/checkpoint_restore-$(date +%F).txt"
{
  echo "# $(date +%F) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "| checkpoint | size | TensorFlow restore | slimtorch restore | speed-up |"
  echo "|---|---|---|---|---|"
  for v in v2 v1; do
    prefix="$DIR/$v/model.ckpt-1"
    size=$(du -cb "$prefix"* | tail -1 | cut -f1)
    tf_ms=$("$PYTHON" "$here/restore_tf.py" --model "$MODEL" \
      --restore "$prefix" --rounds "$ROUNDS" | grep -o 'restore_ms=.*' | cut -d= -f2)
    our_ms=$("$BIN/bench/restore_bench" --checkpoint="$prefix" \
      --model_name="$MODEL" --num_classes=1001 --rounds="$ROUNDS" 2>/dev/null \
      | grep -o 'restore_ms=.*' | cut -d= -f2)
    awk -v v="$v" -v s="$size" -v t="$tf_ms" -v o="$our_ms" -v m="$MODEL" 'BEGIN {
      printf "| %s %s (TensorFlow-written) | %.0f MB | %.0f ms | %.0f ms | %.2fx |\n",
             m, toupper(v), s / 1e6, t, o, t / o }'
    bench_record checkpoint "restore $MODEL, ${v^^} TensorFlow-written checkpoint" "$our_ms" "$tf_ms" ms \
      "TensorFlow $tfv Saver.restore" "$((size / 1000000)) MB; median of $ROUNDS rounds on a warm page cache" >&2
  done
} | tee "$out"
