#!/usr/bin/env python3
"""Fake quantization and moving-average goldens computed by TensorFlow.

Runs tf.quantization.fake_quant_with_min_max_vars and its _per_channel form
(eager, float32) forward and backward (tf.GradientTape with an upstream
gradient dy) on inputs chosen around the nudged grid of each range: the grid
points themselves, the exact rounding ties between two of them, their float
neighbours, the nudged ends and values past them, zero, and random values.
The ranges cover 2, 4, 8 and 16 bits, narrow_range, a zero point exactly at
.5 before rounding, ranges entirely above or below zero, tiny ranges and
TensorFlow's special case min == max == 0. dy holds multiples of 1/16 so
that the sums giving d/dmin and d/dmax are exact in any summation order.

Also steps assign_moving_average (tensorflow/python/training/
moving_averages.py, what contrib.quantize calls; graph mode, float32
variables, zero_debias False and True) five times with decay 0.999 and 0.9,
recording the variable and, with zero_debias, its shadow variables
"biased" and "local_step".

Regenerate from the repository root (needs TensorFlow; CI never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_fake_quant_goldens.py
Writes tests/golden/fake_quant_goldens.inc.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
# The function contrib.quantize called (tf.compat.v1 no longer exports it).
from tensorflow.python.training import moving_averages  # noqa: E402

tf1 = tf.compat.v1

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "/opt/tfenv/bin/python scripts/golden/gen_fake_quant_goldens.py"

f32 = np.float32


def nudge(mn, mx, num_bits, narrow):
  """TensorFlow's Nudge (fake_quant_ops_functor.h) in numpy float32; only
  used here to place the inputs on and between the grid points."""
  qmin = f32(1 if narrow else 0)
  qmax = f32((1 << num_bits) - 1)
  mn, mx = f32(mn), f32(mx)
  scale = (mx - mn) / (qmax - qmin)
  inv_scale = (qmax - qmin) / (mx - mn)
  zp = qmin - mn / scale
  if zp < qmin:
    nzp = qmin
  elif zp > qmax:
    nzp = qmax
  else:
    nzp = f32(np.floor(zp) + (1 if zp - np.floor(zp) >= 0.5 else 0))
  return (qmin - nzp) * scale, (qmax - nzp) * scale, scale, inv_scale


def quantize_index(x, nmin, scale, inv_scale, per_channel):
  """The value floor() is taken of, as TensorFlow's kernel computes it (the
  per-tensor kernel divides by the scale, the per-channel one multiplies by
  the recomputed inverse)."""
  quant_zero = np.floor(-nmin * inv_scale + f32(0.5))
  shifted = f32(x) - nmin
  q = shifted * inv_scale if per_channel else shifted / scale
  return q - quant_zero + f32(0.5)


def candidates(mn, mx, num_bits, narrow, per_channel, rng, count):
  """`count` inputs around the grid of [mn, mx] (see the module comment)."""
  if mn == 0 and mx == 0:
    return f32(rng.uniform(-2, 2, count))
  nmin, nmax, scale, inv_scale = nudge(mn, mx, num_bits, narrow)
  steps = int(round(float((nmax - nmin) / scale)))
  ks = sorted(set([0, 1, 2, steps // 2, steps - 1, steps] +
                  list(rng.integers(0, steps + 1, 4))))
  values = [f32(0.0), nmin, nmax, np.nextafter(nmin, f32(-np.inf)),
            np.nextafter(nmax, f32(np.inf)), nmin - scale * f32(3.5),
            nmax + f32(2.25) * scale + f32(0.5)]
  for k in ks:
    grid = nmin + f32(k) * scale
    values.append(grid)
    if k < steps:
      # The float32 inputs nearest the tie between grid points k and k+1,
      # keeping those that land exactly on the tie and their neighbours.
      mid = nmin + (f32(k) + f32(0.5)) * scale
      for delta in range(-3, 4):
        v = mid
        for _ in range(abs(delta)):
          v = np.nextafter(v, f32(np.inf) if delta > 0 else f32(-np.inf))
        q = quantize_index(v, nmin, scale, inv_scale, per_channel)
        if q == np.floor(q):
          values += [np.nextafter(v, f32(-np.inf)), v,
                     np.nextafter(v, f32(np.inf))]
  lo = float(nmin - (nmax - nmin) * f32(0.25))
  hi = float(nmax + (nmax - nmin) * f32(0.25))
  # TensorFlow's CPU kernels run with denormals treated as zero, so a
  # denormal input just outside a nudged end at 0 counts as on it (dx = dy);
  # ours compares IEEE values. Such inputs are replaced by the smallest
  # normal float of their sign.
  tiny = np.finfo(f32).tiny
  values = [f32(np.copysign(tiny, v)) if 0 < abs(v) < tiny else f32(v)
            for v in values]
  while len(values) < count:
    values.append(f32(rng.uniform(lo, hi)))
  values = np.array(values[:count], dtype=f32)
  rng.shuffle(values)
  return values


def dyadic(rng, shape):
  return f32(rng.integers(-64, 65, shape) / 16.0)


# name, num_bits, narrow_range, min, max
PER_TENSOR = [
    ("b8_sym", 8, False, -6.0, 6.0),
    ("b8_relu6", 8, False, 0.0, 6.0),
    ("b8_narrow", 8, True, -6.0, 6.0),
    ("b8_asym", 8, False, -0.7, 2.3),
    ("b8_unit", 8, False, -1.0, 1.0),
    ("b8_tie_half", 8, False, -0.25, 127.25),  # zero point 0.5 -> 1
    ("b8_tie_2_5", 8, False, -1.25, 126.25),  # 2.5 -> 3 (half-even: 2)
    ("b8_narrow_tie", 8, True, -2.25, 124.75),  # 1 + 4.5 -> 6
    ("b8_min_above_zero", 8, False, 1.0, 3.0),
    ("b8_max_below_zero", 8, False, -3.0, -1.0),
    ("b8_tiny", 8, False, -1e-6, 3e-6),
    ("b8_tiny_tiny", 8, False, -1e-20, 2e-20),
    ("b8_zero_range", 8, False, 0.0, 0.0),
    ("b4", 4, False, -0.7, 2.3),
    ("b4_narrow", 4, True, -1.1, 0.9),
    ("b4_tie", 4, False, -0.625, 3.125),  # 2.5 -> 3
    ("b4_min_above_zero", 4, False, 0.5, 2.0),
    ("b2", 2, False, -1.0, 2.0),
    ("b2_narrow", 2, True, -1.0, 1.0),
    ("b2_tie", 2, False, -0.25, 1.25),  # 0.5 -> 1
    ("b16", 16, False, -3.0, 5.0),
    ("b16_narrow", 16, True, -0.3, 0.2),
    ("b16_max_below_zero", 16, False, -2.0, -0.5),
]

# Per-channel ranges (one of each kind), cut to the channel count.
CHANNEL_RANGES = [(-6.0, 6.0), (1.0, 3.0), (-0.25, 127.25), (-0.7, 2.3),
                  (0.0, 0.0), (-3.0, -1.0), (-1e-6, 3e-6), (-1.0, 1.0)]

# name, num_bits, narrow_range, shape (channels last)
PER_CHANNEL = [
    ("pc_d", 8, False, [8]),
    ("pc_bd", 8, False, [24, 8]),
    ("pc_bd_narrow", 8, True, [24, 5]),
    ("pc_bd_4bit", 4, False, [16, 6]),
    ("pc_bhwd", 8, False, [2, 3, 4, 8]),
    ("pc_bhwd_narrow", 8, True, [2, 3, 5, 4]),
    ("pc_bhwd_2bit", 2, False, [2, 2, 3, 6]),
    ("pc_bhwd_16bit", 16, True, [1, 4, 6, 5]),
]


def run_tf(op, x, dy, mn, mx, num_bits, narrow):
  """y and the gradients of `op` (a fake_quant_with_min_max_vars* op)."""
  x, mn, mx = tf.constant(x), tf.constant(f32(mn)), tf.constant(f32(mx))
  with tf.GradientTape() as tape:
    tape.watch([x, mn, mx])
    y = op(x, mn, mx, num_bits=num_bits, narrow_range=narrow)
  dx, dmin, dmax = tape.gradient(y, [x, mn, mx], output_gradients=tf.constant(dy))
  return [t.numpy().reshape(-1) for t in (y, dx, dmin, dmax)]


def check_model(x, y, mn, mx, num_bits, narrow, per_channel):
  """Our reading of the kernel (nudge, quantize_index) gives TF's bits."""
  if mn == 0 and mx == 0:
    assert not y.any()
    return
  nmin, nmax, scale, inv_scale = nudge(mn, mx, num_bits, narrow)
  clamped = np.maximum(np.minimum(f32(x), nmax), nmin)
  ours = np.floor(quantize_index(clamped, nmin, scale, inv_scale,
                                 per_channel)) * scale
  assert np.array_equal(ours.view(np.uint32), y.view(np.uint32)), (
      mn, mx, num_bits, narrow)


