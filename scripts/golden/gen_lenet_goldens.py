#!/usr/bin/env python3
"""LeNet goldens computed by TensorFlow + tf_slim.

Builds TF-Slim's nets/lenet.py (scope 'LeNet', 10 classes, is_training=False)
under lenet_arg_scope(weight_decay=0.01) with tf_slim layers in
tf.compat.v1 graph mode, float32, NHWC. Every variable and the input batch
are then overwritten from a deterministic formula over the flat index of the
tensor in TensorFlow's layout (conv weights [kh, kw, in, out], fc weights
[in, out], images [N, H, W, C]):

  x = uint32(i + stream * 0x9E3779B9)            (mod 2^32)
  x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15;   (mod 2^32, "lowbias32")
  x *= 0x846CA68B; x ^= x >> 16
  value = scale * ((x >> 8) * 2^-23 - 1)         in [-scale, scale)

with a distinct `stream` per tensor and a power-of-two `scale`, so every
value is exactly a float32 (24 significant bits at most) and C++ reproduces
it bit for bit without libm. The streams and scales are written into the
.inc, which is the single source of truth for the test.

Records, for a batch of 2 images with labels FILL_LABELS:
  * the logits [2, 10];
  * a few values of the end points conv1, pool1, conv2, pool2 (indexed
    [n, h, w, c], TF's NHWC; the NCHW tensor is read at [n, c, h, w]),
    Flatten [n, j] and fc3 [n, j] (2-D, same index on both sides), plus the
    float64 sum and sum of |.| of each whole end point;
  * tf.compat.v1.losses.softmax_cross_entropy with one-hot labels, with
    label_smoothing 0 and 0.1 (mean over the batch);
  * the sum of the REGULARIZATION_LOSSES collection (l2, weight_decay 0.01);
  * gradients of the unsmoothed loss w.r.t. every variable: a few entries in
    TF's layout and the float64 sum and sum of |.| of each whole gradient.

Regenerate from the repository root (needs tensorflow-cpu and tf-slim; CI
never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_lenet_goldens.py
Writes tests/golden/lenet_goldens.inc.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Plain Eigen kernels, so that regenerating gives the same bits on any CPU.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_slim as slim  # noqa: E402

tf1 = tf.compat.v1

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "/opt/tfenv/bin/python scripts/golden/gen_lenet_goldens.py"
OUTPUT = os.path.join(REPO, "tests", "golden", "lenet_goldens.inc")

NUM_CLASSES = 10
WEIGHT_DECAY = 0.01
LABEL_SMOOTHING = 0.1
LABELS = [3, 7]
IMAGE_SHAPE = (2, 28, 28, 1)

# (tensor, stream, scale). Scales keep every pre-activation at roughly unit
# size (weights ~ U(-s, s), std s/sqrt(3); fan-ins 25, 800, 3136, 1024) so
# that about half of each ReLU layer is live and the logits are O(1).
FILLS = [
    ("images", 1, 1.0),
    ("LeNet/conv1/weights", 2, 0.25),
    ("LeNet/conv1/biases", 3, 0.0625),
    ("LeNet/conv2/weights", 4, 0.0625),
    ("LeNet/conv2/biases", 5, 0.03125),
    ("LeNet/fc3/weights", 6, 0.03125),
    ("LeNet/fc3/biases", 7, 0.03125),
    ("LeNet/fc4/weights", 8, 0.125),
    ("LeNet/fc4/biases", 9, 0.125),
]

END_POINTS = ["conv1", "pool1", "conv2", "pool2", "Flatten", "fc3"]
POINTS_PER_END_POINT = 6
# Gradient entries recorded per variable (fc4/biases: all of it).
GRAD_POINTS = {
    "LeNet/conv1/weights": 6,
    "LeNet/conv1/biases": 3,
    "LeNet/conv2/weights": 6,
    "LeNet/conv2/biases": 3,
    "LeNet/fc3/weights": 6,
    "LeNet/fc3/biases": 4,
    "LeNet/fc4/weights": 6,
    "LeNet/fc4/biases": NUM_CLASSES,
}


def fill(shape, stream, scale):
  """The formula in the module docstring, over TF's flat index."""
  n = int(np.prod(shape))
  m = np.uint32(0xFFFFFFFF)
  with np.errstate(over="ignore"):
    x = np.arange(n, dtype=np.uint64) + np.uint64(stream) * np.uint64(
        0x9E3779B9)
    x = (x & np.uint64(m)).astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
  v = scale * ((x >> np.uint32(8)).astype(np.float64) * 2.0**-23 - 1.0)
  f = v.astype(np.float32)
  assert np.array_equal(f.astype(np.float64), v), "fill not exact in float32"
  return f.reshape(shape)


