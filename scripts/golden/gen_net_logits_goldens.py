#!/usr/bin/env python3
"""Logits of TF-Slim's nets for weights drawn by a formula, from TensorFlow.

Usage (a net's own worktree checks its rows; --help lists the flags):
  cd /work/wt-goldens && /opt/tfenv/bin/python scripts/golden/gen_net_logits_goldens.py \\
      --out /work/wt-X/tests/golden/net_logits_goldens.inc nasnet_mobile pnasnet_large@64
then build there and run `tests/slimtorch_tests --gtest_filter='*NetLogitsTest*'`.
Don't commit that partial .inc: the goldens branch commits the full one.

For each net named below, builds it in inference mode (is_training=False)
under its arg scope (as nets_factory does), batch 2, at its default image
size or the one named, loads every variable with the deterministic fill of
gen_lenet_goldens.py (over TensorFlow's flat index, in TensorFlow's layout),
and records the logits and the float64 sum and sum of |.| of every end
point, for tests/nets/net_logits_test.cc. A net loaded with the same fills
must give the same logits: that proves variable names, layouts, padding and
batch-norm semantics at once, without shipping the weights. The nets of
tf_slim come from the pip package; MobileNet v3 / EdgeTPU, NASNet, PNASNet,
I3D and S3D-G from a copy of tensorflow/models research/slim (--slim-dir, as
gen_net_goldens.py). The video nets take clips [2, FRAMES, SIZE, SIZE, 3]
("i3d@112x16"); their rows add the frame count.

Fills (written into the .inc per variable, mirrored by the test):
  * variable i of tf.global_variables() (in order) uses stream i + 1; the
    input images use stream 0, scale 1;
  * weights (rank >= 2): scale = the power of two at or below
    sqrt(6 / fan_in), fan_in = the product of all dimensions but the last
    (He-uniform variance, so activations keep their size through deep nets);
    for the research/slim nets a depthwise kernel's fan_in is its window
    kh * kw (NASNet's stacks of separable convs would fade otherwise);
  * biases, batch-norm beta and moving_mean: scale 1/16;
  * batch-norm gamma and moving_variance ("positive" kind): 0.5 + |fill|
    with scale 1/2, i.e. values in [0.5, 1], exact in float32.

Sizes of the default list are small enough for CI's 2 cores and still take
every cell and reduction path: nasnet_large at 96 and pnasnet_large at 64
(odd maps after conv0's VALID 3x3: 47 and 31), i3d 16 frames of 112x112,
s3dg 8 frames of 96x96 (the logits' pool shrinks to [1, 3, 3]),
mobilenet_v3_small also at 128 (reduce_to_1x1 over a 4x4 map).

Regenerate the checked-in file from the repository root (needs
tensorflow-cpu 2.21, tf-slim, tf_keras; CI never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_net_logits_goldens.py
Writes tests/golden/net_logits_goldens.inc (or --out).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Plain Eigen kernels, so that regenerating gives the same bits on any CPU.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402

import numpy as np  # noqa: E402

from logits_golden_writer import fill_for, net_rows, value  # noqa: E402
# The net tables (and the tf_keras workaround) are the zoo generator's.
from gen_net_goldens import (SLIM_NETS, add_common_args,  # noqa: E402
                             check_slim_nets, net_entry, parse_size, slim, tf)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "python3 scripts/golden/gen_net_logits_goldens.py"
OUT = os.path.join(REPO, "tests", "golden", "net_logits_goldens.inc")
# The nets of tests/golden/net_logits_goldens.inc.
DEFAULT_NETS = ["vgg_16", "alexnet_v2", "overfeat", "inception_v1",
                "inception_v2", "inception_v3", "resnet_v1_50", "resnet_v2_50",
                # tf_slim's nets take global_pool only in resnet (the later
                # research/slim versions added it to the others).
                "resnet_v1_50@32-gp", "inception_v3@160",
                # research/slim's (--slim-dir).
                "mobilenet_v3_large", "mobilenet_v3_small",
                "mobilenet_v3_large_minimalistic",
                "mobilenet_v3_small_minimalistic", "mobilenet_v3_small@128",
                "mobilenet_edgetpu", "mobilenet_edgetpu_075",
                "nasnet_cifar", "nasnet_mobile", "nasnet_large@96",
                "pnasnet_mobile", "pnasnet_large@64",
                "i3d@112x16", "s3dg@96x8"]
BATCH = 2


def parse(spec):
    """"net", "net@size+gp" / "net@size-gp" (a size other than the default
    and global_pool=True / False; -1 = the net's default) or, for the video
    nets, "net@SIZExFRAMES". Returns (name, size or 0, global_pool, frames
    or -1)."""
    name, size, global_pool, frames = spec, 0, -1, -1
    if "@" in spec:
        name, rest = spec.split("@")
        for sign, flag in (("+gp", 1), ("-gp", 0)):
            if rest.endswith(sign):
                rest, global_pool = rest[:-len(sign)], flag
        size, frames = parse_size(rest)
    return name, size, global_pool, frames


def run(spec, slim_dir):
    name, size, global_pool, frames = parse(spec)
    fn, scope_fn, default_size, classes, default_frames = net_entry(name, slim_dir)
    size = size or default_size
    frames = default_frames if frames < 0 else frames
    kwargs = {} if global_pool < 0 else {"global_pool": bool(global_pool)}
    shape = ([BATCH, frames, size, size, 3] if frames else [BATCH, size, size, 3])
    graph = tf.Graph()
    with graph.as_default():
        images = tf.constant(value(shape, 0, 1.0, False))
        with slim.arg_scope(scope_fn()):
            logits, end_points = fn(images, num_classes=classes,
                                    is_training=False, **kwargs)
        fills, feeds = [], {}
        for i, v in enumerate(tf.global_variables()):
            vname = v.name[:-2]
            vshape = v.shape.as_list()
            stream, scale, positive = fill_for(
                i, vname, vshape, depthwise_window=name in SLIM_NETS)
            fills.append((vname, stream, scale, positive, vshape))
            # What Variable.load feeds, for all variables in one run (a run
            # per variable prunes NASNet's graph a thousand times).
            feeds[v.initializer.inputs[1]] = value(vshape, stream, scale,
                                                   positive)
        with tf.Session() as sess:
            sess.run([v.initializer for v in tf.global_variables()], feeds)
            out, eps = sess.run([logits, end_points])
    return name, size, global_pool, classes, frames, fills, out, eps


def c_ident(spec):
    return "k_" + (spec.replace("@", "_").replace("+", "p").replace("-", "m"))


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Writes the logits goldens (formula-filled weights, "
        "inference mode) of TF-Slim's nets for tests/nets/net_logits_test.cc.")
    p.add_argument("nets", nargs="*", metavar="NET[@SIZE[xFRAMES][+gp|-gp]]",
                   help="nets to record (default: the %d of the checked-in "
                   ".inc)" % len(DEFAULT_NETS))
    add_common_args(p, OUT)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    names = args.nets or DEFAULT_NETS
    check_slim_nets(args.slim_dir, [parse(n)[0] for n in names])
    lines = [
        "// Logits of tf_slim nets (TensorFlow %s) for formula-filled weights."
        % tf.__version__,
        "// Generated by scripts/golden/gen_net_logits_goldens.py; do not edit.",
        "// Regenerate from the repository root:",
        "//   " + COMMAND,
        "// Included by tests/nets/net_logits_test.cc after the definitions of",
        "// LogitsFill, LogitsSums and NetLogitsGolden.",
        "// Nets beyond tf_slim's come from TF-Slim's research/slim (--slim-dir);",
        "// their rows add the clip's frame count (0: images).",
        "",
    ]
    table = []
    for spec in names:
        name, size, global_pool, classes, frames, fills, out, eps = run(
            spec, args.slim_dir)
        rows, row = net_rows(c_ident(spec), name, size, classes, fills, out,
                             eps, global_pool,
                             frames=frames if name in SLIM_NETS else None)
        lines.extend(rows)
        table.append(row)
        print(spec, "logits |max| %.4g" % np.abs(out).max(),
              "std %.4g" % out.std(), len(fills), "variables")
    lines.append("const NetLogitsGolden kNetLogitsGoldens[] = {")
    lines.extend(table)
    lines.append("};")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
