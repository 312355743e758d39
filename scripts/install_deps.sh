#!/usr/bin/env bash
# Installs every Debian 12 package slimtorch needs to build, test and run.
# Idempotent: installs only what is missing. Works as root or through sudo.
#
#   scripts/install_deps.sh            build + test + runtime packages
#   scripts/install_deps.sh --bench    also the Python peer of bench/
#   scripts/install_deps.sh --fuzz     also clang and its sanitizer and
#       libFuzzer runtimes, for tests/fuzz/run_fuzzers.sh (docs/fuzzing.md)
#   scripts/install_deps.sh --cuda     also a CUDA LibTorch for a GPU server:
#       PyTorch's wheel (version pinned in scripts/cuda-requirements.txt) in
#       the project's own virtual environment .venv-cuda/ (SLIMTORCH_CUDA_VENV
#       to put it elsewhere), which scripts/build.sh then builds against. Needs
#       an NVIDIA driver and the CUDA toolkit (nvcc) of the wheel's CUDA.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=0 cuda=0 fuzz=0
for arg in "$@"; do
  case "$arg" in
    --bench) bench=1 ;;
    --cuda) cuda=1 ;;
    --fuzz) fuzz=1 ;;
    *) echo "install_deps: unknown argument '$arg' (expected --bench, --cuda or --fuzz)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev          # LibTorch 1.13 (CPU)
  libgloo-dev           # c10d headers include Gloo's
  libopenblas0-pthread  # without it LibTorch's fully-connected layers run ~20x slower
  libdnnl-dev           # oneDNN's headers: its batch norm (the library LibTorch links) trains channels-last ~2x faster, its Winograd 3x3 convolutions 1.4-2.8x
  libgflags-dev libgoogle-glog-dev
  libpng-dev libjpeg62-turbo-dev  # PNG/JPEG codecs (TensorFlow's own)
  libarchive-dev libcurl4-openssl-dev zlib1g-dev
  libsnappy-dev         # snappy-compressed blocks in TensorFlow checkpoints (V1 files of 2016)
  libprotobuf-dev protobuf-compiler
  libopencv-dnn-dev     # label_image runs exported ONNX models in OpenCV's DNN module (core + dnn only)
  libgtest-dev
  python3               # end-to-end tests make tiny inputs with it
  libjpeg-turbo-progs   # cjpeg: end-to-end tests make JPEG photos of real images
  dataset-fashion-mnist # real Fashion-MNIST, offline: /usr/share/datasets/fashion-mnist
  python3-torch         # torchrun (PyTorch 1.13's launcher): tests/e2e/torchrun.sh runs the real one
  slurm-wlm munge       # a one-machine SLURM for tests/cluster/slurm.sh
  iproute2              # ip netns: the two hosts of tests/cluster/two_hosts.sh
)
if [[ $bench == 1 ]]; then
  packages+=(python3 python3-torch python3-torchvision python3-numpy)
fi
if [[ $fuzz == 1 ]]; then
  packages+=(clang libclang-rt-dev)  # libFuzzer, ASan, UBSan runtimes
fi
if [[ $cuda == 1 ]]; then
  packages+=(python3-venv)  # the private environment of PyTorch's wheel
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# PyTorch's CUDA wheel into the project's virtual environment, from the
# system interpreter (Debian's python3 + python3-venv), never into it.
install_cuda_libtorch() {
  local venv=${SLIMTORCH_CUDA_VENV:-$root/.venv-cuda}
  local req=$root/scripts/cuda-requirements.txt
  local py=/usr/bin/python3
  [[ -x $py ]] || py=$(command -v python3)
  if [[ ! -x $venv/bin/python ]]; then
    echo "install_deps: creating $venv"
    "$py" -m venv "$venv"
  fi
  echo "install_deps: $(grep -v '^#' "$req" | xargs) into $venv (from PyPI; several GB with its CUDA libraries the first time)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  local prefix
  prefix=$("$venv/bin/python" -W ignore -c 'import torch; print(torch.utils.cmake_prefix_path)')
  echo "install_deps: CUDA LibTorch $("$venv/bin/python" -W ignore -c 'import torch; print(torch.__version__)') at $prefix"
  if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
    echo "install_deps: warning: no nvcc (CUDA toolkit): the build will use LibTorch's CUDA ops but not slimtorch's fused kernels" >&2
  fi
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} packages present"
  if [[ $cuda == 1 ]]; then install_cuda_libtorch; fi
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install_deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
if [[ $cuda == 1 ]]; then install_cuda_libtorch; fi
