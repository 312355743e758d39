#!/usr/bin/env bash
# Exported nets side by side (issue 11's benchmark, issue 32's int8 rows):
# for mobilenet_v1, inception_v3 and resnet_v1_50 (1001 classes, default
# sizes; NETS picks others, e.g. mobilenet_v2), batch-1 latency and batch-32
# throughput on THREADS threads of LibTorch eager (eval's forward pass), the
# exported ONNX in OpenCV's DNN module, the same ONNX in onnxruntime, the
# same weights in onnxruntime with Relu6 as Clip (the int8 file's form) and
# exported 8-bit (QDQ ONNX, ranges calibrated on random images:
# inference_bench --onnx_int8), and the frozen GraphDef of the same weights
# in TensorFlow ($PYTHON with onnxruntime and tensorflow; PEERS="onnxruntime
# onnxruntime_clip onnxruntime_int8 tensorflow" picks among the Python
# ones). Appends rows to bench/results/export.csv (bench/lib/results.sh:
# each engine running the exported file against LibTorch eager, and the
# int8 model also against the float one (Relu6 as Clip) in onnxruntime;
# ratio > 1 = the engine, or int8, is faster) and writes the raw lines, with
# the op types of onnxruntime's optimized int8 graph, to
# bench/results/logs/export_inference-<date>.txt.
#   bench/export/export_inference.sh [BUILD_DIR]   (env THREADS=2 ROUNDS=7 NETS=... PEERS=...)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
python=${PYTHON:-/opt/tfenv/bin/python}
threads=${THREADS:-2}
rounds=${ROUNDS:-7}
nets=${NETS:-mobilenet_v1 inception_v3 resnet_v1_50}
peers=${PEERS:-onnxruntime onnxruntime_clip onnxruntime_int8 tensorflow}
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
      --onnx_clip="$work/${net}_clip.onnx" --onnx_int8="$work/${net}_int8.onnx" \
      --num_threads="$threads" \
      --rounds="$rounds" 2>/dev/null | sed "s/^/net=$net /"
    size=$(case $net in inception_v3) echo 299;; *) echo 224;; esac)
    for engine in $peers; do
      file=$work/$(case $engine in onnxruntime) echo $net.onnx;;
        onnxruntime_clip) echo ${net}_clip.onnx;;
        onnxruntime_int8) echo ${net}_int8.onnx;; *) echo $net.pb;; esac)
      "$python" "$here/inference_peers.py" "$engine" "$file" "$size" \
        "$threads" 32 "$rounds" | sed "s/^/net=$net /"
    done
    # Which ops onnxruntime's graph optimizer left float in the int8 model.
    if [[ " $peers " == *" onnxruntime_int8 "* ]]; then
      "$python" "$here/inference_peers.py" ops "$work/${net}_int8.onnx" |
        sed "s/^/# net=$net int8 /"
    fi
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
    onnxruntime_clip) what="our ONNX export with Relu6 as Clip in onnxruntime" ;;
    onnxruntime_int8) what="our int8 ONNX export in onnxruntime" ;;
    opencv_dnn) what="our ONNX export in OpenCV DNN" ;;
    tensorflow) what="our frozen GraphDef in TensorFlow" ;;
    *) what=$engine ;;
  esac
  how="$threads threads, medians of $rounds runs, 1001 classes"
  bench_record export "$net batch-1 latency, $what" "$(field latency_ms "$line")" \
    "$(field latency_ms "$eager")" ms "LibTorch eager (eval's forward)" "$how"
  bench_record export "$net batch-32 throughput, $what" "$(field images_per_s "$line")" \
    "$(field images_per_s "$eager")" images/s "LibTorch eager (eval's forward)" "$how"
  # int8 against float32, both our exports in onnxruntime; the float one
  # with Relu6 as Clip when it ran, as the int8 one has it (onnxruntime
  # fuses Clip into the convolution; the default 6 - Relu(6 - Relu(x))
  # costs it separate passes).
  float=$({ grep "^net=$net engine=onnxruntime_clip " "$out" || true; } | tail -1)
  peer="our float32 ONNX export with Relu6 as Clip in onnxruntime"
  if [[ -z "$float" ]]; then
    float=$({ grep "^net=$net engine=onnxruntime " "$out" || true; } | tail -1)
    peer="our float32 ONNX export in onnxruntime"
  fi
  [[ $engine == onnxruntime_int8 && -n "$float" ]] || continue
  bench_record export "$net batch-1 latency, $what" "$(field latency_ms "$line")" \
    "$(field latency_ms "$float")" ms "$peer" "$how"
  bench_record export "$net batch-32 throughput, $what" "$(field images_per_s "$line")" \
    "$(field images_per_s "$float")" images/s "$peer" "$how"
done
