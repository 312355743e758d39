#!/usr/bin/env bash
# Installs every Debian 12 package slimtorch needs to build, test and run.
# Idempotent: installs only what is missing. Works as root or through sudo.
#
#   scripts/install_deps.sh            build + test + runtime packages
#   scripts/install_deps.sh --bench    also the Python peer of bench/
set -euo pipefail

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
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3 python3-torch python3-torchvision python3-numpy)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} packages present"
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
