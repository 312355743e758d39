#!/usr/bin/env python3
"""Ground truth for TF-Slim's quantization-aware training rewrite
(tf.contrib.quantize of TensorFlow 1.15), run on TensorFlow 2.21.

TensorFlow 2.x has no tf.contrib. This script imports TF 1.15.5's
tensorflow/contrib/quantize/python/*.py (and contrib/graph_editor) from a
local copy given by --contrib-dir, as the package `tfcontrib` (the only edit
to those files is the package name: `tensorflow.contrib.` -> `tfcontrib.`;
see that directory's PATCHES file). Without the copy it says so and exits 0.

Two outputs:

1. tests/golden/quantize_goldens.inc (--out): a tiny slim model,
     input [2, 5, 5, 3]
     -> slim.conv2d(4, [3, 3], SAME, normalizer_fn=slim.batch_norm
        (scale=True, decay=0.9, epsilon=0.001, fused, is_training=True),
        activation_fn=relu6, scope 'conv1')
     -> slim.conv2d(3, [1, 1], biases, no normalizer, activation_fn=None,
        scope 'conv2')
   with every parameter set from the generators' fill() formula (the values
   are written out too), and the loss sum(out * r) for a fixed r. Cases:
     * delay0: create_training_graph(quant_delay=0), 3 training-graph runs;
     * delay2: create_training_graph(quant_delay=2), 4 runs;
     * freeze2: experimental_create_training_graph(quant_delay=0,
       freeze_bn_delay=2), 4 runs;
     * float: no rewrite, 4 runs (the same training-mode batch norm);
     * eval: the net rebuilt with is_training=False, create_eval_graph(), on
       delay0's variables after its 3 runs: one output per input.
   A "run" is one session.run of the output, the gradients of the loss with
   respect to the input, conv1/weights, gamma, beta, conv2/weights and
   conv2/biases, and the UPDATE_OPS (the batch norm moving averages), which
   this script orders after the forward and backward pass (control inputs)
   so that the run reads the moving statistics of the previous run. The
   quantization ranges need no ordering: the FakeQuant ops take the outputs
   of the range assignments as their min/max inputs, so evaluating the
   output updates them. Run k uses input k. After each run every variable
   the rewrite added and the moving mean/variance are recorded.

   Table rows {name, shape, values}: "param/<var>", "input/<k>",
   "upstream" (r), "<case>/<k>/output", "<case>/<k>/grad/<what>",
   "<case>/<k>/var/<variable name>" (fake_quantization_step, an int64, as a
   float), "eval/<k>/output". k counts runs from 1.

2. tests/golden/quantize_placement_goldens.inc (--placement-out, optional):
   every FakeQuant the training rewrite puts in lenet, cifarnet,
   mobilenet_v1 (0.25), mobilenet_v2, inception_v1, resnet_v1_50,
   resnet_v2_50, mobilenet_v3_small and vgg_a (--placement-nets): its scope
   (= the prefix of its min/max variables, as they appear in checkpoints),
   the op it quantizes, and whether create_eval_graph() puts it there too.

3. --report PATH (optional): placement of the rewrite in TF-Slim's nets
   (variables added, FakeQuant ops with their producers, what is left
   unquantized), for the nets named by --nets, as plain text, the raw data
   behind /work/quant-research/placement.md.

Regenerate from the repository root (CI never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_quantize_goldens.py \\
      --contrib-dir=/work/quant-research/contrib_quantize \\
      [--placement-out tests/golden/quantize_placement_goldens.inc] \\
      [--report /work/quant-research/placement_raw.txt]
"""

import argparse
import collections
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from gen_lenet_goldens import c_float, fill  # noqa: E402
from gen_net_goldens import default_slim_dir, slim, tf  # noqa: E402
import tfslim_compat  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "golden", "quantize_goldens.inc")
DEFAULT_CONTRIB = "/work/quant-research/contrib_quantize"

IN_SHAPE = [2, 5, 5, 3]
BN_DECAY = 0.9
BN_EPSILON = 0.001


