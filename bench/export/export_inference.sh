#!/usr/bin/env bash
# Exported nets side by side (issue 11's benchmark): for mobilenet_v1,
# inception_v3 and resnet_v1_50 (1001 classes, default sizes), batch-1
# latency and batch-32 throughput on THREADS threads of LibTorch eager
# (eval's forward pass), the exported ONNX in OpenCV's DNN module, the
# same ONNX in onnxruntime, and the frozen GraphDef of the same weights in
# TensorFlow ($PYTHON with onnxruntime and tensorflow). Results to
# bench/results/export_inference-<date>.txt.
#   bench/export/export_inference.sh [BUILD_DIR]   (env THREADS=2 ROUNDS=7 NETS=...)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
python=${PYTHON:-/opt/tfenv/bin/python}
threads=${THREADS:-2}
rounds=${ROUNDS:-7}
nets=${NETS:-mobilenet_v1 inception_v3 resnet_v1_50}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$root/bench/results/logs/export_inference-$(date +%F).txt"
{
  echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p') nproc=$(nproc) threads=$threads rounds=$rounds"
  for net in $nets; do
    OMP_WAIT_POLICY=PASSIVE "$build/bench/inference_bench" --model_name="$net" \
      --onnx="$work/$net.onnx" --write_onnx --graphdef="$work/$net.pb" \
      --num_threads="$threads" \
      --rounds="$rounds" 2>/dev/null | sed "s/^/net=$net /"
    size=$(case $net in inception_v3) echo 299;; *) echo 224;; esac)
    for engine in onnxruntime tensorflow; do
      file=$work/$net.$(case $engine in onnxruntime) echo onnx;; *) echo pb;; esac)
      "$python" "$here/inference_peers.py" "$engine" "$file" "$size" \
        "$threads" 32 "$rounds" | sed "s/^/net=$net /"
    done
  done
} | tee "$out"
