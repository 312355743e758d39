#!/usr/bin/env python3
"""Reads imagenet TFRecords with TF-Slim's imagenet.get_split keys.

Parses every record of <dir>/validation-* and <dir>/train-* (shards in
name order) with the keys_to_features of TF-Slim's datasets/imagenet.py,
decodes the image with tf.image.decode_jpeg, stacks the boxes as its
BoundingBox handler does, checks the decoded shape against image/height and
image/width, and prints one line per record:
  <filename> <label> <height> <width> <number of boxes>
(train first, then validation). With SOURCES, a folder holding original
files under their record's image/filename, a record whose bytes differ from
its original is compared with what build_imagenet_data's ImageCoder makes of
the original (png_to_jpeg / cmyk_to_rgb: decode, then encode_jpeg(format=
'rgb', quality=100)) and a line "reencoded <filename> same|differs" follows.
Run by tests/datasets/imagenet_test.cc:
  /opt/tfenv/bin/python scripts/golden/check_imagenet_records.py DIR [SOURCES]
"""
import glob
import os
import sys

import tensorflow as tf


def features():
  var = lambda t: tf.io.VarLenFeature(t)
  return {
      'image/encoded': tf.io.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.io.FixedLenFeature((), tf.string,
                                            default_value='jpeg'),
      'image/class/label': tf.io.FixedLenFeature([], tf.int64,
                                                 default_value=-1),
      'image/class/text': tf.io.FixedLenFeature([], tf.string,
                                                default_value=''),
      'image/object/bbox/xmin': var(tf.float32),
      'image/object/bbox/ymin': var(tf.float32),
      'image/object/bbox/xmax': var(tf.float32),
      'image/object/bbox/ymax': var(tf.float32),
      'image/object/class/label': var(tf.int64),
      # Not in get_split, read to print the record's identity.
      'image/filename': tf.io.FixedLenFeature((), tf.string),
      'image/height': tf.io.FixedLenFeature((), tf.int64),
      'image/width': tf.io.FixedLenFeature((), tf.int64),
  }


def coder_output(original):
  if original[:8] == b'\x89PNG\r\n\x1a\n':
    image = tf.image.decode_png(original, channels=3)
  else:
    image = tf.image.decode_jpeg(original, channels=0)
  return tf.image.encode_jpeg(image, format='rgb', quality=100).numpy()


def main(out_dir, sources=None):
  keys = features()
  for split in ('train', 'validation'):
    for path in sorted(glob.glob(os.path.join(out_dir, split + '-*'))):
      for raw in tf.data.TFRecordDataset(path):
        f = tf.io.parse_single_example(raw, keys)
        image = tf.image.decode_jpeg(f['image/encoded'], channels=3)
        h, w = int(f['image/height']), int(f['image/width'])
        assert image.shape == (h, w, 3), (image.shape, h, w)
        assert f['image/format'].numpy() == b'JPEG'
        sides = [tf.sparse.to_dense(f['image/object/bbox/' + k])
                 for k in ('ymin', 'xmin', 'ymax', 'xmax')]
        boxes = tf.stack(sides, axis=1)
        print('%s %d %d %d %d' % (f['image/filename'].numpy().decode(),
                                  int(f['image/class/label']), h, w,
                                  boxes.shape[0]))
        name = f['image/filename'].numpy().decode()
        original_path = os.path.join(sources or '', name)
        encoded = f['image/encoded'].numpy()
        if sources and os.path.exists(original_path):
          with open(original_path, 'rb') as fh:
            original = fh.read()
          if original != encoded:
            same = coder_output(original) == encoded
            print('reencoded %s %s' % (name, 'same' if same else 'differs'))


if __name__ == '__main__':
  main(*sys.argv[1:3])
