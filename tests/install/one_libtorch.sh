#!/usr/bin/env bash
# Every LibTorch library (libtorch*, libc10*, …) that the built library and
# tools load resolves, through ldd, to one folder: the LibTorch the build was
# configured with. A build that mixed two LibTorches (Debian's libtorch-dev
# beside a PyTorch wheel's) fails here with the libraries and their folders.
#   bash one_libtorch.sh <build dir> <LibTorch's library folder>
set -euo pipefail
BIN="$1" EXPECT=$(readlink -f "$2")
files=("$BIN/libslimtorch.so")
for t in train_image_classifier eval_image_classifier export_inference_graph \
         download_and_convert_data inspect_checkpoint label_image tests/slimtorch_tests; do
  [[ -e "$BIN/$t" ]] && files+=("$BIN/$t")
done
bad=0 seen=0
for f in "${files[@]}"; do
  while read -r name _ path _; do
    case "$name" in libtorch*|libc10*|libcaffe2*|libshm*) ;; *) continue ;; esac
    seen=$((seen + 1))
    if [[ "$path" == "not" || ! -e "$path" ]]; then
      echo "FAIL $(basename "$f"): $name not found"; bad=1; continue
    fi
    dir=$(dirname "$(readlink -f "$path")")
    if [[ "$dir" != "$EXPECT" ]]; then
      echo "FAIL $(basename "$f"): $name from $dir, not from the configured LibTorch's $EXPECT"
      bad=1
    fi
  done < <(ldd "$f")
done
[[ $seen -gt 0 ]] || { echo "FAIL no LibTorch library in ldd's output of ${files[*]}"; exit 1; }
[[ $bad == 0 ]] || exit 1
echo "ok: $seen LibTorch libraries of ${#files[@]} files, all from $EXPECT"
