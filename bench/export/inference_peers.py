#!/usr/bin/env python3
"""The Python engines of bench/export/export_inference.sh, on the files slimtorch
exported: onnxruntime on the ONNX model, TensorFlow on the frozen GraphDef
(tf.compat.v1.import_graph_def, a v1 Session as TF-Slim's serving code runs
it). Same threads as the C++ side, batch-1 latency and batch-N throughput
(medians over ROUNDS after one untimed run).

  inference_peers.py onnxruntime MODEL.onnx SIZE THREADS BATCH ROUNDS
  inference_peers.py tensorflow  MODEL.pb   SIZE THREADS BATCH ROUNDS
Prints "engine=<engine> latency_ms=<ms> images_per_s=<n>".
"""
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


def main(engine, path, size, threads, batch, rounds):
  size, threads, batch, rounds = int(size), int(threads), int(batch), int(rounds)
  make = {"onnxruntime": onnxruntime_runner,
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
