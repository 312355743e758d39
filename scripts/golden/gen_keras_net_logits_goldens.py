#!/usr/bin/env python3
"""Logits of TF-Slim nets that tf_slim does not ship, from tf_keras.

tf_slim's nets package lacks inception_resnet_v2 and mobilenet_v2, but
tf_keras.applications has both, written as ports of TF-Slim's: the same
layers, branch order, padding, batch-norm settings (InceptionResNetV2:
beta only, epsilon 0.001; MobileNetV2: gamma and beta, epsilon 0.001) and
residual scales, and their ImageNet weights were converted from TF-Slim's
checkpoints. This script builds each Keras model in inference mode, renames
its weights to TF-Slim's variable names, fills every one with the formula of
gen_net_logits_goldens.py (TensorFlow layout), and records the logits and
the sums of a few end points, in the format of net_logits_goldens.inc, for
tests/nets/net_logits_test.cc. Every variable shape in the .inc comes from
the Keras model, except the AuxLogits head of inception_resnet_v2, which
Keras omits: its shapes are TF-Slim's (1x1 conv 128, 5x5 VALID conv 768,
fully connected), filled too but not used by the logits.

Renaming: Keras numbers its auto-named layers (conv2d_N,
batch_normalization_N) in creation order, which is TF-Slim's order of
variable creation; the named ones (block35_1_conv, Conv1, block_3_expand,
...) map by name. Shapes are asserted against the kernel sizes in TF-Slim's
scope names.

The fill's fan_in of a depthwise kernel [kh, kw, C, 1] is kh * kw (one input
channel per filter), so activations keep their size through MobileNet v2.

Regenerate from the repository root (needs tensorflow-cpu and tf_keras; CI
never runs it):
  python3 scripts/golden/gen_keras_net_logits_goldens.py
Writes tests/golden/keras_net_logits_goldens.inc.

Test-time mode (tests/tf/tf_checkpoints_all_nets.sh; writes nothing into the
repository):
  python3 scripts/golden/gen_keras_net_logits_goldens.py --checkpoints OUT_DIR
writes, for each net above, its filled weights under TF-Slim's names (the
AuxLogits head included) and global_step 1000 as TensorFlow checkpoints,
through tf.compat.v1.train.Saver: OUT_DIR/<net>/v2/model.ckpt-1000 (V2) and
OUT_DIR/<net>/v1/model.ckpt-1000 (V1), each with its `checkpoint` file, and
OUT_DIR/<net>/logits.txt (batch-2 logits, "%.9g" a line), and appends
"net image_size num_classes channels" lines to OUT_DIR/manifest.txt, as
gen_tf_checkpoints.py --all-nets does.
"""

import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from logits_golden_writer import fill_for, net_rows, value  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "python3 scripts/golden/gen_keras_net_logits_goldens.py"
BATCH = 2
CLASSES = 1000


BN = ["beta", "moving_mean", "moving_variance"]
BN_GAMMA = ["gamma"] + BN


