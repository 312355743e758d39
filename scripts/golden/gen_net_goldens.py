#!/usr/bin/env python3
"""Net-zoo goldens from TF-Slim itself (TensorFlow 1.x graphs).

Usage (a net's own worktree checks its rows; --help lists the flags):
  cd /work/wt-goldens && /opt/tfenv/bin/python scripts/golden/gen_net_goldens.py \\
      --out /work/wt-X/tests/golden/net_zoo_goldens.inc mobilenet_v3_large nasnet_mobile
then build there and run `tests/slimtorch_tests --gtest_filter='*NetZooTest*'`
(or --gtest_filter='*mobilenet_v3_large*'). Don't commit that partial .inc: the
goldens branch commits the full one.

For every net of nets_factory named (default: all), builds the net in
training mode at its default image size, batch 2, under its own arg scope
(as nets_factory does) and records, for tests/nets/net_zoo_test.cc:
  * every global variable: name (without ':0'), shape (TF layout), and
    whether it is trainable (moving statistics are not);
  * the number of trainable parameters;
  * every end point: key and shape (TF layout, NHWC / NDHWC).
Class counts follow the published checkpoints: 1000 for alexnet_v2,
overfeat, vgg_* and resnet_v1_*; 1001 for inception_*, resnet_v2_*,
mobilenet_v3_* / mobilenet_edgetpu*, nasnet_mobile / _large and pnasnet_*;
10 for nasnet_cifar (CIFAR-10); 1000 for i3d and s3dg (their code's default:
TF-Slim publishes no checkpoint for them).

The first 16 nets come from the tf_slim pip package (tf_slim.nets). The rest
(MobileNet v3 / EdgeTPU, NASNet, PNASNet, I3D, S3D-G) are not in it: they are
imported from a copy of tensorflow/models research/slim (--slim-dir, default
$TFSLIM_DIR, else /work/tfslim/research/slim) through tfslim_compat.py.

Rows of the new nets carry two more fields: the image size and the frame
count (0 for image nets) at which their end points were recorded. The
variables are always those of the default size; the end points of the
heavy nets are recorded smaller, so that the C++ test's forward pass stays
cheap (nasnet_large / pnasnet_large at 96, i3d / s3dg 16 frames of 112x112;
"net@SIZE" or "net@SIZExFRAMES" picks another). NASNet-A cifar / large and
PNASNet large (drop-path keep < 1) create `global_step` inside their first
cell's comb_iter_0/left (cell_stem_0, or cell_0 for cifar) in training mode
(tf.train.get_or_create_global_step, for the drop-path schedule): it is
recorded as TF-Slim makes it; the C++ test leaves it out (slimtorch's drop-path reads
the trainer's step).

Regenerate the checked-in file from the repository root (needs
tensorflow-cpu 2.21, tf-slim, tf_keras; CI never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_net_goldens.py
Writes tests/golden/net_zoo_goldens.inc (or --out).
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# tensorflow.compat.v1 with the tf_keras workaround, and tf_slim.
from tfslim_compat import slim, tf  # noqa: E402
import tfslim_compat  # noqa: E402
from tf_slim.nets import alexnet, inception, overfeat, resnet_v1, resnet_v2, vgg  # noqa: E402

tf.disable_v2_behavior()

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "python3 scripts/golden/gen_net_goldens.py"
OUT = os.path.join(REPO, "tests", "golden", "net_zoo_goldens.inc")

# name: (function, arg scope, default image size, num_classes)
NETS = {
    "alexnet_v2": (alexnet.alexnet_v2, alexnet.alexnet_v2_arg_scope, 224, 1000),
    "overfeat": (overfeat.overfeat, overfeat.overfeat_arg_scope, 231, 1000),
    "vgg_a": (vgg.vgg_a, vgg.vgg_arg_scope, 224, 1000),
    "vgg_16": (vgg.vgg_16, vgg.vgg_arg_scope, 224, 1000),
    "vgg_19": (vgg.vgg_19, vgg.vgg_arg_scope, 224, 1000),
    "inception_v1": (inception.inception_v1, inception.inception_v1_arg_scope, 224, 1001),
    "inception_v2": (inception.inception_v2, inception.inception_v2_arg_scope, 224, 1001),
    "inception_v3": (inception.inception_v3, inception.inception_v3_arg_scope, 299, 1001),
    "resnet_v1_50": (resnet_v1.resnet_v1_50, resnet_v1.resnet_arg_scope, 224, 1000),
    "resnet_v1_101": (resnet_v1.resnet_v1_101, resnet_v1.resnet_arg_scope, 224, 1000),
    "resnet_v1_152": (resnet_v1.resnet_v1_152, resnet_v1.resnet_arg_scope, 224, 1000),
    "resnet_v1_200": (resnet_v1.resnet_v1_200, resnet_v1.resnet_arg_scope, 224, 1000),
    "resnet_v2_50": (resnet_v2.resnet_v2_50, resnet_v2.resnet_arg_scope, 224, 1001),
    "resnet_v2_101": (resnet_v2.resnet_v2_101, resnet_v2.resnet_arg_scope, 224, 1001),
    "resnet_v2_152": (resnet_v2.resnet_v2_152, resnet_v2.resnet_arg_scope, 224, 1001),
    "resnet_v2_200": (resnet_v2.resnet_v2_200, resnet_v2.resnet_arg_scope, 224, 1001),
}

# The nets of research/slim's nets_factory that tf_slim lacks, in
# nets_factory's order: name -> (module, builder, arg scope, default size,
# classes, frames (0: images)). Frames: TF-Slim's i3d_test / s3dg_test clip.
SLIM_NETS = {
    "mobilenet_v3_large": ("mobilenet_v3", "large", "training_scope", 224, 1001, 0),
    "mobilenet_v3_small": ("mobilenet_v3", "small", "training_scope", 224, 1001, 0),
    "mobilenet_v3_large_minimalistic": (
        "mobilenet_v3", "large_minimalistic", "training_scope", 224, 1001, 0),
    "mobilenet_v3_small_minimalistic": (
        "mobilenet_v3", "small_minimalistic", "training_scope", 224, 1001, 0),
    "mobilenet_edgetpu": ("mobilenet_v3", "edge_tpu", "training_scope", 224, 1001, 0),
    "mobilenet_edgetpu_075": (
        "mobilenet_v3", "edge_tpu_075", "training_scope", 224, 1001, 0),
    "nasnet_cifar": ("nasnet", "build_nasnet_cifar", "nasnet_cifar_arg_scope", 32, 10, 0),
    "nasnet_mobile": ("nasnet", "build_nasnet_mobile", "nasnet_mobile_arg_scope",
                      224, 1001, 0),
    "nasnet_large": ("nasnet", "build_nasnet_large", "nasnet_large_arg_scope",
                     331, 1001, 0),
    "pnasnet_mobile": ("pnasnet", "build_pnasnet_mobile", "pnasnet_mobile_arg_scope",
                       224, 1001, 0),
    "pnasnet_large": ("pnasnet", "build_pnasnet_large", "pnasnet_large_arg_scope",
                      331, 1001, 0),
    "i3d": ("i3d", "i3d", "i3d_arg_scope", 224, 1000, 64),
    "s3dg": ("s3dg", "s3dg", "s3dg_arg_scope", 224, 1000, 64),
}

# Where the zoo test's end points are recorded, when not at the default
# size: (size, frames).
POINTS_AT = {
    "nasnet_large": (96, 0),
    "pnasnet_large": (96, 0),
    "i3d": (112, 16),
    "s3dg": (112, 16),
}


def default_slim_dir():
    return os.environ.get("TFSLIM_DIR") or tfslim_compat.DEFAULT_SLIM_DIR


def slim_net(name, slim_dir):
    """(function, arg scope, default size, classes, frames) of a research/slim
    net, importing the copy at slim_dir."""
    module, fn, scope, size, classes, frames = SLIM_NETS[name]
    mods = tfslim_compat.load(slim_dir)
    return (getattr(mods[module], fn), getattr(mods[module], scope), size,
            classes, frames)


def net_entry(name, slim_dir):
    """(function, arg scope, default size, classes, frames) of any net."""
    if name in NETS:
        return NETS[name] + (0,)
    if name in SLIM_NETS:
        return slim_net(name, slim_dir)
    sys.exit("error: unknown net %r (known: %s)" % (
        name, ", ".join(list(NETS) + list(SLIM_NETS))))


def parse_size(text):
    """"SIZE" or "SIZExFRAMES" -> (size, frames or -1)."""
    if "x" in text:
        size, frames = text.split("x")
        return int(size), int(frames)
    return int(text), -1


def input_shape(batch, size, frames):
    if frames:
        return [batch, frames, size, size, 3]
    return [batch, size, size, 3]


def build(fn, scope_fn, size, frames, classes, is_training):
    """Builds the net in the current graph; returns (logits, end points)."""
    images = tf.placeholder(tf.float32, input_shape(2, size, frames))
    with slim.arg_scope(scope_fn()):
        return fn(images, num_classes=classes, is_training=is_training)


def describe(name, slim_dir, points_at=None):
    """Variables and params at the default size; end points at points_at
    ((size, frames); None: the default)."""
    fn, scope_fn, size, classes, frames = net_entry(name, slim_dir)
    graph = tf.Graph()
    with graph.as_default():
        _, end_points = build(fn, scope_fn, size, frames, classes, True)
        trainable = {v.name for v in tf.trainable_variables()}
        variables = [(v.name[:-2], v.shape.as_list(), v.name in trainable)
                     for v in tf.global_variables()]
        params = sum(int(v.shape.num_elements()) for v in tf.trainable_variables())
        points = [(k, v.shape.as_list()) for k, v in end_points.items()]
    points_size, points_frames = size, frames
    if points_at and points_at != (size, frames):
        points_size, points_frames = points_at
        with tf.Graph().as_default():
            _, end_points = build(fn, scope_fn, points_size, points_frames,
                                  classes, True)
            points = [(k, v.shape.as_list()) for k, v in end_points.items()]
    return (size, classes, variables, params, points, points_size,
            points_frames)


def c_ident(name):
    return "k_" + name


def header():
    return [
        "// Net-zoo goldens from tf_slim %s on TensorFlow %s (graph mode)."
        % (getattr(slim, "__version__", "?"), tf.__version__),
        "// Generated by scripts/golden/gen_net_goldens.py; do not edit.",
        "// Regenerate from the repository root:",
        "//   " + COMMAND,
        "// Included by tests/nets/net_zoo_test.cc after the definitions of",
        "// GoldenVar, GoldenEndPoint and NetZooGolden. Shapes are TF layouts",
        "// (conv weights [kh, kw, in, out], end points NHWC), batch 2.",
        "// Nets beyond tf_slim's 16 come from TF-Slim's research/slim (--slim-dir);",
        "// their rows add the end points' image size and frame count (0: images;",
        "// video end points NDHWC, conv3d weights [kt, kh, kw, in, out]).",
        "",
    ]


def spec_of(text):
    """"net", "net@SIZE" or "net@SIZExFRAMES" -> (name, points_at or None)."""
    if "@" not in text:
        return text, POINTS_AT.get(text)
    name, rest = text.split("@")
    size, frames = parse_size(rest)
    if frames < 0:
        frames = SLIM_NETS[name][5] if name in SLIM_NETS else 0
    return name, (size, frames)


def net_lines(spec, slim_dir):
    """(definition lines, table row) of one net."""
    name, points_at = spec_of(spec)
    (size, classes, variables, params, points, points_size,
     points_frames) = describe(name, slim_dir, points_at)
    ident = c_ident(name)
    lines = ["const GoldenVar %s_vars[] = {" % ident]
    for vname, shape, trainable in variables:
        lines.append('    {"%s", {%s}, %s},' % (
            vname, ", ".join(str(d) for d in shape),
            "true" if trainable else "false"))
    lines.append("};")
    lines.append("const GoldenEndPoint %s_points[] = {" % ident)
    for key, shape in points:
        lines.append('    {"%s", {%s}},' % (key, ", ".join(str(d) for d in shape)))
    lines.append("};")
    row = '    {"%s", %d, %d, %d, %s_vars, %d, %s_points, %d' % (
        name, size, classes, params, ident, len(variables), ident, len(points))
    if name in SLIM_NETS:
        row += ", %d, %d" % (points_size, points_frames)
    print(name, params, len(variables), "variables", len(points), "end points",
          "at %dx%d" % (points_size, points_frames) if points_frames else
          "at %d" % points_size)
    return lines, row + "},"


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Writes the net-zoo goldens (variables, params, end "
        "points) of TF-Slim's nets for tests/nets/net_zoo_test.cc.")
    p.add_argument("nets", nargs="*", metavar="NET[@SIZE[xFRAMES]]",
                   help="nets to record (default: all %d); @SIZE[xFRAMES] "
                   "records the end points at that size" % (len(NETS) + len(SLIM_NETS)))
    add_common_args(p, OUT)
    return p.parse_args(argv)


def add_common_args(parser, out):
    """--slim-dir and --out (default `out`), shared with
    gen_net_logits_goldens.py."""
    parser.add_argument("--slim-dir", default=default_slim_dir(),
                        help="a copy of tensorflow/models research/slim "
                        "(default $TFSLIM_DIR, else %(default)s)")
    parser.add_argument("--out", default=out, help="the .inc to write "
                        "(default: the checked-in %s)" % os.path.relpath(out, REPO))


def check_slim_nets(slim_dir, names):
    """Exits with a clear message when a research/slim net is named and
    slim_dir lacks TF-Slim's files."""
    if any(name in SLIM_NETS for name in names):
        tfslim_compat.check_slim_dir(slim_dir, tfslim_compat.FILES)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    names = args.nets or list(NETS) + list(SLIM_NETS)
    check_slim_nets(args.slim_dir, [spec_of(n)[0] for n in names])
    lines = header()
    table = []
    for spec in names:
        rows, row = net_lines(spec, args.slim_dir)
        lines.extend(rows)
        table.append(row)
    lines.append("const NetZooGolden kNetZooGoldens[] = {")
    lines.extend(table)
    lines.append("};")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
