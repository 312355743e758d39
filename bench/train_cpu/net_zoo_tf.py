#!/usr/bin/env python3
"""TF-Slim's side of bench/train_cpu/net_zoo_cpu.sh: one training step of a TF-Slim
net (forward, softmax cross entropy + 0.4 x the aux logits' where the net has
them, + the arg scope's L2 terms, backward, plain SGD update) on one random
batch, timed after warm-up, on CPU with 2 intra-op and 1 inter-op threads.
--precision=bf16 turns on TensorFlow's oneDNN bfloat16 auto mixed precision
(grappler's auto_mixed_precision_onednn_bfloat16: variables stay float32).

  python3 bench/train_cpu/net_zoo_tf.py --model inception_v3 --batch 8 --steps 3
The nets tf_slim ships come from the pip package; MobileNet v3 / EdgeTPU,
NASNet and PNASNet from TF-Slim's own files in a copy of tensorflow/models
research/slim (--slim-dir, default $TFSLIM_DIR else
/work/tfslim/research/slim; see scripts/golden/tfslim_compat.py), with
nets_factory's builders and arg scopes (I3D / S3D-G take clips: not here).
Prints: tf_slim model=<name> batch=<n> image_size=<px> ms_per_step=<f>
        images_per_sec=<f>
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts", "golden"))

import numpy as np  # noqa: E402

# The net tables, with the tf_keras workaround for slim.batch_norm.
from gen_net_goldens import (NETS, SLIM_NETS, default_slim_dir,  # noqa: E402
                             net_entry, slim, tf)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--model", required=True)
  ap.add_argument("--batch", type=int, default=8)
  ap.add_argument("--steps", type=int, default=3)
  ap.add_argument("--warmup", type=int, default=1)
  ap.add_argument("--classes", type=int, default=10)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
  ap.add_argument("--slim-dir", default=default_slim_dir(),
                  help="a copy of tensorflow/models research/slim, for the "
                  "nets tf_slim lacks")
  args = ap.parse_args()
  if args.model not in NETS and args.model not in SLIM_NETS:
    sys.exit("unknown model %s" % args.model)
  fn, scope_fn, size, _, frames = net_entry(args.model, args.slim_dir)
  if frames:
    sys.exit("%s takes clips: not an image net" % args.model)
  graph = tf.Graph()
  with graph.as_default():
    rng = np.random.RandomState(0)
    images = tf.constant(rng.randn(args.batch, size, size, 3).astype(np.float32))
    labels = tf.constant(rng.randint(0, args.classes, args.batch))
    with slim.arg_scope(scope_fn(weight_decay=0.00004)):
      logits, end_points = fn(images, num_classes=args.classes,
                              is_training=True)
    if len(logits.shape) == 4:
      logits = tf.squeeze(logits, [1, 2])
    onehot = tf.one_hot(labels, args.classes)
    loss = tf.losses.softmax_cross_entropy(onehot, logits)
    if "AuxLogits" in end_points:
      aux = end_points["AuxLogits"]
      if len(aux.shape) == 4:
        aux = tf.squeeze(aux, [1, 2])
      loss += tf.losses.softmax_cross_entropy(onehot, aux, weights=0.4)
    loss += tf.add_n(tf.losses.get_regularization_losses() or [tf.constant(0.0)])
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(updates):
      train = tf.train.GradientDescentOptimizer(0.001).minimize(loss)
    config = tf.ConfigProto(intra_op_parallelism_threads=args.threads,
                            inter_op_parallelism_threads=1)
    if args.precision == "bf16":
      from tensorflow.core.protobuf import rewriter_config_pb2
      config.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 = (
          rewriter_config_pb2.RewriterConfig.ON)
    with tf.Session(config=config) as sess:
      sess.run(tf.global_variables_initializer())
      for _ in range(args.warmup):
        sess.run([train, loss])
      t0 = time.perf_counter()
      for _ in range(args.steps):
        sess.run([train, loss])
      ms = (time.perf_counter() - t0) * 1000 / args.steps
  print("tf_slim model=%s batch=%d image_size=%d precision=%s "
        "ms_per_step=%.1f images_per_sec=%.2f" % (
            args.model, args.batch, size, args.precision, ms,
            args.batch * 1000 / ms))


if __name__ == "__main__":
  main()
