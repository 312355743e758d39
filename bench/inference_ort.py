#!/usr/bin/env python3
"""onnxruntime's side of bench/export_inference.sh: the same ONNX file, the
same threads, batch-1 latency and batch-N throughput (medians).

  inference_ort.py MODEL.onnx SIZE THREADS BATCH ROUNDS
Prints "engine=onnxruntime latency_ms=<ms> images_per_s=<n>".
"""
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def timed(fn, rounds):
  fn()
  out = []
  for _ in range(rounds):
    t0 = time.perf_counter()
    fn()
    out.append(time.perf_counter() - t0)
  return statistics.median(out)


def main(path, size, threads, batch, rounds):
  size, threads, batch, rounds = int(size), int(threads), int(batch), int(rounds)
  opts = ort.SessionOptions()
  opts.intra_op_num_threads = threads
  opts.inter_op_num_threads = 1
  sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
  out = sess.get_outputs()[-1].name
  rng = np.random.default_rng(0)
  one = rng.uniform(-1, 1, (1, size, size, 3)).astype(np.float32)
  many = rng.uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
  t1 = timed(lambda: sess.run([out], {"input": one}), rounds)
  tn = timed(lambda: sess.run([out], {"input": many}), rounds)
  print("engine=onnxruntime latency_ms=%.2f images_per_s=%.1f" %
        (t1 * 1e3, batch / tn))


if __name__ == "__main__":
  main(*sys.argv[1:])