def per_tensor_cases(rng):
  cases = []
  for name, num_bits, narrow, mn, mx in PER_TENSOR:
    x = candidates(mn, mx, num_bits, narrow, False, rng, 48)
    dy = dyadic(rng, x.shape)
    y, dx, dmin, dmax = run_tf(tf.quantization.fake_quant_with_min_max_vars,
                               x, dy, mn, mx, num_bits, narrow)
    check_model(x, y, mn, mx, num_bits, narrow, False)
    cases.append(dict(name=name, num_bits=num_bits, narrow=narrow,
                      per_channel=False, shape=[48], min=[mn], max=[mx],
                      x=x, dy=dy, y=y, dx=dx, dmin=dmin, dmax=dmax))
  return cases


def per_channel_cases(rng):
  cases = []
  for name, num_bits, narrow, shape in PER_CHANNEL:
    depth = shape[-1]
    ranges = [CHANNEL_RANGES[(i + len(cases)) % len(CHANNEL_RANGES)]
              for i in range(depth)]
    mn = f32([r[0] for r in ranges])
    mx = f32([r[1] for r in ranges])
    rows = int(np.prod(shape[:-1]))
    x = np.stack([candidates(a, b, num_bits, narrow, True, rng, rows)
                  for a, b in ranges], axis=-1).reshape(shape)
    dy = dyadic(rng, shape)
    y, dx, dmin, dmax = run_tf(
        tf.quantization.fake_quant_with_min_max_vars_per_channel,
        x, dy, mn, mx, num_bits, narrow)
    for c, (a, b) in enumerate(ranges):
      check_model(x.reshape(rows, depth)[:, c], y.reshape(rows, depth)[:, c],
                  a, b, num_bits, narrow, True)
    cases.append(dict(name=name, num_bits=num_bits, narrow=narrow,
                      per_channel=True, shape=shape, min=mn, max=mx,
                      x=x, dy=dy, y=y, dx=dx, dmin=dmin, dmax=dmax))
  return cases