# ---- The tiny model ---------------------------------------------------------
def tiny_params():
  """name -> value; every value in float32."""
  f32 = np.float32
  return collections.OrderedDict([
      ("conv1/weights", fill([3, 3, 3, 4], 11, 0.5)),
      ("conv1/BatchNorm/gamma", (f32(1) + fill([4], 12, 0.25)).astype(f32)),
      ("conv1/BatchNorm/beta", fill([4], 13, 0.5)),
      ("conv1/BatchNorm/moving_mean", fill([4], 14, 0.25)),
      ("conv1/BatchNorm/moving_variance",
       (f32(1) + fill([4], 15, 0.5)).astype(f32)),
      ("conv2/weights", fill([1, 1, 4, 3], 16, 0.5)),
      ("conv2/biases", fill([3], 17, 0.25)),
  ])


def tiny_inputs():
  return [fill(IN_SHAPE, 100 + k, 2.0) for k in range(1, 5)]


def upstream():
  return fill(IN_SHAPE[:3] + [3], 18, 1.0)


def build_tiny(is_training):
  x = tf.placeholder(tf.float32, IN_SHAPE, name="input")
  bn = {"scale": True, "decay": BN_DECAY, "epsilon": BN_EPSILON,
        "is_training": is_training}
  net = slim.conv2d(x, 4, [3, 3], normalizer_fn=slim.batch_norm,
                    normalizer_params=bn, activation_fn=tf.nn.relu6,
                    scope="conv1")
  out = slim.conv2d(net, 3, [1, 1], activation_fn=None, scope="conv2")
  return x, out


def quantized_output(g, out):
  """What a consumer of `out` built before the rewrite would read after it.

  The rewrite reroutes only the consumers that exist when it runs; the loss
  here is built after it (gradients must come after the rewrite), so it is
  attached to the rewrite's last op by hand: the delayed_quant Merge with a
  quant_delay, else the FakeQuant. (A Mul or Identity consumer built before
  the rewrite would itself be matched and quantized.)"""
  for name in ("conv2/act_quant/delayed_quant/Merge:0",
               "conv2/act_quant/FakeQuantWithMinMaxVars:0"):
    try:
      return g.get_tensor_by_name(name)
    except KeyError:
      pass
  return out


GRAD_OF = ["input", "conv1/weights", "conv1/BatchNorm/gamma",
           "conv1/BatchNorm/beta", "conv2/weights", "conv2/biases"]


def run_case(cq, rewrite, steps):
  """Builds the tiny model, applies `rewrite` (or none), runs `steps`
  training-graph runs; returns (rows, variable values at the end)."""
  g = tf.Graph()
  rows = []
  with g.as_default():
    x, out = build_tiny(True)
    model_vars = {v.op.name for v in tf.global_variables()}
    if rewrite is not None:
      rewrite(cq, g)
      out = quantized_output(g, out)
    by_name = {v.op.name: v for v in tf.global_variables()}
    r = tf.constant(upstream())
    loss = tf.reduce_sum(out * r)
    grads = tf.gradients(loss, [x] + [by_name[n] for n in GRAD_OF[1:]])
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    for u in updates:
      u._add_control_inputs([out.op] + [t.op for t in grads])  # pylint: disable=protected-access
    added = sorted(n for n in by_name if n not in model_vars)
    recorded = added + ["conv1/BatchNorm/moving_mean",
                        "conv1/BatchNorm/moving_variance"]
    with tf.Session(graph=g) as sess:
      sess.run(tf.global_variables_initializer())
      for name, value in tiny_params().items():
        by_name[name].load(value, sess)
      for k, inp in enumerate(tiny_inputs()[:steps], 1):
        o, gs, _ = sess.run([out, grads, updates], {x: inp})
        rows.append(("%d/output" % k, o))
        for what, gv in zip(GRAD_OF, gs):
          rows.append(("%d/grad/%s" % (k, what), gv))
        for n in recorded:
          rows.append(("%d/var/%s" % (k, n),
                       np.asarray(sess.run(by_name[n]), np.float64)))
      final = {n: sess.run(v) for n, v in by_name.items()}
  return rows, final


def run_eval(cq, values):
  """create_eval_graph on a net built with is_training=False, variables
  from `values` (by name); one output per input."""
  g = tf.Graph()
  rows = []
  with g.as_default():
    x, out = build_tiny(False)
    cq.create_eval_graph(g)
    out = quantized_output(g, out)
    by_name = {v.op.name: v for v in tf.global_variables()}
    missing = [n for n in by_name if n not in values]
    if missing:
      sys.exit("error: eval graph variables not in the training graph: %s"
               % missing)
    with tf.Session(graph=g) as sess:
      sess.run(tf.global_variables_initializer())
      for n, v in by_name.items():
        v.load(values[n], sess)
      for k, inp in enumerate(tiny_inputs(), 1):
        rows.append(("%d/output" % k, sess.run(out, {x: inp})))
      eval_vars = sorted(by_name)
  return rows, eval_vars


