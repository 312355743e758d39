#!/usr/bin/env python3
"""Goldens for the CIFAR preprocessing ops, computed by TensorFlow (tf.image).

Records, for tests/preprocessing/cifarnet_preprocessing_test.cc:
  * ops: tf.image.per_image_standardization (one image, a batch of two, a
    constant image and an almost constant one, where max(stddev, 1/sqrt(N))
    takes the 1/sqrt(N) branch), tf.image.adjust_contrast with two factors,
    tf.image.adjust_brightness; inputs and outputs written out in full;
  * resize: tf.image.resize_image_with_crop_or_pad, the central 24x24 crop
    of a 32x32 image and a crop-one-side-pad-the-other case;
  * chains: the deterministic training chain of cifarnet_preprocessing /
    the CIFAR-10 tutorial with fixed parameters in place of the random ones:
      tf.cast(float32) -> [tf.image.rgb_to_grayscale] -> tf.pad ->
      tf.image.crop_to_bounding_box -> [tf.image.flip_left_right] ->
      tf.image.adjust_brightness -> tf.image.adjust_contrast ->
      tf.image.per_image_standardization
    Every `stride`-th value of the flat [H, W, C] output is written, with the
    float64 sum and sum of |.| of the whole output.

Chain inputs are uint8 images given by Pixel() below (mirrored in the test):
  pixel(y, x, c, seed) = (37y + 11x + 80c + 13((xy + seed) % 7) + 29 seed)
                         % 256

Regenerate from the repository root (needs tensorflow-cpu; CI never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_preprocessing_goldens.py
Writes tests/golden/preprocessing_goldens.inc.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Plain Eigen kernels, so that regenerating gives the same bits on any CPU.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "/opt/tfenv/bin/python scripts/golden/gen_preprocessing_goldens.py"
OUTPUT = os.path.join(REPO, "tests", "golden", "preprocessing_goldens.inc")


def pixel_image(h, w, c, seed):
  y, x, ch = np.meshgrid(np.arange(h), np.arange(w), np.arange(c),
                         indexing="ij")
  v = (37 * y + 11 * x + 80 * ch + 13 * ((x * y + seed) % 7) + 29 * seed)
  return (v % 256).astype(np.uint8)


def f32(a):
  return np.asarray(a, dtype=np.float32)


# (name, op, input, parameter). Inputs are [H, W, C] or [N, H, W, C].
def op_cases():
  almost_constant = np.full((4, 4, 1), 100.0, np.float32)
  almost_constant[1, 2, 0] = 100.25
  batch = np.stack([pixel_image(5, 4, 3, 1), pixel_image(5, 4, 3, 2)])
  return [
      ("standardize_pixels", "standardize", f32(pixel_image(5, 4, 3, 0)), 0),
      ("standardize_batch", "standardize", f32(batch), 0),
      ("standardize_constant", "standardize", np.full((3, 3, 2), 7.0,
                                                      np.float32), 0),
      ("standardize_almost_constant", "standardize", almost_constant, 0),
      ("contrast_0.37", "contrast", f32(pixel_image(5, 4, 3, 3)), 0.37),
      ("contrast_1.6_batch", "contrast", f32(batch), 1.6),
      ("brightness_-17.5", "brightness", f32(pixel_image(3, 2, 3, 4)), -17.5),
  ]


def run_op(op, x, param):
  if op == "standardize":
    return tf.image.per_image_standardization(x).numpy()
  if op == "contrast":
    return tf.image.adjust_contrast(x, param).numpy()
  return tf.image.adjust_brightness(x, param).numpy()


# (name, h, w, seed, target_h, target_w)
RESIZE_CASES = [
    ("central_crop_32_to_24", 32, 32, 5, 24, 24),
    ("crop_h_pad_w", 5, 4, 6, 3, 7),
]

# (name, h, w, seed, padding, out_h, out_w, crop_y, crop_x, flip, delta,
#  factor, grayscale, stride)
CHAIN_CASES = [
    ("cifarnet_32", 32, 32, 7, 4, 32, 32, 1, 6, True, 20.5, 1.3, False, 7),
    ("cifarnet_32_corner", 32, 32, 8, 4, 32, 32, 8, 8, False, -62.75, 0.2,
     False, 7),
    ("tutorial_24", 32, 32, 9, 0, 24, 24, 8, 0, False, -40.25, 0.45, False,
     5),
    ("small_gray_flip", 9, 7, 10, 4, 9, 7, 0, 8, True, -3.0, 1.75, True, 1),
]


def run_chain(h, w, seed, padding, out_h, out_w, crop_y, crop_x, flip, delta,
              factor, grayscale):
  x = tf.cast(tf.constant(pixel_image(h, w, 3, seed)), tf.float32)
  if grayscale:
    x = tf.image.rgb_to_grayscale(x)
  x = tf.pad(x, [[padding, padding], [padding, padding], [0, 0]])
  x = tf.image.crop_to_bounding_box(x, crop_y, crop_x, out_h, out_w)
  if flip:
    x = tf.image.flip_left_right(x)
  x = tf.image.adjust_brightness(x, delta)
  x = tf.image.adjust_contrast(x, factor)
  return tf.image.per_image_standardization(x).numpy()


def c_num(x, digits=9):
  return "%.*g" % (digits, float(x))


def c_array(name, values, per_line=5):
  values = [c_num(v) for v in np.asarray(values).reshape(-1)]
  lines = ["constexpr float %s[] = {" % name]
  for i in range(0, len(values), per_line):
    lines.append("    " + ", ".join(values[i:i + per_line]) + ",")
  lines.append("};")
  return lines


def c_bool(b):
  return "true" if b else "false"


def write_lines(path, lines):
  with open(path, "w") as fh:
    fh.write("\n".join(lines))
  print("wrote %s (%d bytes)" % (path, os.path.getsize(path)),
        file=sys.stderr)


def main():
  out = [
      "// Preprocessing goldens computed by TensorFlow %s (tf.image, float32,"
      " eager)." % tf.__version__,
      "// Generated by scripts/golden/gen_preprocessing_goldens.py; do not "
      "edit.",
      "// Regenerate from the repository root:",
      "//   " + COMMAND,
      "",
      "// Included by tests/preprocessing/cifarnet_preprocessing_test.cc after",
      "// the definitions of OpGolden, ResizeGolden and ChainGolden; chain and",
      "// resize inputs are Pixel(y, x, c, seed) images (see the script).",
      "",
  ]
  rows = []
  for i, (name, op, x, param) in enumerate(op_cases()):
    y = run_op(op, x, param)
    shape = list(x.shape) if x.ndim == 4 else [0] + list(x.shape)
    out += c_array("kOpInput%d" % i, x) + c_array("kOpOutput%d" % i, y)
    rows.append('    {"%s", "%s", {%s}, %s, kOpInput%d, kOpOutput%d, %d},' %
                (name, op, ", ".join(str(d) for d in shape), c_num(param), i,
                 i, y.size))
  out += ["", "// {name, op, {N (0: one image), H, W, C}, parameter, input,",
          "//  output, values}", "const OpGolden kOpGoldens[] = {"]
  out += rows + ["};", ""]

  rows = []
  for i, (name, h, w, seed, th, tw) in enumerate(RESIZE_CASES):
    y = tf.image.resize_with_crop_or_pad(pixel_image(h, w, 3, seed), th,
                                         tw).numpy()
    out += c_array("kResizeOutput%d" % i, y, per_line=12)
    rows.append('    {"%s", %d, %d, %d, %d, %d, kResizeOutput%d},' %
                (name, h, w, seed, th, tw, i))
  out += ["", "// {name, H, W, seed, target H, target W, output [H', W', 3]}",
          "const ResizeGolden kResizeGoldens[] = {"]
  out += rows + ["};", ""]

  rows = []
  for i, case in enumerate(CHAIN_CASES):
    (name, h, w, seed, padding, out_h, out_w, crop_y, crop_x, flip, delta,
     factor, gray, stride) = case
    y = run_chain(h, w, seed, padding, out_h, out_w, crop_y, crop_x, flip,
                  delta, factor, gray)
    flat = y.reshape(-1)
    sampled = flat[::stride]
    out += c_array("kChainOutput%d" % i, sampled)
    a = flat.astype(np.float64)
    rows.append(
        '    {"%s", %d, %d, %d, %d, %d, %d, %d, %d, %s, %s, %s, %s, %d, '
        "kChainOutput%d, %d, %s, %s}," %
        (name, h, w, seed, padding, out_h, out_w, crop_y, crop_x, c_bool(flip),
         c_num(delta), c_num(factor), c_bool(gray), stride, i, sampled.size,
         c_num(a.sum(), 17), c_num(np.abs(a).sum(), 17)))
    print("%-20s mean %.3g std %.3g" % (name, flat.mean(), flat.std()),
          file=sys.stderr)
  out += [
      "",
      "// {name, H, W, seed, padding, out H, out W, crop y, crop x, flip,",
      "//  brightness delta, contrast factor, grayscale, stride, every",
      "//  stride-th value of the flat [out H, out W, C'] output, their count,",
      "//  float64 sum and sum of |.| of the whole output}",
      "const ChainGolden kChainGoldens[] = {",
  ]
  out += rows + ["};", ""]
  write_lines(OUTPUT, out)


if __name__ == "__main__":
  main()
