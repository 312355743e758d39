#!/usr/bin/env bash
# Every tf_slim net (16), lenet, cifarnet and mobilenet_v1 / _075 / _050 /
# _025 (TF-Slim's code in tf_slim layers), inception_resnet_v2 and
# mobilenet_v2 / _140 / _035 (their tf_keras ports), and research/slim's
# MobileNet v3 / EdgeTPU, NASNet, PNASNet, I3D and S3D-G (TF-Slim's own
# files, from a copy of tensorflow/models research/slim: --slim-dir DIR, or
# $TFSLIM_DIR, default /work/tfslim/research/slim; left out with a note when
# it is missing, exit 77 when one of them is named): 39 nets written by
# TensorFlow as V1 and V2 checkpoints, here and now, then restored by
# slimtorch: the logits must equal TensorFlow's within 1e-4 of the largest.
# Nets not registered in slimtorch yet are reported and passed by.
# Needs TensorFlow + tf_slim + tf_keras ($PYTHON, default /opt/tfenv/bin/python);
# exits 77 (skipped) without them. CTest label "tensorflow": scripts/test.sh
# leaves it out unless SLIMTORCH_TF_TESTS=1 (about 15 minutes on 2 cores).
#   tests/tf/tf_checkpoints_all_nets.sh BUILD_DIR [--slim-dir DIR] [net ...]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [--slim-dir DIR] [net ...]}
shift
slim_dir=${TFSLIM_DIR:-/work/tfslim/research/slim}
if [[ "${1:-}" == "--slim-dir" ]]; then
  slim_dir=${2:?--slim-dir needs a directory}
  shift 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-/opt/tfenv/bin/python}
if ! "$python" -c 'import tensorflow, tf_slim, tf_keras' >/dev/null 2>&1; then
  echo "skipped: no TensorFlow + tf_slim + tf_keras at $python"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/slimtorch_tf_all_nets.XXXXXX")
trap 'rm -rf "$work"' EXIT
quiet() { grep -v -i -E 'warn|deprecat|cuda|^I0000|^W0000' >&2 || true; }
"$python" "$root/scripts/golden/gen_tf_checkpoints.py" --all-nets "$work" \
  --slim-dir "$slim_dir" "$@" 2> >(quiet)
# The zoo's nets that tf_slim does not ship, from their tf_keras ports.
if [[ $# -eq 0 ]]; then
  "$python" "$root/scripts/golden/gen_keras_net_logits_goldens.py" \
    --checkpoints "$work" 2> >(quiet)
fi
SLIMTORCH_TF_ALL_NETS_DIR=$work "$build/tests/slimtorch_tests" \
  --gtest_filter='TfSaverCheckpointAllNetsTest.*'