def golden_rows(cq):
  rows = [("param/" + n, v) for n, v in tiny_params().items()]
  rows += [("input/%d" % k, v) for k, v in enumerate(tiny_inputs(), 1)]
  rows.append(("upstream", upstream()))
  cases = [
      ("delay0", lambda cq, g: cq.create_training_graph(g, quant_delay=0), 3),
      ("delay2", lambda cq, g: cq.create_training_graph(g, quant_delay=2), 4),
      ("freeze2", lambda cq, g: cq.experimental_create_training_graph(
          g, quant_delay=0, freeze_bn_delay=2), 4),
      ("float", None, 4),
  ]
  delay0_final = None
  for case, rewrite, steps in cases:
    case_rows, final = run_case(cq, rewrite, steps)
    rows += [(case + "/" + n, v) for n, v in case_rows]
    if case == "delay0":
      delay0_final = final
  eval_rows, _ = run_eval(cq, delay0_final)
  rows += [("eval/" + n, v) for n, v in eval_rows]
  return rows


def c_row(name, value):
  a = np.asarray(value)
  shape = ", ".join(str(d) for d in a.shape)
  vals = ", ".join(c_float(v) for v in a.reshape(-1))
  return '    {"%s", {%s}, {%s}},' % (name, shape, vals)


def write_inc(rows, path):
  lines = [
      "// tf.contrib.quantize (TensorFlow 1.15.5's python, run on TensorFlow %s)"
      % tf.__version__,
      "// on a two-layer slim model. Generated by",
      "// scripts/golden/gen_quantize_goldens.py (its docstring describes the",
      "// model and the rows); do not edit. Included after",
      "//   struct QuantizeGolden { const char* name; std::vector<int64_t> shape;",
      "//                           std::vector<float> values; };",
      "",
      "const QuantizeGolden kQuantizeGoldens[] = {",
  ]
  lines += [c_row(n, v) for n, v in rows]
  lines.append("};")
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  print("wrote %s (%d rows, %d bytes)" % (path, len(rows),
                                          os.path.getsize(path)))


# ---- Placement in the nets -----------------------------------------------------
# nets/mobilenet_v1.py's layers: (kind, stride, depth).
MOBILENET_V1_DEFS = (
    [("conv", 2, 32), ("sep", 1, 64), ("sep", 2, 128), ("sep", 1, 128),
     ("sep", 2, 256), ("sep", 1, 256), ("sep", 2, 512)] +
    [("sep", 1, 512)] * 5 + [("sep", 2, 1024), ("sep", 1, 1024)])


def mobilenet_v1(images, num_classes=1001, is_training=True,
                 depth_multiplier=0.25, min_depth=8):
  """nets/mobilenet_v1.py's scoping: mobilenet_v1 opens the variable scope
  'MobilenetV1' and hands the scope object to mobilenet_v1_base, which
  re-enters it; variables stay MobilenetV1/..., ops get the name scope
  MobilenetV1/MobilenetV1/... (the contrib rewrite names its variables
  after the ops)."""
  def depth(d):
    return max(int(d * depth_multiplier), min_depth)
  with tf.variable_scope(None, "MobilenetV1", [images]) as scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      with tf.variable_scope(scope, "MobilenetV1", [images]):
        with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                            padding="SAME"):
          net = images
          for i, (kind, stride, d) in enumerate(MOBILENET_V1_DEFS):
            if kind == "conv":
              net = slim.conv2d(net, depth(d), [3, 3], stride=stride,
                                scope="Conv2d_%d" % i)
            else:
              net = slim.separable_conv2d(
                  net, None, [3, 3], depth_multiplier=1, stride=stride,
                  rate=1, scope="Conv2d_%d_depthwise" % i)
              net = slim.conv2d(net, depth(d), [1, 1], stride=1,
                                scope="Conv2d_%d_pointwise" % i)
      with tf.variable_scope("Logits"):
        net = slim.avg_pool2d(net, [7, 7], padding="VALID", scope="AvgPool_1a")
        net = slim.dropout(net, keep_prob=0.999, scope="Dropout_1b")
        logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                             normalizer_fn=None, scope="Conv2d_1c_1x1")
        logits = tf.squeeze(logits, [1, 2], name="SpatialSqueeze")
  return logits, {}


