#!/usr/bin/env bash
# label_image through onnxruntime, loaded at run time from the library of
# the onnxruntime wheel of $SLIMTORCH_PYTHON (default /opt/tfenv's), given in
# SLIMTORCH_ONNXRUNTIME_LIBRARY: the unit tests of the engine with the
# library (none may skip); LeNet trained 100 steps on Fashion-MNIST and
# exported as float ONNX gives the same probabilities through OpenCV's DNN
# module and onnxruntime (within 1e-5), and the same as onnxruntime's Python
# session; the model made int8 QDQ by onnxruntime.quantization.quantize_static
# (calibrated on 32 training images), and export_inference_graph --quantize's
# own int8 QDQ export (calibrated on 2 batches), run through onnxruntime by
# themselves (--runtime=auto), with the Python session's probabilities
# (within 1e-5). Bad input:
# a missing library, a file that is not one, a model onnxruntime refuses,
# a bad --runtime, no library found: one clear error each, naming the file.
# Label "tensorflow" (needs the wheel); skipped (77) without it.
#   bash label_image_onnxruntime.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
[[ -x "$BIN/label_image" ]] || { echo "SKIP: no label_image"; exit 77; }
python=${SLIMTORCH_PYTHON:-/opt/tfenv/bin/python}
lib=$("$python" -c 'import glob, os, onnxruntime
print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__),
      "capi", "libonnxruntime.so.1*")))[-1])' 2>/dev/null) \
  || { echo "SKIP: $python has no onnxruntime wheel with its library"; exit 77; }
export SLIMTORCH_ONNXRUNTIME_LIBRARY=$lib
echo "onnxruntime library: $lib"

# 1. The unit tests with the library: none skips.
"$BIN/tests/slimtorch_tests" --gtest_filter='OnnxRuntimeModelTest.*:*/OnnxRuntimeFloatTest.*' >"$TMP/unit.out" 2>&1 \
  || { cat "$TMP/unit.out"; exit 1; }
if grep -q '^\[  SKIPPED \]' "$TMP/unit.out"; then
  echo "FAIL unit tests skipped with $lib"; cat "$TMP/unit.out"; exit 1
fi
grep '^\[ *\(PASSED\|onnxruntime\) ' "$TMP/unit.out"

# 2. A float LeNet, exported.
convert_fashion_mnist "$TMP/data"
"$BIN/train_image_classifier" --train_dir="$TMP/train" --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --model_name=lenet --max_number_of_steps=100 \
  --batch_size=50 --learning_rate=0.01 --seed=7 --num_intra_op_threads=2 \
  2>"$TMP/train.log" || { tail -20 "$TMP/train.log"; exit 1; }
"$BIN/export_inference_graph" --model_name=lenet --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --checkpoint_path="$TMP/train" \
  --output_file="$TMP/float.onnx" 2>"$TMP/export.log" || { cat "$TMP/export.log"; exit 1; }
# ... and as export_inference_graph's own int8 QDQ model, calibrated on 2
# training batches.
"$BIN/export_inference_graph" --model_name=lenet --dataset_name=fashion_mnist \
  --dataset_dir="$TMP/data" --checkpoint_path="$TMP/train" --quantize \
  --calibration_dataset_dir="$TMP/data" --calibration_batches=2 \
  --output_file="$TMP/int8.onnx" 2>"$TMP/export_int8.log" \
  || { cat "$TMP/export_int8.log"; exit 1; }

# 28x28 gray PNGs of 4 test images (label_image's input is then pixel / 255,
# no resize), their inputs as .npy, and the QDQ model from the float one.
"$python" - "$TMP" <<'PY' 2>"$TMP/py.log" || { cat "$TMP/py.log"; exit 1; }
import gzip, struct, sys, zlib
import numpy as np
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                      QuantType, quantize_static)
tmp = sys.argv[1]
def images(name, n):
  with gzip.open("/usr/share/datasets/fashion-mnist/" + name) as f:
    f.read(16)
    return np.frombuffer(f.read(n * 784), np.uint8).reshape(n, 28, 28)
def png(path, img):
  def chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c))
  rows = b"".join(b"\0" + r.tobytes() for r in img)
  open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR",
      struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0)) +
      chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
test = images("t10k-images-idx3-ubyte.gz", 4)
for i, img in enumerate(test):
  png("%s/img%d.png" % (tmp, i), img)
  np.save("%s/img%d.npy" % (tmp, i),
          img.astype(np.float32)[None, :, :, None] / np.float32(255))
train = images("train-images-idx3-ubyte.gz", 32).astype(np.float32) / np.float32(255)
class Reader(CalibrationDataReader):
  def __init__(self):
    self.batches = iter([{"input": x[None, :, :, None]} for x in train])
  def get_next(self):
    return next(self.batches, None)
quantize_static(tmp + "/float.onnx", tmp + "/qdq.onnx", Reader(),
                quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8)
PY

images="$TMP/img0.png,$TMP/img1.png,$TMP/img2.png,$TMP/img3.png"
run() {  # run <name> <model> <label_image flags...>: stdout to $TMP/<name>.out
  local name=$1 model=$2
  shift 2
  "$BIN/label_image" --graph="$model" --image="$images" --top_k=10 "$@" \
    >"$TMP/$name.out" 2>"$TMP/$name.log" || { cat "$TMP/$name.log"; exit 1; }
}
run float_cv "$TMP/float.onnx" --runtime=opencv
run float_ort "$TMP/float.onnx" --runtime=onnxruntime
run float_auto "$TMP/float.onnx"
run qdq "$TMP/qdq.onnx"
run int8 "$TMP/int8.onnx"
grep -q "through OpenCV [0-9.]*'s DNN module" "$TMP/float_cv.log"
grep -q "through OpenCV" "$TMP/float_auto.log"
grep -q "through onnxruntime [0-9.]* ($lib, C API [0-9]*): --runtime=onnxruntime" \
  "$TMP/float_ort.log"
