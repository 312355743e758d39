#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for bench/train_gpu/gpu_device_run.sh on a GPU machine
# that has PyTorch (LibTorch 2.x + CUDA), CMake, ninja, libpng, libjpeg,
# libcurl and protobuf, but no network and none of Debian's gflags, glog or
# libarchive: those are downloaded here as .deb files (Debian 12), to be
# unpacked into a private prefix there (never into /). Also writes
# Fashion-MNIST as a CIFAR-10 binary archive for the CIFAR runs.
#   bench/train_gpu/gpu_device_prepare.sh     then carry .device to the GPU machine
# PREBUILT=<build dir>: also copies that build's tools, library and
# slimtorch_gpu_tests (`ninja slimtorch_gpu_tests` there first) into
# .device/bin, to run there as they are (a build
# against the same PyTorch wheel as the GPU machine's, e.g.
#   cmake -B build-cu -DCMAKE_PREFIX_PATH=<wheel>/torch/share/cmake \
#         -DSLIMTORCH_GLOO=OFF ...), with the Debian libraries they link
# that Ubuntu lacks (libjpeg62-turbo, snappy, protobuf 3.21, png).
# PHOTOS=<folder of class folders of JPEGs>: copied to .device/data/photos for
# the streaming JPEG phase (e.g. the files/ of bench/input/make_photo_set.sh with
# PHOTO_COUNT=192: 6.5 MB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dev=$root/.device
mkdir -p "$dev/debs" "$dev/data"
# libarchive13's other dependencies (acl, bz2, lz4, lzma, nettle, zstd) are
# part of Ubuntu 24.04's base; carrying Debian's older libnettle8 breaks
# linking against the system's gnutls.
(cd "$dev/debs" && apt-get download libgflags2.2 libgflags-dev \
  libgoogle-glog0v6 libgoogle-glog-dev libunwind8 libunwind-dev \
  libarchive13 libarchive-dev libb2-1 libxml2 libicu72)
if [[ -n "${PREBUILT:-}" ]]; then
  (cd "$dev/debs" && apt-get download libjpeg62-turbo libsnappy1v5 \
    libprotobuf32 libpng16-16)
  mkdir -p "$dev/bin"
  for f in train_image_classifier eval_image_classifier \
    download_and_convert_data libslimtorch.so tests/slimtorch_gpu_tests; do
    cp "$PREBUILT/$f" "$dev/bin/"
  done
  strip --strip-unneeded "$dev"/bin/* 2>/dev/null || true
fi
if [[ -n "${PHOTOS:-}" ]]; then
  rm -rf "$dev/data/photos"
  cp -r "$PHOTOS" "$dev/data/photos"
fi
python3 "$root/scripts/fashion_mnist_to_cifar.py" \
  --output "$dev/data/cifar-10-binary.tar.gz"
cp "$here/gpu_device_run.sh" "$dev/run.sh"
# The commit the results rows name (the device's copy may have no .git).
echo "$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" status --porcelain --untracked-files=no | grep -q . && echo +dirty)" \
  > "$dev/commit"
du -sh "$dev"