# ---- Inception-ResNet-v2 ------------------------------------------------------
def irv2_scopes():
  """TF-Slim's conv scopes in creation order; 'up:<keras name>' marks a
  block's projection (a Keras layer by name)."""
  s = ["Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "Conv2d_3b_1x1",
       "Conv2d_4a_3x3"]
  s += ["Mixed_5b/" + x for x in (
      "Branch_0/Conv2d_1x1", "Branch_1/Conv2d_0a_1x1", "Branch_1/Conv2d_0b_5x5",
      "Branch_2/Conv2d_0a_1x1", "Branch_2/Conv2d_0b_3x3",
      "Branch_2/Conv2d_0c_3x3", "Branch_3/Conv2d_0b_1x1")]

  def blocks(repeat, kind, n, branches):
    out = []
    for i in range(1, n + 1):
      scope = "%s/%s_%d" % (repeat, kind, i)
      if kind == "block8" and i == 10:
        scope = "Block8"
      out += [scope + "/" + b for b in branches]
      out.append("up:%s_%d_conv=%s/Conv2d_1x1" % (kind, i, scope))
    return out

  s += blocks("Repeat", "block35", 10, [
      "Branch_0/Conv2d_1x1", "Branch_1/Conv2d_0a_1x1", "Branch_1/Conv2d_0b_3x3",
      "Branch_2/Conv2d_0a_1x1", "Branch_2/Conv2d_0b_3x3",
      "Branch_2/Conv2d_0c_3x3"])
  s += ["Mixed_6a/" + x for x in (
      "Branch_0/Conv2d_1a_3x3", "Branch_1/Conv2d_0a_1x1",
      "Branch_1/Conv2d_0b_3x3", "Branch_1/Conv2d_1a_3x3")]
  s += blocks("Repeat_1", "block17", 20, [
      "Branch_0/Conv2d_1x1", "Branch_1/Conv2d_0a_1x1", "Branch_1/Conv2d_0b_1x7",
      "Branch_1/Conv2d_0c_7x1"])
  s += ["Mixed_7a/" + x for x in (
      "Branch_0/Conv2d_0a_1x1", "Branch_0/Conv2d_1a_3x3",
      "Branch_1/Conv2d_0a_1x1", "Branch_1/Conv2d_1a_3x3",
      "Branch_2/Conv2d_0a_1x1", "Branch_2/Conv2d_0b_3x3",
      "Branch_2/Conv2d_1a_3x3")]
  s += blocks("Repeat_2", "block8", 10, [
      "Branch_0/Conv2d_1x1", "Branch_1/Conv2d_0a_1x1", "Branch_1/Conv2d_0b_1x3",
      "Branch_1/Conv2d_0c_3x1"])
  return s


def check_kernel(scope, shape):
  m = re.search(r"_(\d)x(\d)$", scope)
  if m and not scope.endswith("Conv2d_1x1"):
    assert tuple(shape[:2]) == (int(m.group(1)), int(m.group(2))), (scope, shape)


def irv2():
  model = keras.applications.InceptionResNetV2(
      weights=None, classes=CLASSES, classifier_activation=None)
  layers = {l.name: l for l in model.layers}
  convs = sorted((l for n, l in layers.items() if re.fullmatch(r"conv2d(_\d+)?", n)),
                 key=lambda l: int(l.name[7:] or 0))
  bns = {l.name: l for n, l in layers.items()
         if re.fullmatch(r"batch_normalization(_\d+)?", n)}
  pairs = []  # (tf name, keras weight, tf shape)
  conv_iter = iter(convs)
  for scope in irv2_scopes():
    full = "InceptionResnetV2/"
    if scope.startswith("up:"):
      keras_name, tf_scope = scope[3:].split("=")
      layer = layers[keras_name]
      pairs.append((full + tf_scope + "/weights", layer.weights[0]))
      pairs.append((full + tf_scope + "/biases", layer.weights[1]))
      continue
    conv = next(conv_iter)
    check_kernel(scope, conv.weights[0].shape)
    pairs.append((full + scope + "/weights", conv.weights[0]))
    suffix = conv.name[6:]  # "" or "_N"
    bn = bns["batch_normalization" + suffix]
    for leaf, w in zip(BN, bn.weights):
      pairs.append((full + scope + "/BatchNorm/" + leaf, w))
  assert next(conv_iter, None) is None, "unmapped Keras convs"
  pairs.append(("InceptionResnetV2/Conv2d_7b_1x1/weights",
                layers["conv_7b"].weights[0]))
  for leaf, w in zip(BN, layers["conv_7b_bn"].weights):
    pairs.append(("InceptionResnetV2/Conv2d_7b_1x1/BatchNorm/" + leaf, w))
  pred = layers["predictions"]
  pairs.append(("InceptionResnetV2/Logits/Logits/weights", pred.weights[0]))
  pairs.append(("InceptionResnetV2/Logits/Logits/biases", pred.weights[1]))
  # TF-Slim's AuxLogits (not in Keras): shapes from inception_resnet_v2.py.
  aux = [("AuxLogits/Conv2d_1b_1x1/weights", [1, 1, 1088, 128])]
  aux += [("AuxLogits/Conv2d_1b_1x1/BatchNorm/" + l, [128]) for l in BN]
  aux += [("AuxLogits/Conv2d_2a_5x5/weights", [5, 5, 128, 768])]
  aux += [("AuxLogits/Conv2d_2a_5x5/BatchNorm/" + l, [768]) for l in BN]
  aux += [("AuxLogits/Logits/weights", [768, CLASSES]),
          ("AuxLogits/Logits/biases", [CLASSES])]
  extra = [("InceptionResnetV2/" + n, s) for n, s in aux]
  points = {
      "Conv2d_1a_3x3": "activation", "MaxPool_5a_3x3": "max_pooling2d_1",
      "Mixed_5b": "mixed_5b", "Mixed_6a": "mixed_6a",
      "PreAuxLogits": "block17_20_ac", "Mixed_7a": "mixed_7a",
      "Conv2d_7b_1x1": "conv_7b_ac", "global_pool": "avg_pool",
      "Logits": "predictions"}
  return "inception_resnet_v2", 299, model, pairs, extra, points