def lenet_arg_scope(weight_decay=0.0):
  """nets/lenet.py lenet_arg_scope."""
  with slim.arg_scope(
      [slim.conv2d, slim.fully_connected],
      weights_regularizer=slim.l2_regularizer(weight_decay),
      weights_initializer=tf1.truncated_normal_initializer(stddev=0.1),
      activation_fn=tf.nn.relu) as sc:
    return sc


def lenet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
          prediction_fn=slim.softmax, scope="LeNet"):
  """nets/lenet.py lenet, verbatim but for tf -> tf1."""
  end_points = {}
  with tf1.variable_scope(scope, "LeNet", [images]):
    net = end_points["conv1"] = slim.conv2d(images, 32, [5, 5], scope="conv1")
    net = end_points["pool1"] = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
    net = end_points["conv2"] = slim.conv2d(net, 64, [5, 5], scope="conv2")
    net = end_points["pool2"] = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
    net = slim.flatten(net)
    end_points["Flatten"] = net
    net = end_points["fc3"] = slim.fully_connected(net, 1024, scope="fc3")
    if not num_classes:
      return net, end_points
    net = end_points["dropout3"] = slim.dropout(
        net, dropout_keep_prob, is_training=is_training, scope="dropout3")
    logits = end_points["Logits"] = slim.fully_connected(
        net, num_classes, activation_fn=None, scope="fc4")
  end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
  return logits, end_points


def pick(rng, array, count, nonzero=True):
  """`count` distinct indices of `array` (nonzero entries where asked)."""
  flat = array.reshape(-1)
  candidates = np.flatnonzero(flat) if nonzero else np.arange(flat.size)
  chosen = np.sort(rng.choice(candidates, size=count, replace=False))
  return [tuple(int(d) for d in np.unravel_index(c, array.shape))
          for c in chosen]


def run():
  fills = {name: (stream, scale) for name, stream, scale in FILLS}
  graph = tf.Graph()
  with graph.as_default():
    images = tf1.constant(fill(IMAGE_SHAPE, *fills["images"]))
    with slim.arg_scope(lenet_arg_scope(weight_decay=WEIGHT_DECAY)):
      logits, end_points = lenet(images, num_classes=NUM_CLASSES,
                                 is_training=False)
    onehot = tf1.one_hot(LABELS, NUM_CLASSES)
    loss = tf1.losses.softmax_cross_entropy(onehot, logits)
    loss_smoothed = tf1.losses.softmax_cross_entropy(
        onehot, logits, label_smoothing=LABEL_SMOOTHING)
    reg = tf1.add_n(tf1.get_collection(tf1.GraphKeys.REGULARIZATION_LOSSES))
    variables = tf1.global_variables()
    names = [v.op.name for v in variables]
    assert sorted(names) == sorted(n for n, _, _ in FILLS[1:]), names
    grads = tf1.gradients(loss, variables)
    with tf1.Session(graph=graph) as sess:
      sess.run(tf1.global_variables_initializer())
      for v in variables:
        v.load(fill(v.shape.as_list(), *fills[v.op.name]), sess)
      fetched = sess.run({
          "logits": logits,
          "end_points": {k: end_points[k] for k in END_POINTS},
          "loss": loss,
          "loss_smoothed": loss_smoothed,
          "reg": reg,
          "grads": dict(zip(names, grads)),
      })
  return fetched


def c_float(x):
  s = "%.9g" % float(np.float32(x))
  if "e" not in s and "." not in s and "n" not in s:
    s += ".0"
  return s + "f"


def c_double(x):
  s = "%.17g" % float(x)
  if "e" not in s and "." not in s and "n" not in s:
    s += ".0"
  return s


def c_points(name, array, indices):
  rows = []
  for idx in indices:
    rows.append('    {"%s", %d, {%s}, %s},' % (
        name, len(idx), ", ".join(str(d) for d in idx), c_float(array[idx])))
  return rows


def c_sums(name, array):
  a = array.astype(np.float64)
  return '    {"%s", %s, %s},' % (name, c_double(a.sum()),
                                   c_double(np.abs(a).sum()))


