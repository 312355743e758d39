#!/usr/bin/env python3
"""Checks an ONNX model with onnx and runs it with onnxruntime.

What an ONNX user does with a model from slimtorch's ONNX writer: the ONNX
checker with full_check (which runs strict shape inference too), then an
onnxruntime session on the CPU. Run by tests/export/onnx_writer_test.cc:

  /opt/tfenv/bin/python scripts/golden/check_onnx.py MODEL.onnx INPUT.raw \
      SHAPE OUTPUT.txt [--optimized=OPS.txt]

INPUT.raw holds the model input "input" as float32 little-endian, row-major,
of shape SHAPE ("2x8x7x3", NHWC; a video net's clips "2x8x64x64x3", NDHWC).
OUTPUT.txt gets one line per model output, in the graph's order:
<name> <d0xd1x...> <values as %.9g ...>
--optimized=OPS.txt writes the op types of the graph onnxruntime runs
after its optimizations (its fusions of QuantizeLinear / DequantizeLinear
pairs into int8 kernels, say), one "<domain>:<op_type>" a line, and that
graph to OPS.txt.onnx.
Exits non-zero with the checker's or onnxruntime's message on failure.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort


def main(model_path, input_path, shape, output_path, *flags):
  ops_path = None
  for flag in flags:
    if not flag.startswith("--optimized="):
      sys.exit(__doc__)
    ops_path = flag[len("--optimized="):]
  model = onnx.load(model_path)
  onnx.checker.check_model(model, full_check=True)
  dims = [int(d) for d in shape.split("x")]
  x = np.fromfile(input_path, dtype="<f4").reshape(dims)
  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  options.inter_op_num_threads = 1
  optimized = None
  if ops_path:
    optimized = ops_path + ".onnx"
    options.optimized_model_filepath = optimized
    options.log_severity_level = 3  # not its warning that the file is
                                    # for this machine only
  session = ort.InferenceSession(model_path, options,
                                 providers=["CPUExecutionProvider"])
  names = [o.name for o in session.get_outputs()]
  outputs = session.run(None, {"input": x})
  with open(output_path, "w") as f:
    for name, y in zip(names, outputs):
      y = np.asarray(y, dtype=np.float32)
      f.write(" ".join([name, "x".join(map(str, y.shape)) or "-"] +
                       ["%.9g" % v for v in y.reshape(-1)]) + "\n")
  if optimized:
    with open(ops_path, "w") as f:
      for node in onnx.load(optimized).graph.node:
        f.write("%s:%s\n" % (node.domain, node.op_type))


if __name__ == "__main__":
  if len(sys.argv) not in (5, 6):
    sys.exit(__doc__)
  main(*sys.argv[1:])