# ---- MobileNet v2 -------------------------------------------------------------
def mnv2(name, alpha):
  model = keras.applications.MobileNetV2(
      weights=None, alpha=alpha, classes=CLASSES, classifier_activation=None)
  layers = {l.name: l for l in model.layers}
  pairs = []

  def conv(tf_scope, keras_conv, keras_bn, leaf="weights"):
    pairs.append(("MobilenetV2/%s/%s" % (tf_scope, leaf),
                  layers[keras_conv].weights[0]))
    for l, w in zip(BN_GAMMA, layers[keras_bn].weights):
      pairs.append(("MobilenetV2/%s/BatchNorm/%s" % (tf_scope, l), w))

  conv("Conv", "Conv1", "bn_Conv1")
  conv("expanded_conv/depthwise", "expanded_conv_depthwise",
       "expanded_conv_depthwise_BN", "depthwise_weights")
  conv("expanded_conv/project", "expanded_conv_project",
       "expanded_conv_project_BN")
  for i in range(1, 17):
    k, t = "block_%d_" % i, "expanded_conv_%d/" % i
    conv(t + "expand", k + "expand", k + "expand_BN")
    conv(t + "depthwise", k + "depthwise", k + "depthwise_BN",
         "depthwise_weights")
    conv(t + "project", k + "project", k + "project_BN")
  conv("Conv_1", "Conv_1", "Conv_1_bn")
  pred = layers["predictions"]
  kernel = pred.weights[0]
  pairs.append(("MobilenetV2/Logits/Conv2d_1c_1x1/weights",
                (kernel, [1, 1] + list(kernel.shape))))
  pairs.append(("MobilenetV2/Logits/Conv2d_1c_1x1/biases", pred.weights[1]))
  points = {"layer_1": "Conv1_relu", "layer_2": "expanded_conv_project_BN",
            "layer_3/expansion_output": "block_1_expand_relu",
            "layer_3/depthwise_output": "block_1_depthwise_relu",
            "layer_3": "block_1_project_BN", "layer_4": "block_2_add",
            "layer_18": "block_16_project_BN", "layer_19": "out_relu",
            "global_pool": "global_average_pooling2d", "Logits": "predictions"}
  return name, 224, model, pairs, [], points


def run(spec):
  name, size, model, pairs, extra, points = spec
  fills = []
  index = 0
  for tf_name, w in pairs:
    target = None
    if isinstance(w, tuple):
      w, target = w
    shape = target or list(w.shape)
    stream, scale, positive = fill_for(index, tf_name, shape,
                                       depthwise_window=True)
    w.assign(value(shape, stream, scale, positive).reshape(w.shape))
    fills.append((tf_name, stream, scale, positive, shape))
    index += 1
  assert len(pairs) == len(model.weights), (len(pairs), len(model.weights))
  for tf_name, shape in extra:
    stream, scale, positive = fill_for(index, tf_name, shape,
                                       depthwise_window=True)
    fills.append((tf_name, stream, scale, positive, shape))
    index += 1
  images = value([BATCH, size, size, 3], 0, 1.0, False)
  probe = keras.Model(model.input,
                      [model.get_layer(k).output for k in points.values()])
  outs = probe(images, training=False)
  eps = {key: out.numpy() for key, out in zip(points, outs)}
  return size, fills, eps["Logits"], eps


