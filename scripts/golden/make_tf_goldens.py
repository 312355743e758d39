#!/usr/bin/env python3
# Writes the TensorFlow goldens used by tests/io/{tfrecord,example,
# image_codec}_test.cc into tests/golden/:
#   tf_records.tfrecord  tf.io.TFRecordWriter, records RECORDS below
#   tf_example.pb        a tf.train.Example with TF-Slim's five keys
#                        (dataset_utils.image_to_tfexample), serialized with
#                        SerializeToString(deterministic=True)
#   tf_rgb.png           tf.io.encode_png of pixel(y, x, c) below, 5x7x3
#   tf_gray.png          tf.io.encode_png of pixel(y, x, 0), 5x7x1
#   exif_orient6.jpg     a 2x4 JPEG (left half white) written by PIL with EXIF
#                        Orientation=6; tf.io.decode_jpeg ignores the tag and
#                        returns 2x4x3, so must we
#
# Run (from the repository root):
#   /opt/tfenv/bin/python scripts/golden/make_tf_goldens.py
# (/opt/tfenv: a venv with tensorflow-cpu, tf-slim and tensorboard.)
import io
import os

import numpy as np
import tensorflow as tf
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "golden")

# Mirrored by kGoldenRecords in tests/io/tfrecord_test.cc.
RECORDS = [b"", b"hello", bytes(range(256)), b"x" * 1000]


def pixel(y, x, c):
  # Mirrored by Pixel() in tests/io/image_codec_test.cc.
  return (y * 37 + x * 11 + c * 80) % 256


# research/slim/datasets/dataset_utils.py (TF-Slim), verbatim.
def int64_feature(values):
  if not isinstance(values, (tuple, list)):
    values = [values]
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def bytes_feature(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[values]))


def image_to_tfexample(image_data, image_format, height, width, class_id):
  return tf.train.Example(features=tf.train.Features(feature={
      'image/encoded': bytes_feature(image_data),
      'image/format': bytes_feature(image_format),
      'image/class/label': int64_feature(class_id),
      'image/height': int64_feature(height),
      'image/width': int64_feature(width),
  }))


def main():
  os.makedirs(OUT, exist_ok=True)
  with tf.io.TFRecordWriter(os.path.join(OUT, "tf_records.tfrecord")) as w:
    for r in RECORDS:
      w.write(r)

  h, w = 5, 7
  rgb = np.array([[[pixel(y, x, c) for c in range(3)] for x in range(w)]
                  for y in range(h)], dtype=np.uint8)
  with open(os.path.join(OUT, "tf_rgb.png"), "wb") as f:
    f.write(tf.io.encode_png(rgb).numpy())
  with open(os.path.join(OUT, "tf_gray.png"), "wb") as f:
    f.write(tf.io.encode_png(rgb[:, :, :1]).numpy())

  a = np.zeros((2, 4, 3), np.uint8)
  a[:, :2] = 255
  exif = Image.Exif()
  exif[0x0112] = 6  # Orientation: rotate 90 CW to display
  buf = io.BytesIO()
  Image.fromarray(a).save(buf, "JPEG", exif=exif.tobytes(), quality=95)
  jpeg = buf.getvalue()
  assert tuple(tf.io.decode_jpeg(jpeg, channels=3).shape) == (2, 4, 3)
  with open(os.path.join(OUT, "exif_orient6.jpg"), "wb") as f:
    f.write(jpeg)

  # Mirrored by GoldenImageExample() in tests/io/example_test.cc.
  image_data = b"\x89PNG fake \x00\xff bytes"
  ex = image_to_tfexample(image_data, b"png", 28, 32, 7)
  with open(os.path.join(OUT, "tf_example.pb"), "wb") as f:
    f.write(ex.SerializeToString(deterministic=True))

  for name in sorted(os.listdir(OUT)):
    print(name, os.path.getsize(os.path.join(OUT, name)))


if __name__ == "__main__":
  main()
