#!/usr/bin/env bash
# Sets up the Python peers of bench/input/photo_input.sh. Idempotent; rerun freely.
#
#   bench/lib/setup_python_peers.sh
#
# torchvision peer (bench/input/photo_input_torchvision.py): Debian 12's
#   python3-torch 1.13 (the LibTorch slimtorch links) + python3-torchvision
#   0.14 + python3-pil, through scripts/install_deps.sh --bench, run with
#   /usr/bin/python3. PyTorch's CPU-only wheels live on PyTorch's own index,
#   not on PyPI (PyPI's Linux torch bundles CUDA, gigabytes); with
#   BENCH_TORCH=pip this script makes a venv TORCH_VENV (/opt/benchenv) with
#   `pip install torch torchvision` from TORCH_INDEX_URL (PyPI when unset)
#   instead; bench/input/photo_input.sh uses TORCH_PYTHON (that venv's python when
#   it exists, else /usr/bin/python3).
# tf.data peer (bench/input/photo_input_tf.py): TensorFlow, tf_slim and Pillow from
#   PyPI in TF_VENV (/opt/tfenv; made here if missing), plus TF-Slim's own
#   preprocessing modules, which no package ships: they are copied, unmodified,
#   from a tensorflow/models research/slim folder into SLIM_DEST
#   (/opt/benchenv/tf_slim_research/preprocessing/). The source is, first
#   found: TF_SLIM_DIR (a research/slim folder of a tensorflow/models
#   checkout); SLIM_GIT (a git directory holding a copy of research/slim at its
#   root, read at SLIM_REV; default: the mirror of such a copy whose first
#   commit imports upstream research/slim unmodified, as of mid-2018).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
TF_VENV=${TF_VENV:-/opt/tfenv}
TORCH_VENV=${TORCH_VENV:-/opt/benchenv}
SLIM_DEST=${SLIM_DEST:-/opt/benchenv/tf_slim_research}
SLIM_GIT=${SLIM_GIT:-/work/.mirror/tsukudamayo+slim/repo}
SLIM_REV=${SLIM_REV:-ad2f549}
modules=(inception_preprocessing.py vgg_preprocessing.py)

# torchvision
"$root/scripts/install_deps.sh" --bench
dpkg-query -W -f='${Status}' python3-pil 2>/dev/null | grep -q "ok installed" ||
  { apt-get install -y -q --no-install-recommends python3-pil; }
if [[ "${BENCH_TORCH:-debian}" == pip && ! -x "$TORCH_VENV/bin/python" ]]; then
  python3 -m venv "$TORCH_VENV"
  "$TORCH_VENV/bin/pip" install -q ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} \
    torch torchvision
  "$TORCH_VENV/bin/pip" install -q pillow
fi

# TensorFlow
if [[ ! -x "$TF_VENV/bin/python" ]]; then
  python3 -m venv "$TF_VENV"
  "$TF_VENV/bin/pip" install -q tensorflow-cpu tf-slim pillow numpy
fi

# TF-Slim's preprocessing modules
mkdir -p "$SLIM_DEST/preprocessing"
for m in "${modules[@]}"; do
  dest="$SLIM_DEST/preprocessing/$m"
  [[ -f "$dest" ]] && continue
  if [[ -n "${TF_SLIM_DIR:-}" ]]; then
    cp "$TF_SLIM_DIR/preprocessing/$m" "$dest.tmp"
  elif [[ -d "$SLIM_GIT" ]]; then
    git --git-dir="$SLIM_GIT" show "$SLIM_REV:preprocessing/$m" >"$dest.tmp"
  else
    echo "setup_python_peers: no source for TF-Slim's $m: set TF_SLIM_DIR to a" \
      "tensorflow/models research/slim folder" >&2
    exit 1
  fi
  mv "$dest.tmp" "$dest"
done
echo "setup_python_peers: torchvision peer: $(/usr/bin/python3 -c \
  'import torch, torchvision, PIL; print("torch", torch.__version__, "torchvision", torchvision.__version__, "Pillow", PIL.__version__)')"
echo "setup_python_peers: tf.data peer: $("$TF_VENV/bin/python" -c \
  'import importlib.metadata as m; print("tensorflow", m.version("tensorflow-cpu"), "tf_slim", m.version("tf-slim"))' 2>/dev/null)," \
  "TF-Slim preprocessing in $SLIM_DEST"