def mobilenet_v1_arg_scope(is_training=True):
  """nets/mobilenet_v1.py mobilenet_v1_arg_scope defaults."""
  bn = {"center": True, "scale": True, "decay": 0.9997, "epsilon": 0.001,
        "is_training": is_training}
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      weights_initializer=tf.truncated_normal_initializer(
                          stddev=0.09),
                      activation_fn=tf.nn.relu6, normalizer_fn=slim.batch_norm):
    with slim.arg_scope([slim.batch_norm], **bn):
      with slim.arg_scope([slim.conv2d],
                          weights_regularizer=slim.l2_regularizer(0.00004)):
        with slim.arg_scope([slim.separable_conv2d],
                            weights_regularizer=None) as sc:
          return sc


def mobilenet_v2_defs(mods):
  """nets/mobilenet/mobilenet_v2.py V2_DEF, through mobilenet.py's op()."""
  lib, ops = mods["mobilenet_v3"].lib, mods["mobilenet_v3"].ops
  op = lib.op
  expand = ops.expand_input_by_factor
  spec = [op(slim.conv2d, stride=2, num_outputs=32, kernel_size=[3, 3]),
          op(ops.expanded_conv, expansion_size=expand(1, divisible_by=1),
             num_outputs=16)]
  for stride, outputs in [(2, 24), (1, 24), (2, 32), (1, 32), (1, 32),
                          (2, 64), (1, 64), (1, 64), (1, 64), (1, 96),
                          (1, 96), (1, 96), (2, 160), (1, 160), (1, 160),
                          (1, 320)]:
    spec.append(op(ops.expanded_conv, stride=stride, num_outputs=outputs))
  spec.append(op(slim.conv2d, stride=1, kernel_size=[1, 1],
                 num_outputs=1280))
  defaults = {
      (slim.batch_norm,): {"center": True, "scale": True},
      (slim.conv2d, slim.fully_connected, slim.separable_conv2d): {
          "normalizer_fn": slim.batch_norm, "activation_fn": tf.nn.relu6},
      (ops.expanded_conv,): {"expansion_size": expand(6),
                             "split_expansion": 1,
                             "normalizer_fn": slim.batch_norm,
                             "residual": True},
      (slim.conv2d, slim.separable_conv2d): {"padding": "SAME"},
  }
  return dict(defaults=defaults, spec=spec)


def net_builders(slim_dir):
  """name -> (builder(images, is_training) -> logits, image size, channels)."""
  from gen_lenet_goldens import lenet, lenet_arg_scope
  from gen_cifarnet_goldens import cifarnet, cifarnet_arg_scope
  from tf_slim.nets import inception, resnet_v1, resnet_v2, vgg

  def plain(fn, scope_fn, classes, **kw):
    def build(images, is_training):
      with slim.arg_scope(scope_fn(**kw)):
        return fn(images, num_classes=classes, is_training=is_training)[0]
    return build

  def mnv1(images, is_training):
    with slim.arg_scope(mobilenet_v1_arg_scope(is_training)):
      return mobilenet_v1(images, is_training=is_training)[0]

  def research(kind):
    mods = tfslim_compat.load(slim_dir)

    def build(images, is_training):
      if kind == "nasnet_mobile":
        nas = mods["nasnet"]
        with slim.arg_scope(nas.nasnet_mobile_arg_scope()):
          return nas.build_nasnet_mobile(images, 1001,
                                         is_training=is_training)[0]
      v3 = mods["mobilenet_v3"]
      with slim.arg_scope(v3.training_scope(is_training=is_training)):
        if kind == "mobilenet_v3_small":
          return v3.small(images, num_classes=1001)[0]
        return v3.lib.mobilenet(images, num_classes=1001,
                                conv_defs=mobilenet_v2_defs(mods),
                                scope="MobilenetV2")[0]
    return build

  return {
      "lenet": (plain(lenet, lenet_arg_scope, 10), 28, 1),
      "cifarnet": (plain(cifarnet, cifarnet_arg_scope, 10), 32, 3),
      "mobilenet_v1_025": (mnv1, 224, 3),
      "mobilenet_v2": (research("mobilenet_v2"), 224, 3),
      "inception_v1": (plain(inception.inception_v1,
                             inception.inception_v1_arg_scope, 1001), 224, 3),
      "resnet_v1_50": (plain(resnet_v1.resnet_v1_50, resnet_v1.resnet_arg_scope,
                             1000), 224, 3),
      "resnet_v2_50": (plain(resnet_v2.resnet_v2_50, resnet_v2.resnet_arg_scope,
                             1001), 224, 3),
      "nasnet_mobile": (research("nasnet_mobile"), 224, 3),
      "mobilenet_v3_small": (research("mobilenet_v3_small"), 224, 3),
      "vgg_a": (plain(vgg.vgg_a, vgg.vgg_arg_scope, 1000), 224, 3),
  }


