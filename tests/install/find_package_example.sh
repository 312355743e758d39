#!/usr/bin/env bash
# `cmake --install` then find_package(slimtorch) from another project:
# examples/train_lenet (three lines of CMake) configures and builds against
# the installed package alone, links the installed library and the same
# LibTorch as the build, converts real Fashion-MNIST (Debian's
# dataset-fashion-mnist) and trains LeNet below chance-level loss.
#   bash find_package_example.sh <build dir> <source dir>
set -euo pipefail
BIN="$1" SRC="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BIN" --prefix "$TMP/prefix" >"$TMP/install.log" \
  || { cat "$TMP/install.log"; exit 1; }
test -f "$TMP/prefix/lib/cmake/slimtorch/slimtorchConfig.cmake"
test -f "$TMP/prefix/include/slimtorch/train/trainer.h"
# The installed library and tools load the build's LibTorch (each through
# its own RUNPATH), not whichever the system has.
torch_dir=$(dirname "$(readlink -f "$(ldd "$BIN/libslimtorch.so" | awk '$1 ~ /^libc10\.so/ {print $3; exit}')")")
for f in "$TMP/prefix/lib/libslimtorch.so" "$TMP/prefix/bin/"*; do
  while read -r name _ path _; do
    case "$name" in libtorch*|libc10*) ;; *) continue ;; esac
    dir=$(dirname "$(readlink -f "$path")")
    [[ "$dir" == "$torch_dir" ]] \
      || { echo "FAIL installed $(basename "$f") loads $name from '$dir', the build's LibTorch is in $torch_dir"; exit 1; }
  done < <(ldd "$f")
done
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# Only the installed prefix: the package finds its own LibTorch.
cmake "${gen[@]}" -S "$SRC/examples/train_lenet" -B "$TMP/build" \
  -DCMAKE_PREFIX_PATH="$TMP/prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$TMP/configure.log" 2>&1 || { cat "$TMP/configure.log"; exit 1; }
cmake --build "$TMP/build" >"$TMP/build.log" 2>&1 || { cat "$TMP/build.log"; exit 1; }
exe="$TMP/build/train_lenet"
lib=$(ldd "$exe" | awk '$1 == "libslimtorch.so" {print $3}')
[[ "$(readlink -f "$lib")" == "$(readlink -f "$TMP/prefix/lib/libslimtorch.so")" ]] \
  || { echo "FAIL train_lenet loads libslimtorch.so from '$lib', not the installed one"; exit 1; }
got=$(dirname "$(readlink -f "$(ldd "$exe" | awk '$1 ~ /^libc10\.so/ {print $3; exit}')")")
[[ "$got" == "$torch_dir" ]] || { echo "FAIL train_lenet loads libc10 from $got, the build from $torch_dir"; exit 1; }
"$exe" file:///usr/share/datasets/fashion-mnist/ "$TMP/work" 200 >"$TMP/run.out" 2>"$TMP/run.log" \
  || { cat "$TMP/run.log" "$TMP/run.out"; exit 1; }
cat "$TMP/run.out"
grep -q "^global step: 200$" "$TMP/run.out"
test -f "$TMP/work/train/model.ckpt-200.safetensors"
loss=$(sed -n 's/^last loss: //p' "$TMP/run.out")
# Ten classes: a net that learned nothing stays near ln(10) = 2.30.
python3 -c "import sys; sys.exit(0 if float('$loss') < 1.5 else 1)" \
  || { echo "FAIL loss $loss after 200 steps (chance is 2.30)"; exit 1; }
echo "ok"