grep -q "through onnxruntime [0-9.]* ($lib, C API [0-9]*): an int8 QDQ model" \
  "$TMP/qdq.log" || { cat "$TMP/qdq.log"; exit 1; }
grep -q "through onnxruntime [0-9.]* ($lib, C API [0-9]*): an int8 QDQ model" \
  "$TMP/int8.log" || { cat "$TMP/int8.log"; exit 1; }
grep "through onnxruntime" "$TMP/qdq.log" | sed 's/^.*\] /label_image: /'

# Every output: the same format (path, then 10 "name (index): score" lines),
# probabilities within 1e-5 of each other and of onnxruntime's Python
# session on the same input.
"$python" - "$TMP" <<'PY'
import re, sys
import numpy as np
import onnxruntime as ort
tmp = sys.argv[1]
def read(name):
  lines = open("%s/%s.out" % (tmp, name)).read().splitlines()
  assert len(lines) == 4 * 11, (name, len(lines))
  probs = np.zeros((4, 10))
  for i in range(4):
    assert lines[11 * i] == "%s/img%d.png" % (tmp, i), lines[11 * i]
    for l in lines[11 * i + 1:11 * i + 11]:
      m = re.fullmatch(r"(\d+) \((\d+)\): (\d+\.\d{6})", l)
      assert m and m.group(1) == m.group(2), l
      probs[i, int(m.group(2))] = float(m.group(3))
  return probs
def session(model):
  s = ort.InferenceSession("%s/%s.onnx" % (tmp, model),
                           providers=["CPUExecutionProvider"])
  out = s.get_outputs()[-1].name
  return np.concatenate([s.run([out], {"input": np.load("%s/img%d.npy" % (tmp, i))})[0]
                         for i in range(4)])
cv, fort, auto, qdq, int8 = (read(n) for n in
                             ("float_cv", "float_ort", "float_auto", "qdq", "int8"))
want_float, want_qdq, want_int8 = session("float"), session("qdq"), session("int8")
def close(a, b, what):
  d = np.abs(a - b).max()
  assert d <= 1e-5, (what, d)
  return d
print("float: OpenCV vs onnxruntime max |dp| %.2g, vs Python onnxruntime %.2g"
      % (close(cv, fort, "opencv vs onnxruntime"), close(fort, want_float, "python")))
close(auto, cv, "auto vs opencv")
print("int8 QDQ: label_image vs Python onnxruntime max |dp| %.2g; "
      "vs float max |dp| %.3f, top-1 agrees on %d of 4"
      % (close(qdq, want_qdq, "qdq vs python"), np.abs(qdq - fort).max(),
         (qdq.argmax(1) == fort.argmax(1)).sum()))
assert np.abs(qdq - fort).max() > 0, "the QDQ model computes exactly the float one"
import onnx
ops = {n.op_type for n in onnx.load(tmp + "/int8.onnx").graph.node}
assert {"QuantizeLinear", "DequantizeLinear"} <= ops, ops
print("export_inference_graph --quantize: label_image vs Python onnxruntime max |dp| "
      "%.2g; vs float max |dp| %.3f, top-1 agrees on %d of 4"
      % (close(int8, want_int8, "int8 vs python"), np.abs(int8 - fort).max(),
         (int8.argmax(1) == fort.argmax(1)).sum()))
PY

# 3. Bad input.
expect_failure missing_library "$TMP/gone/libonnxruntime.so.1" "$BIN/label_image" \
  --graph="$TMP/qdq.onnx" --image="$TMP/img0.png" \
  --onnxruntime_library="$TMP/gone/libonnxruntime.so.1"
echo "not a library" >"$TMP/libfake.so"
expect_failure not_a_library "$TMP/libfake.so" "$BIN/label_image" \
  --graph="$TMP/qdq.onnx" --image="$TMP/img0.png" --onnxruntime_library="$TMP/libfake.so"
expect_failure not_onnxruntime "is not onnxruntime's library" "$BIN/label_image" \
  --graph="$TMP/qdq.onnx" --image="$TMP/img0.png" \
  --onnxruntime_library="$BIN/libslimtorch.so"
"$python" - "$TMP/qdq.onnx" "$TMP/bad.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
m.graph.node[-1].op_type = "NoSuchOperator"
onnx.save(m, sys.argv[2])
PY
expect_failure onnxruntime_refuses "cannot read $TMP/bad.onnx" "$BIN/label_image" \
  --graph="$TMP/bad.onnx" --image="$TMP/img0.png"
expect_failure bad_runtime "--runtime=tflite is not one of" "$BIN/label_image" \
  --graph="$TMP/qdq.onnx" --image="$TMP/img0.png" --runtime=tflite
# OpenCV 4.6 refuses the QDQ model (when asked for it), naming the file.
expect_failure opencv_qdq "$TMP/qdq.onnx" "$BIN/label_image" \
  --graph="$TMP/qdq.onnx" --image="$TMP/img0.png" --runtime=opencv
# No library on the loader's path: the default names, and how to point at one.
if ! ldconfig -p | grep -q 'libonnxruntime\.so'; then
  expect_failure no_library "libonnxruntime.so.1" env -u SLIMTORCH_ONNXRUNTIME_LIBRARY \
    "$BIN/label_image" --graph="$TMP/qdq.onnx" --image="$TMP/img0.png"
  grep -qF -- "--onnxruntime_library" "$TMP/no_library.err"
fi
echo "PASS label_image_onnxruntime"