FQ_TYPES = ("FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxVarsPerChannel")
def quantized_ops(g):
  """Ops whose output feeds a FakeQuant (directly) -> [fake quant ops]."""
  fed = collections.defaultdict(list)
  for op in g.get_operations():
    if op.type in FQ_TYPES:
      fed[op.inputs[0].op].append(op)
  return fed


def describe_graph(g, model_vars, sess):
  """Text lines: added variables, fake quant ops, unquantized outputs."""
  lines = []
  added = [v for v in tf.global_variables() if v.op.name not in model_vars]
  trainable = set(tf.trainable_variables())
  values = sess.run(added) if added else []
  for v, val in zip(added, values):
    lines.append("VAR %s shape=%s init=%s trainable=%s collections=%s" % (
        v.op.name, v.shape.as_list(), np.asarray(val).tolist(), v in trainable,
        sorted(c for c in g.get_all_collection_keys()
               if v in g.get_collection(c))))
  fed = quantized_ops(g)
  for op in g.get_operations():
    if op.type in FQ_TYPES:
      src = op.inputs[0].op
      kind = op.name.split("/")[-2]
      lines.append("FQ %s kind=%s input=%s:%s narrow=%s min_from=%s" % (
          op.name, kind, src.type, src.name, op.get_attr("narrow_range"),
          op.inputs[1].op.type))
  interesting = {"Relu", "Relu6", "Add", "AddV2", "Mul", "ConcatV2", "MaxPool",
                 "AvgPool", "Mean", "BiasAdd", "Conv2D", "DepthwiseConv2dNative",
                 "MatMul", "Sigmoid", "Squeeze", "Softmax", "Placeholder",
                 "Reshape", "Pad", "FusedBatchNormV3", "Relu6Grad"}
  for op in g.get_operations():
    if op.type not in interesting or op.name.startswith("gradients"):
      continue
    if any(s in op.name for s in ("_quant/", "BatchNorm_Fold/", "/AssignMovingAvg",
                                  "batch_norm_correction", "/Initializer")):
      continue
    q = "Q" if op in fed else "-"
    lines.append("OP %s %s %s consumers=%s" % (
        q, op.type, op.name,
        sorted({c.type for o in op.outputs for c in o.consumers()})))
  return lines


def quantizers(g):
  """[(quantizer scope, input op type, input op name)] in graph order: the
  scope holds the quantizer's min/max variables."""
  return [(op.name.rsplit("/", 1)[0], op.inputs[0].op.type,
           op.inputs[0].op.name)
          for op in g.get_operations() if op.type in FQ_TYPES]


def rewrite_net(build, size, channels, train, cq):
  """Builds one net, rewrites it; returns (report lines, quantizers, folded
  layer count) or raises what the rewrite raised."""
  g = tf.Graph()
  with g.as_default():
    images = tf.placeholder(tf.float32, [1, size, size, channels],
                            name="input")
    build(images, train)
    model_vars = {v.op.name for v in tf.global_variables()}
    if train:
      cq.create_training_graph(g, quant_delay=0)
    else:
      cq.create_eval_graph(g)
    with tf.Session(graph=g) as sess:
      sess.run(tf.global_variables_initializer())
      lines = describe_graph(g, model_vars, sess)
    fold = sum(1 for op in g.get_operations() if "_Fold" in op.name
               and op.type in ("Conv2D", "DepthwiseConv2dNative", "MatMul"))
    return lines, quantizers(g), fold