def report(f):
  ep = f["end_points"]
  for k in ["conv1", "conv2"]:
    live = (ep[k] > 0).reshape(-1, ep[k].shape[-1]).any(axis=0)
    assert live.all(), "%s has channels dead everywhere" % k
  for k in END_POINTS:
    print("%-8s live %.2f  max %.3f" % (k, (ep[k] > 0).mean(), ep[k].max()),
          file=sys.stderr)
  print("logits", f["logits"], file=sys.stderr)
  print("loss %.6f smoothed %.6f reg %.6f" %
        (f["loss"], f["loss_smoothed"], f["reg"]), file=sys.stderr)


def write(f, path):
  rng = np.random.RandomState(20240601)
  out = [
      "// LeNet goldens computed by TensorFlow %s + tf_slim (tf.compat.v1, "
      "graph mode, float32, NHWC)." % tf.__version__,
      "// Generated by scripts/golden/gen_lenet_goldens.py; do not edit.",
      "// Regenerate from the repository root:",
      "//   " + COMMAND,
      "",
      "// Included by tests/nets/lenet_golden_test.cc after the definitions of",
      "// GoldenFill, GoldenPoint and GoldenSums. Indices are in TensorFlow's",
      "// layout: end points [n, h, w, c] (Flatten and fc3 [n, j]), conv",
      "// weights [kh, kw, in, out], fc weights [in, out]. Sums are float64",
      "// sums over the whole float32 tensor. See the script for the fill.",
      "",
      "constexpr int64_t kGoldenLabels[] = {%s};" %
      ", ".join(str(l) for l in LABELS),
      "constexpr int64_t kGoldenImageShape[] = {%s};  // NHWC" %
      ", ".join(str(d) for d in IMAGE_SHAPE),
      "constexpr double kGoldenWeightDecay = %s;" % c_double(WEIGHT_DECAY),
      "constexpr double kGoldenLabelSmoothing = %s;" %
      c_double(LABEL_SMOOTHING),
      "",
      "// {tensor, stream, scale}",
      "constexpr GoldenFill kGoldenFills[] = {",
  ]
  for name, stream, scale in FILLS:
    out.append('    {"%s", %du, %s},' % (name, stream, c_double(scale)))
  out += ["};", "", "// [2, 10]", "constexpr float kGoldenLogits[] = {"]
  logits = f["logits"].reshape(-1)
  out.append("    " + ", ".join(c_float(x) for x in logits[:5]) + ",")
  out.append("    " + ", ".join(c_float(x) for x in logits[5:10]) + ",")
  out.append("    " + ", ".join(c_float(x) for x in logits[10:15]) + ",")
  out.append("    " + ", ".join(c_float(x) for x in logits[15:]) + "};")
  out += [
      "",
      "constexpr float kGoldenLoss = %s;" % c_float(f["loss"]),
      "constexpr float kGoldenLossSmoothed = %s;" % c_float(f["loss_smoothed"]),
      "constexpr float kGoldenRegularizationLoss = %s;" % c_float(f["reg"]),
      "",
      "// {end point, rank, index, value}",
      "constexpr GoldenPoint kGoldenEndPoints[] = {",
  ]
  for k in END_POINTS:
    a = f["end_points"][k]
    out += c_points(k, a, pick(rng, a, POINTS_PER_END_POINT))
  out += ["};", "", "// {end point, sum, sum of |.|}",
          "constexpr GoldenSums kGoldenEndPointSums[] = {"]
  out += [c_sums(k, f["end_points"][k]) for k in END_POINTS]
  out += ["};", "", "// d loss / d variable: {variable, rank, index, value}",
          "constexpr GoldenPoint kGoldenGradients[] = {"]
  for name, _, _ in FILLS[1:]:
    g = f["grads"][name]
    count = GRAD_POINTS[name]
    if count == g.size:
      idx = [tuple(int(d) for d in np.unravel_index(c, g.shape))
             for c in range(g.size)]
    else:
      idx = pick(rng, g, count)
    out += c_points(name, g, idx)
  out += ["};", "", "// d loss / d variable: {variable, sum, sum of |.|}",
          "constexpr GoldenSums kGoldenGradientSums[] = {"]
  out += [c_sums(name, f["grads"][name]) for name, _, _ in FILLS[1:]]
  out += ["};", ""]
  with open(path, "w") as fh:
    fh.write("\n".join(out))
  print("wrote %s (%d bytes)" % (path, os.path.getsize(path)), file=sys.stderr)


def main():
  fetched = run()
  report(fetched)
  write(fetched, OUTPUT)


if __name__ == "__main__":
  main()
