#!/usr/bin/env bash
# Exported nets side by side (issue 11's benchmark): for mobilenet_v1,
# inception_v3 and resnet_v1_50 (1001 classes, default sizes), batch-1
# latency and batch-32 throughput on THREADS threads of LibTorch eager
# (eval's forward pass), the exported ONNX in OpenCV's DNN module, the
# same ONNX in onnxruntime, and the frozen GraphDef of the same weights in
# TensorFlow ($PYTHON with onnxruntime and tensorflow). Appends rows to
# bench/results/export.csv (bench/lib/results.sh: each engine running the
# exported file against LibTorch eager, ratio > 1 = the engine is faster)
# and writes the raw lines to bench/results/logs/export_inference-<date>.txt.
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
. "$root/bench/lib/results.sh"
mkdir -p "$root/bench/results/logs"
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
# "net=N engine=E latency_ms=L images_per_s=I" lines: each engine against
# LibTorch eager (ratio > 1: the engine on our exported file is faster).
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
{ grep '^net=' "$out" || true; } | while read -r line; do
  net=$(field net "$line") engine=$(field engine "$line")
  [[ $engine == libtorch_eager ]] && continue
  eager=$(grep "^net=$net engine=libtorch_eager " "$out" | tail -1)
  [[ -n "$eager" ]] || continue
  case $engine in
    onnxruntime) what="our ONNX export in onnxruntime" ;;
    opencv_dnn) what="our ONNX export in OpenCV DNN" ;;
    tensorflow) what="our frozen GraphDef in TensorFlow" ;;
    *) what=$engine ;;
  esac
  how="$threads threads, medians of $rounds runs, 1001 classes"
  bench_record export "$net batch-1 latency, $what" "$(field latency_ms "$line")" \
    "$(field latency_ms "$eager")" ms "LibTorch eager (eval's forward)" "$how"
  bench_record export "$net batch-32 throughput, $what" "$(field images_per_s "$line")" \
    "$(field images_per_s "$eager")" images/s "LibTorch eager (eval's forward)" "$how"
done