def placement(names, slim_dir, cq):
  """Report lines, and {(net, "train"|"eval"): quantizers}."""
  builders = net_builders(slim_dir)
  out, found = [], {}
  for name in names:
    build, size, channels = builders[name]
    for mode in ("train", "eval"):
      try:
        lines, quants, fold = rewrite_net(build, size, channels,
                                          mode == "train", cq)
      except Exception as e:  # pylint: disable=broad-except
        out.append("== %s %s: REWRITE FAILED: %r" % (name, mode, e))
        continue
      found[(name, mode)] = quants
      out.append("== %s %s: %d lines, %d folded layers" % (
          name, mode, len(lines), fold))
      out += lines
      print(name, mode, "done", file=sys.stderr)
  return out, found


def write_placement_inc(found, names, path):
  """Every quantizer of the training graph of each net, with whether the
  eval graph has it too."""
  lines = [
      "// Where tf.contrib.quantize (TensorFlow 1.15.5's python on TensorFlow %s)"
      % tf.__version__,
      "// puts FakeQuant ops in TF-Slim nets: create_training_graph(quant_delay=0)",
      "// on the net built with is_training=True, and create_eval_graph() on it built",
      "// with is_training=False. Generated by scripts/golden/gen_quantize_goldens.py",
      "// --placement-out; do not edit. Each row: net, quantizer scope (its range",
      "// variables are <scope>/min and <scope>/max; in the training graph EMA",
      "// quantizers also have <scope>/<scope>/{min,max}/{biased,local_step}), the",
      "// type and name of the op whose output it quantizes (after batch norm",
      "// folding), and whether the eval graph has it. Graph order. Included after",
      "//   struct QuantizePlacementGolden { const char* net; const char* scope;",
      "//       const char* input_type; const char* input; bool in_eval; };",
      "",
      "const QuantizePlacementGolden kQuantizePlacementGoldens[] = {",
  ]
  for name in names:
    if (name, "train") not in found:
      continue
    in_eval = {q[0] for q in found.get((name, "eval"), [])}
    for scope, typ, src in found[(name, "train")]:
      lines.append('    {"%s", "%s", "%s", "%s", %s},' % (
          name, scope, typ, src, "true" if scope in in_eval else "false"))
  lines.append("};")
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  print("wrote %s (%d bytes)" % (path, os.path.getsize(path)))


def parse_args(argv):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--contrib-dir", default=os.environ.get(
      "CONTRIB_QUANTIZE_DIR", DEFAULT_CONTRIB))
  p.add_argument("--slim-dir", default=default_slim_dir())
  p.add_argument("--out", default=OUT)
  p.add_argument("--report", default=None)
  p.add_argument("--nets", default="lenet,cifarnet,mobilenet_v1_025,"
                 "mobilenet_v2,inception_v1,resnet_v1_50,resnet_v2_50,"
                 "nasnet_mobile,mobilenet_v3_small,vgg_a")
  p.add_argument("--placement-out", default=None,
                 help="also write the quantizer table of --placement-nets "
                 "(tests/golden/quantize_placement_goldens.inc)")
  p.add_argument("--placement-nets", default="lenet,cifarnet,mobilenet_v1_025,"
                 "mobilenet_v2,inception_v1,resnet_v1_50,resnet_v2_50,"
                 "mobilenet_v3_small,vgg_a")
  p.add_argument("--no-goldens", action="store_true")
  return p.parse_args(argv)


def main(argv=None):
  args = parse_args(argv)
  if not os.path.isdir(os.path.join(args.contrib_dir, "tfcontrib", "quantize")):
    print("skipped: no copy of TF 1.15's contrib/quantize at --contrib-dir %s "
          "(tfcontrib/quantize/python/*.py, see this script's docstring)"
          % args.contrib_dir)
    return 0
  sys.path.insert(0, args.contrib_dir)
  tf.disable_v2_behavior()
  import tfcontrib.quantize as cq  # pylint: disable=import-outside-toplevel
  if not args.no_goldens:
    write_inc(golden_rows(cq), args.out)
  nets = [n for n in args.nets.split(",") if n] if args.report else []
  table_nets = ([n for n in args.placement_nets.split(",") if n]
                if args.placement_out else [])
  if nets or table_nets:
    lines, found = placement(nets + [n for n in table_nets if n not in nets],
                             args.slim_dir, cq)
    if args.report:
      with open(args.report, "w") as f:
        f.write("\n".join(lines) + "\n")
      print("wrote", args.report)
    if args.placement_out:
      write_placement_inc(found, table_nets, args.placement_out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
