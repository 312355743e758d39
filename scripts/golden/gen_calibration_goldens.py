#!/usr/bin/env python3
"""Activation-range calibration goldens computed by onnxruntime itself.

onnxruntime's static quantization calibrates activation ranges with the
classes of onnxruntime/quantization/calibrate.py. This drives its
HistogramCollector (what PercentileCalibrater and EntropyCalibrater use) the
way quantize_static does with extra_options={"CalibStridedMinMax": 1}: one
collect() per batch, then compute_collection_result(). MinMaxCalibrater's
range without moving average is np.nanmin / np.nanmax over the batches'
ReduceMin / ReduceMax outputs, computed here with numpy.

It also runs the same batches through onnxruntime's public path
(create_calibrator on a one-node model, collect_data once per batch) and
checks that it gives the same ranges as the collector for the default
settings, and records a few ranges of one collect() over all batches at once
(quantize_static's default without a stride; "_all" labels).

The batches are float32 values from a 32-bit linear congruential generator
and float32 arithmetic only (+, -, *, /, max), so
tests/nets/range_calibration_test.cc rebuilds them bit for bit instead of
storing them.

Regenerate from the repository root (needs onnxruntime; CI never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_calibration_goldens.py
Writes tests/golden/calibration_goldens.inc.
"""

import contextlib
import io
import os

import tempfile

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper
from onnxruntime.quantization.calibrate import (CalibrationDataReader,
                                                CalibrationMethod,
                                                HistogramCollector,
                                                create_calibrator)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "/opt/tfenv/bin/python scripts/golden/gen_calibration_goldens.py"
F = np.float32


class Lcg:
  """state = 1664525 * state + 1013904223 (mod 2^32); u = (state >> 8) / 2^24."""

  def __init__(self, seed):
    self.state = seed

  def uniform(self, n):
    out = np.empty(n, np.float32)
    for i in range(n):
      self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
      out[i] = F((self.state >> 8) / 16777216.0)
    return out


# Keep in sync with MakeBatches() in tests/nets/range_calibration_test.cc.
def make_batches(name):
  if name == "relu_growing":
    g = Lcg(1)
    return [np.maximum(g.uniform(1000) - F(0.3), F(0)) * F(s)
            for s in (1.0, 2.5, 4.0)]
  if name == "signed_growing":
    g = Lcg(2)
    return [(g.uniform(1500) * F(2) - F(1)) * F(s) for s in (1.0, 3.0, 0.5)]
  if name == "heavy_tail":
    g = Lcg(3)
    out = []
    for _ in range(2):
      a = g.uniform(4000) * F(2) - F(1)
      b = F(1.0001) - g.uniform(4000)
      out.append(a / b)
    return out
  if name == "constant":
    return [np.full(64, F(0.75)), np.full(64, F(0.75))]
  if name == "zeros_then_signed":
    g = Lcg(5)
    return [np.zeros(200, np.float32), (g.uniform(500) * F(2) - F(1)) * F(2)]
  if name == "positive_offset":
    g = Lcg(6)
    return [F(1) + g.uniform(800) * F(2), F(0.5) + g.uniform(800) * F(4.5)]
  raise ValueError(name)


CASES = ["relu_growing", "signed_growing", "heavy_tail", "constant",
         "zeros_then_signed", "positive_offset"]

# (label, method, symmetric, num_bins, num_quantized_bins, percentile):
# onnxruntime's create_calibrator defaults first.
METHODS = [
    ("percentile", "percentile", True, 2048, 128, 99.999),
    ("percentile_99", "percentile", True, 2048, 128, 99.0),
    ("percentile_100", "percentile", True, 2048, 128, 100.0),
    ("percentile_signed_99_9", "percentile", False, 2048, 128, 99.9),
    ("entropy", "entropy", False, 128, 128, 99.999),
    ("entropy_2048", "entropy", False, 2048, 128, 99.999),
]


# Ranges of one collect() over all batches together ("_all" labels).
METHODS_ALL = ["percentile", "entropy", "entropy_2048"]
CASES_ALL = ["relu_growing", "heavy_tail", "positive_offset"]


def run_collector(batches, method, symmetric, num_bins, quantized, percentile,
                  one_collect=False):
  collector = HistogramCollector(method, symmetric, num_bins, quantized,
                                 percentile, "same")
  with contextlib.redirect_stdout(io.StringIO()):
    if one_collect:
      collector.collect({"t": list(batches)})
    for batch in [] if one_collect else batches:
      collector.collect({"t": [batch]})
    result = collector.compute_collection_result()["t"]
  hist, edges = collector.get_histogram_dict()["t"][:2]
  return F(result[0]), F(result[1]), hist, edges


