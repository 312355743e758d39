#!/usr/bin/env python3
"""The Python engines of bench/export/export_inference.sh, on the files slimtorch
exported: onnxruntime on the ONNX model, TensorFlow on the frozen GraphDef
(tf.compat.v1.import_graph_def, a v1 Session as TF-Slim's serving code runs
it). Same threads as the C++ side, batch-1 latency and batch-N throughput
(medians over ROUNDS after one untimed run).

  inference_peers.py onnxruntime MODEL.onnx SIZE THREADS BATCH ROUNDS
  inference_peers.py tensorflow  MODEL.pb   SIZE THREADS BATCH ROUNDS
Prints "engine=<engine> latency_ms=<ms> images_per_s=<n>" (engines
onnxruntime_clip and onnxruntime_int8: the same runner on the float export
with Relu6 as Clip and on the 8-bit export).

  inference_peers.py ops MODEL.onnx
prints the op types of onnxruntime's optimized graph of MODEL
(SessionOptions.optimized_model_filepath), then each convolution or matmul
left float with the op that feeds it, and

  inference_peers.py profile MODEL.onnx SIZE THREADS BATCH ROUNDS
the time per op type over ROUNDS runs of a BATCH (enable_profiling).
"""
import collections
import json
import os
import statistics
import sys
import time

import numpy as np


def timed(fn, rounds):
  fn()
  out = []
  for _ in range(rounds):
    t0 = time.perf_counter()
    fn()
    out.append(time.perf_counter() - t0)
  return statistics.median(out)


def onnxruntime_runner(path, threads):
  import onnxruntime as ort
  opts = ort.SessionOptions()
  opts.intra_op_num_threads = threads
  opts.inter_op_num_threads = 1
  sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
  out = sess.get_outputs()[-1].name
  return lambda x: sess.run([out], {"input": x})


def optimized_ops(path):
  import onnx
  import onnxruntime as ort
  import tempfile
  with tempfile.TemporaryDirectory() as tmp:
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
    ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    graph = onnx.load(opts.optimized_model_filepath).graph
  counts = collections.Counter(n.op_type for n in graph.node)
  print("optimized_ops " + " ".join(
      "%s=%d" % kv for kv in sorted(counts.items())))
  producer = {o: n for n in graph.node for o in n.output}
  for n in graph.node:
    if n.op_type in ("Conv", "FusedConv", "NchwcConv", "Gemm", "MatMul",
                     "FusedGemm", "FusedMatMul"):
      src = producer.get(n.input[0])
      print("float %s %s (input from %s)" % (
          n.op_type, n.name, src.op_type if src else "graph input"))


def profile(path, size, threads, batch, rounds):
  import onnxruntime as ort
  size, threads, batch, rounds = int(size), int(threads), int(batch), int(rounds)
  opts = ort.SessionOptions()
  opts.intra_op_num_threads = threads
  opts.inter_op_num_threads = 1
  opts.enable_profiling = True
  sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
  x = np.random.default_rng(0).uniform(-1, 1, (batch, size, size, 3))
  for _ in range(rounds + 1):
    sess.run(None, {"input": x.astype(np.float32)})
  trace = sess.end_profiling()
  per_op = collections.Counter()
  for e in json.load(open(trace)):
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
      per_op[e["args"]["op_name"]] += e["dur"]
  os.remove(trace)
  total = sum(per_op.values())
  for op, us in per_op.most_common():
    print("op=%s ms_per_run=%.2f share=%.3f" % (
        op, us / 1e3 / (rounds + 1), us / total))


def tensorflow_runner(path, threads):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf
  graph_def = tf.compat.v1.GraphDef()
  with open(path, "rb") as f:
    graph_def.ParseFromString(f.read())
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.import_graph_def(graph_def, name="")
  config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                    inter_op_parallelism_threads=1)
  sess = tf.compat.v1.Session(graph=graph, config=config)
  inp = graph.get_tensor_by_name("input:0")
  # The predictions are "<Scope>/Predictions/Reshape_1", as TF-Slim's are.
  (out,) = [op.outputs[0] for op in graph.get_operations()
            if op.name.endswith("/Predictions/Reshape_1")]
  return lambda x: sess.run(out, {inp: x})


def main(engine, path, size=None, threads=None, batch=None, rounds=None):
  if engine == "ops":
    return optimized_ops(path)
  if engine == "profile":
    return profile(path, size, threads, batch, rounds)
  size, threads, batch, rounds = int(size), int(threads), int(batch), int(rounds)
  make = {"onnxruntime": onnxruntime_runner,
          "onnxruntime_clip": onnxruntime_runner,
          "onnxruntime_int8": onnxruntime_runner,
          "tensorflow": tensorflow_runner}[engine]
  run = make(path, threads)
  rng = np.random.default_rng(0)
  one = rng.uniform(-1, 1, (1, size, size, 3)).astype(np.float32)
  many = rng.uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
  t1 = timed(lambda: run(one), rounds)
  tn = timed(lambda: run(many), rounds)
  print("engine=%s latency_ms=%.2f images_per_s=%.1f" %
        (engine, t1 * 1e3, batch / tn))


if __name__ == "__main__":
  main(*sys.argv[1:])
