#!/usr/bin/env python3
"""Reads flowers TFRecords with TF-Slim's own decoder, as flowers.get_split
builds it: the keys_to_features of datasets/flowers.py and
tf_slim's TFExampleDecoder with its Image() and Tensor('image/class/label')
handlers. Prints one line per record of <dir>/flowers_<split>_*.tfrecord
(shards in name order):
  <label> <height> <width> <sum of the decoded pixels>
and fails if a decoded image's shape differs from image/height, image/width.
Run by tests/datasets/flowers_test.cc:
  /opt/tfenv/bin/python scripts/golden/check_flowers_records.py DIR SPLIT
"""
import glob
import os
import sys

import tensorflow as tf
from tensorflow.python.ops import control_flow_ops
from tf_slim.data import tfexample_decoder as slim_decoder

# tf_slim's decoder calls control_flow_ops.case / .cond, which newer
# TensorFlow moved to their own modules: point the old names at them.
if not hasattr(control_flow_ops, 'case'):
  from tensorflow.python.ops import control_flow_case
  control_flow_ops.case = control_flow_case.case
if not hasattr(control_flow_ops, 'cond'):
  from tensorflow.python.ops import cond as cond_module
  control_flow_ops.cond = cond_module.cond


def main(out_dir, split):
  keys_to_features = {
      'image/encoded': tf.io.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.io.FixedLenFeature((), tf.string, default_value='png'),
      'image/class/label': tf.io.FixedLenFeature(
          [], tf.int64, default_value=tf.zeros([], dtype=tf.int64)),
      # Not in get_split: read to check the decoded size.
      'image/height': tf.io.FixedLenFeature((), tf.int64),
      'image/width': tf.io.FixedLenFeature((), tf.int64),
  }
  items_to_handlers = {
      'image': slim_decoder.Image(),
      'label': slim_decoder.Tensor('image/class/label'),
      'height': slim_decoder.Tensor('image/height'),
      'width': slim_decoder.Tensor('image/width'),
  }
  decoder = slim_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)
  items = ['image', 'label', 'height', 'width']
  pattern = os.path.join(out_dir, 'flowers_%s_*.tfrecord' % split)
  for path in sorted(glob.glob(pattern)):
    for raw in tf.data.TFRecordDataset(path):
      image, label, height, width = [t.numpy() for t in decoder.decode(raw, items)]
      if image.shape != (height, width, 3):
        sys.exit('%s: decoded %s, record says %dx%d' % (path, image.shape, height, width))
      print(label, height, width, int(image.astype('int64').sum()))


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2])