# name, decay, zero_debias, initial value, per-step values
MOVING_AVERAGES = [
    ("scalar_0999", 0.999, False, [6.0],
     [[2.5], [-1.25], [3.7], [0.1], [5.9]]),
    ("scalar_0999_debias", 0.999, True, [6.0],
     [[2.5], [-1.25], [3.7], [0.1], [5.9]]),
    ("vector_09", 0.9, False, [0.0, -6.0, 6.0],
     [[1.5, -2.0, 0.3], [1.7, -2.5, 0.0], [0.9, -1.1, 0.7],
      [2.3, -0.4, 0.2], [1.1, -3.3, 0.5]]),
    ("vector_09_debias", 0.9, True, [0.0, -6.0, 6.0],
     [[1.5, -2.0, 0.3], [1.7, -2.5, 0.0], [0.9, -1.1, 0.7],
      [2.3, -0.4, 0.2], [1.1, -3.3, 0.5]]),
]


def run_moving_average(decay, zero_debias, initial, values):
  """Five graph-mode steps; the variable (and shadow variables) after each."""
  graph = tf.Graph()
  with graph.as_default():
    var = tf1.get_variable("act_quant/max", initializer=f32(initial),
                           trainable=False, use_resource=False)
    value = tf1.placeholder(tf.float32, shape=[len(initial)])
    update = moving_averages.assign_moving_average(var, value, decay,
                                                   zero_debias=zero_debias)
    shadows = [v for v in tf1.global_variables() if v is not var]
    biased = [v for v in shadows if v.op.name.endswith("/biased")]
    local_step = [v for v in shadows if v.op.name.endswith("/local_step")]
    assert len(shadows) == (2 if zero_debias else 0), shadows
    with tf1.Session(graph=graph) as sess:
      sess.run(tf1.global_variables_initializer())
      steps = []
      for v in values:
        sess.run(update, {value: f32(v)})
        state = {"variable": sess.run(var)}
        if zero_debias:
          state["biased"] = sess.run(biased[0])
          state["local_step"] = sess.run(local_step[0])
        steps.append(state)
  return steps


