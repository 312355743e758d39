#!/usr/bin/env python3
"""TensorFlow's side of bench/checkpoint/checkpoint_restore.sh.

  python3 bench/checkpoint/restore_tf.py --write DIR [--model inception_v3]
      writes DIR/v2/model.ckpt-1 (V2) and DIR/v1/model.ckpt-1 (V1) of the
      tf_slim net (1001 classes, TensorFlow's initializers) with
      tf.compat.v1.train.Saver, as TF-Slim's published checkpoints were made.
  python3 bench/checkpoint/restore_tf.py --restore PREFIX [--model inception_v3]
      times Saver(slim.get_model_variables()).restore(sess, PREFIX) -- what
      TF-Slim's assign_from_checkpoint_fn runs for --checkpoint_path -- one
      untimed round, then --rounds timed ones; prints restore_ms=<median>.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts", "golden"))

from gen_net_goldens import NETS, slim, tf  # noqa: E402


def build(model, classes):
  fn, scope_fn, size, _ = NETS[model]
  images = tf.placeholder(tf.float32, [1, size, size, 3])
  with slim.arg_scope(scope_fn()):
    fn(images, num_classes=classes, is_training=False)
  return slim.get_model_variables()


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--model", default="inception_v3")
  ap.add_argument("--classes", type=int, default=1001)
  ap.add_argument("--write")
  ap.add_argument("--restore")
  ap.add_argument("--rounds", type=int, default=5)
  ap.add_argument("--threads", type=int, default=2)
  args = ap.parse_args()
  config = tf.ConfigProto(intra_op_parallelism_threads=args.threads,
                          inter_op_parallelism_threads=args.threads)
  with tf.Graph().as_default():
    variables = build(args.model, args.classes)
    with tf.Session(config=config) as sess:
      if args.write:
        sess.run(tf.global_variables_initializer())
        step = tf.train.get_or_create_global_step()
        sess.run(step.initializer)
        for name, version in (("v2", tf.train.SaverDef.V2),
                              ("v1", tf.train.SaverDef.V1)):
          os.makedirs(os.path.join(args.write, name), exist_ok=True)
          saver = tf.train.Saver(variables + [step], write_version=version)
          print(saver.save(sess, os.path.join(args.write, name, "model.ckpt"),
                           global_step=1, write_meta_graph=False))
        return
      saver = tf.train.Saver(variables)
      times = []
      for r in range(args.rounds + 1):
        t0 = time.perf_counter()
        saver.restore(sess, args.restore)
        ms = (time.perf_counter() - t0) * 1000
        if r:
          times.append(ms)
        print("round %d: %.1f ms (%d variables)" % (r, ms, len(variables)))
  times.sort()
  print("restore_ms=%.2f" % times[len(times) // 2])


if __name__ == "__main__":
  main()