class _Reader(CalibrationDataReader):

  def __init__(self, batches):
    self.batches = list(batches)

  def get_next(self):
    return {"x": self.batches.pop(0)} if self.batches else None


def calibrator_range(directory, batches, method, extra_options):
  """create_calibrator on h = x + 0, collect_data once per batch."""
  n = batches[0].size
  graph = helper.make_graph(
      [helper.make_node("Add", ["x", "zero"], ["h"]),
       helper.make_node("Neg", ["h"], ["y"])], "calibrate",
      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
      [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
  path = os.path.join(directory, "model.onnx")
  onnx.save(helper.make_model(graph, opset_imports=[
      helper.make_opsetid("", 13)]), path)
  with contextlib.redirect_stdout(io.StringIO()):
    calibrator = create_calibrator(
        path, None, os.path.join(directory, "augmented.onnx"), method,
        extra_options=extra_options)
    for batch in batches:
      calibrator.collect_data(_Reader([batch]))
    lo, hi = calibrator.compute_data()["h"].range_value
  return F(np.ravel(lo)[0]), F(np.ravel(hi)[0])


def check_against_calibrator(case, batches, goldens):
  """The collector goldens equal onnxruntime's public calibrator path."""
  if any(b.size != batches[0].size for b in batches):
    return
  with tempfile.TemporaryDirectory() as directory:
    for label, method, extra in [
        ("minmax", CalibrationMethod.MinMax, {}),
        ("percentile", CalibrationMethod.Percentile, {}),
        ("entropy", CalibrationMethod.Entropy, {}),
        ("entropy_2048", CalibrationMethod.Entropy, {"num_bins": 2048})]:
      got = calibrator_range(directory, batches, method, extra)
      assert got == goldens[label], (case, label, got, goldens[label])


def flt(x):
  x = F(x)
  return "%s /* %s */" % (float(x).hex(), repr(float(x)))


def main():
  out = [
      "// Activation ranges calibrated by onnxruntime %s's "
      "onnxruntime/quantization/calibrate.py" % onnxruntime.__version__,
      "// (HistogramCollector, one collect() per batch; minmax with numpy), "
      "numpy %s." % np.__version__,
      "// Generated by scripts/golden/gen_calibration_goldens.py; do not edit.",
      "// Regenerate from the repository root:\n//   " + COMMAND,
      "",
      "// Included by tests/nets/range_calibration_test.cc after the "
      "definition of CalibrationGolden:",
      "// {case, label, method, symmetric, num_bins, num_quantized_bins, "
      "percentile, lo, hi,",
      "//  histogram bins, histogram total count, histogram first edge, "
      "last edge}",
      "const CalibrationGolden kCalibrationGoldens[] = {",
  ]
  for case in CASES:
    batches = make_batches(case)
    lo = min(np.nanmin(b) for b in batches)
    hi = max(np.nanmax(b) for b in batches)
    goldens = {"minmax": (F(lo), F(hi))}
    out.append('    {"%s", "minmax", "minmax", false, 0, 0, 0.0, %s, %s, '
               '0, 0, 0.0f, 0.0f},' % (case, flt(lo), flt(hi)))
    for label, method, symmetric, bins, quantized, pct in METHODS:
      lo, hi, hist, edges = run_collector(batches, method, symmetric, bins,
                                          quantized, pct)
      goldens[label] = (lo, hi)
      out.append('    {"%s", "%s", "%s", %s, %d, %d, %r, %s, %s, %d, %d, '
                 '%s, %s},' % (case, label, method,
                               "true" if symmetric else "false", bins,
                               quantized, pct, flt(lo), flt(hi), hist.size,
                               int(hist.sum()), flt(edges[0]), flt(edges[-1])))
    check_against_calibrator(case, batches, goldens)
    for label, method, symmetric, bins, quantized, pct in METHODS:
      if case not in CASES_ALL or label not in METHODS_ALL:
        continue
      lo, hi, hist, edges = run_collector(batches, method, symmetric, bins,
                                          quantized, pct, one_collect=True)
      out.append('    {"%s", "%s_all", "%s", %s, %d, %d, %r, %s, %s, %d, %d, '
                 '%s, %s},' % (case, label, method,
                               "true" if symmetric else "false", bins,
                               quantized, pct, flt(lo), flt(hi), hist.size,
                               int(hist.sum()), flt(edges[0]), flt(edges[-1])))
  out.append("};")
  path = os.path.join(REPO, "tests", "golden", "calibration_goldens.inc")
  with open(path, "w") as f:
    f.write("\n".join(out) + "\n")
  print("wrote", path)


if __name__ == "__main__":
  main()