def specs():
  return [irv2, lambda: mnv2("mobilenet_v2", 1.0),
          lambda: mnv2("mobilenet_v2_140", 1.4),
          lambda: mnv2("mobilenet_v2_035", 0.35)]


def checkpoints(out_dir):
  """--checkpoints: each net's fill as V2 and V1 checkpoints (TF-Slim names)."""
  os.makedirs(out_dir, exist_ok=True)
  for make in specs():
    keras.backend.clear_session()
    spec = make()
    name, size = spec[0], spec[1]
    _, fills, out, _ = run(spec)
    named = {}
    for tf_name, w in spec[3]:
      w = w[0] if isinstance(w, tuple) else w
      target = [f for f in fills if f[0] == tf_name][0][4]
      # Keras holds the logits of MobileNet v2 as a dense [in, out] kernel;
      # TF-Slim's is a 1x1 convolution: the variable saved has its shape.
      named[tf_name] = (w if list(w.shape) == list(target) else
                        tf.Variable(tf.reshape(w, target)))
    for tf_name, stream, scale, positive, shape in fills:
      if tf_name not in named:  # the AuxLogits head Keras lacks
        named[tf_name] = tf.Variable(value(shape, stream, scale, positive))
    named["global_step"] = tf.Variable(np.int64(1000))
    net_dir = os.path.join(out_dir, name)
    for version, sub in ((tf.compat.v1.train.SaverDef.V2, "v2"),
                         (tf.compat.v1.train.SaverDef.V1, "v1")):
      d = os.path.join(net_dir, sub)
      os.makedirs(d, exist_ok=True)
      tf.compat.v1.train.Saver(named, write_version=version,
                               save_relative_paths=True).save(
          None, os.path.join(d, "model.ckpt"), global_step=1000,
          write_meta_graph=False)
    with open(os.path.join(net_dir, "logits.txt"), "w") as f:
      f.write("".join("%.9g\n" % x for x in out.reshape(-1)))
    with open(os.path.join(out_dir, "manifest.txt"), "a") as f:
      f.write("%s %d %d 3\n" % (name, size, CLASSES))
    print("%s: %d variables written as V2 and V1" % (name, len(named)),
          flush=True)


def main():
  if sys.argv[1:2] == ["--checkpoints"]:
    if len(sys.argv) != 3:
      sys.exit("usage: %s --checkpoints OUT_DIR" % COMMAND)
    checkpoints(sys.argv[2])
    return
  lines = [
      "// Logits of TF-Slim nets from their tf_keras ports (TensorFlow %s)"
      % tf.__version__,
      "// for formula-filled weights, under TF-Slim's variable names.",
      "// Generated by scripts/golden/gen_keras_net_logits_goldens.py; do not edit.",
      "// Regenerate from the repository root:",
      "//   " + COMMAND,
      "// Included by tests/nets/net_logits_test.cc after the definitions of",
      "// LogitsFill, LogitsSums and NetLogitsGolden.",
      "",
  ]
  table = []
  for make in specs():
    keras.backend.clear_session()
    spec = make()
    name = spec[0]
    size, fills, out, eps = run(spec)
    rows, row = net_rows("k_keras_" + name, name, size, CLASSES, fills, out,
                         eps)
    lines.extend(rows)
    table.append(row)
    print(name, "logits |max| %.4g" % np.abs(out).max(), "std %.4g" % out.std(),
          len(fills), "variables")
  lines.append("const NetLogitsGolden kKerasNetLogitsGoldens[] = {")
  lines.extend(table)
  lines.append("};")
  path = os.path.join(REPO, "tests", "golden", "keras_net_logits_goldens.inc")
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  print("wrote", path)


if __name__ == "__main__":
  main()
