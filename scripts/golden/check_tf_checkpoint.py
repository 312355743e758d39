#!/usr/bin/env python3
"""Reads a checkpoint with TensorFlow, as a TensorFlow user would.

Prints one line per tensor, in name order, of what tf.train.load_checkpoint
returns:  <name> <dtype> <shape> <CRC-32 of its little-endian bytes>
then restores every float variable into a graph through tf_slim's
assign_from_checkpoint_fn (what TF-Slim's train_image_classifier runs for
--checkpoint_path) and checks the values equal get_tensor's. Run by
tests/io/tf_checkpoint_golden_test.cc:
  /opt/tfenv/bin/python scripts/golden/check_tf_checkpoint.py PREFIX
"""
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_slim as slim  # noqa: E402


def main(prefix):
  reader = tf.train.load_checkpoint(prefix)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  values = {}
  for name in sorted(shapes):
    v = np.ascontiguousarray(reader.get_tensor(name))
    values[name] = v
    print(name, dtypes[name].name, "x".join(map(str, shapes[name])) or "-",
          zlib.crc32(v.astype(v.dtype.newbyteorder("<")).tobytes()))
  with tf.Graph().as_default():
    variables = [
        tf.compat.v1.get_variable(n, shape=shapes[n], dtype=tf.float32,
                                  initializer=tf.zeros_initializer())
        for n in sorted(shapes) if dtypes[n] == tf.float32]
    init = slim.assign_from_checkpoint_fn(prefix, variables)
    with tf.compat.v1.Session() as sess:
      init(sess)
      for v in variables:
        if not np.array_equal(sess.run(v), values[v.op.name]):
          sys.exit("assign_from_checkpoint_fn restored %s differently" %
                   v.op.name)


if __name__ == "__main__":
  main(sys.argv[1])