def c_float(x):
  x = f32(x)
  assert np.isfinite(x), x
  s = "%.9g" % float(x)
  if "e" not in s and "." not in s:
    s += ".0"
  return s + "f"


def c_floats(values):
  return "{" + ", ".join(c_float(v) for v in np.asarray(values).reshape(-1)) + "}"


def fake_quant_lines(cases):
  lines = ["const std::vector<FakeQuantGolden>& FakeQuantGoldens() {",
           "  static const auto* const kCases = new std::vector<FakeQuantGolden>{"]
  for c in cases:
    lines.append('      {"%s", %d, %s, %s, {%s},' % (
        c["name"], c["num_bits"], "true" if c["narrow"] else "false",
        "true" if c["per_channel"] else "false",
        ", ".join(str(d) for d in c["shape"])))
    for key in ("min", "max", "x", "dy", "y", "dx", "dmin", "dmax"):
      lines.append("       /*%s=*/%s," % (key, c_floats(c[key])))
    lines[-1] = lines[-1][:-1] + "},"
  lines += ["  };", "  return *kCases;", "}", ""]
  return lines


def moving_average_lines():
  lines = ["const std::vector<MovingAverageGolden>& MovingAverageGoldens() {",
           "  static const auto* const kCases = new std::vector<MovingAverageGolden>{"]
  for name, decay, debias, initial, values in MOVING_AVERAGES:
    steps = run_moving_average(decay, debias, initial, values)
    lines.append('      {"%s", %s, %s, /*initial=*/%s,' % (
        name, repr(decay), "true" if debias else "false", c_floats(initial)))
    lines.append("       /*steps=*/{")
    for v, s in zip(values, steps):
      lines.append("         {/*value=*/%s, /*variable=*/%s, /*biased=*/%s, "
                   "/*local_step=*/%s}," % (
                       c_floats(v), c_floats(s["variable"]),
                       c_floats(s.get("biased", [])),
                       c_float(s.get("local_step", 0.0))))
    lines.append("       }},")
  lines += ["  };", "  return *kCases;", "}"]
  return lines


def main():
  rng = np.random.default_rng(32)
  cases = per_tensor_cases(rng) + per_channel_cases(rng)
  lines = [
      "// Fake quantization and moving averages computed by TensorFlow %s"
      % tf.__version__,
      "// (float32; fake_quant_with_min_max_vars[_per_channel] forward and",
      "// gradients, tf.compat.v1.train.assign_moving_average).",
      "// Generated by scripts/golden/gen_fake_quant_goldens.py; do not edit.",
      "// Regenerate from the repository root:",
      "//   " + COMMAND,
      "",
      "// Included by tests/nets/fake_quant_test.cc after the definitions of",
      "// FakeQuantGolden and MovingAverageGolden. Shapes are TensorFlow's",
      "// (channels last); x, dy, y, dx are flat in that layout; min, max,",
      "// dmin, dmax hold one value per tensor or one per channel.",
      "",
  ]
  lines += fake_quant_lines(cases)
  lines += moving_average_lines()
  path = os.path.join(REPO, "tests", "golden", "fake_quant_goldens.inc")
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  print("wrote", path, "(%d fake quant cases)" % len(cases))


if __name__ == "__main__":
  main()
