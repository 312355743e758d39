#!/usr/bin/env python3
"""Goldens for inception_preprocessing and vgg_preprocessing, computed by
TensorFlow (tf.image, TF1 legacy resize semantics).

Records, for tests/preprocessing/{inception,vgg}_preprocessing_test.cc:
  * saturation: tf.image.adjust_saturation on small float images with values
    in and outside [0, 1] (as after random_brightness), in full;
  * resize: tf.compat.v1.image.resize_bilinear(align_corners=False), i.e.
    half_pixel_centers=False, up and down, in full;
  * central_crop: the window tf.image.central_crop(0.875) keeps, for
    several sizes (read back from an image whose values are y * W + x);
  * vgg_sizes: vgg_preprocessing._smallest_size_at_least in float32;
  * box_stats: mean and standard deviation of the height, width, y and x of
    tf.image.stateless_sample_distorted_bounding_box (the kernel of
    sample_distorted_bounding_box, with a given seed) with
    inception_preprocessing's arguments (whole-image box,
    min_object_covered 0.1, aspect (0.75, 1.33), area (0.05, 1.0), 100
    attempts), and how often it fell back to the whole image, over many
    draws (the C++ sampler must match the
    distribution, not the bits);
  * chains: TF-Slim's eval chains, and the training chains with fixed values
    in place of the random ones:
      inception eval: convert_image_dtype(float32) -> [rgb_to_grayscale] ->
        central_crop(0.875) -> resize_bilinear -> (x - 0.5) * 2
      inception train: convert_image_dtype -> tf.slice(crop box) ->
        resize_bilinear -> [flip_left_right] -> adjust_brightness ->
        adjust_saturation -> clip [0, 1] -> [rgb_to_grayscale] ->
        (x - 0.5) * 2
      vgg eval: resize_bilinear to _smallest_size_at_least(256) ->
        central crop -> to_float -> [rgb_to_grayscale] -> subtract means
      vgg train: the same with the resize side and crop offsets given, and
        [flip_left_right] after the grayscale.
    Every `stride`-th value of the flat [H, W, C] output is written, with the
    float64 sum and sum of |.| of the whole output.
    Where TF-Slim itself rejects the input, the chain is TF's ops with
    slimtorch's documented choice (see the headers): a 1-channel image skips
    adjust_saturation (the identity for R = G = B), and vgg subtracts the
    grayscale of the RGB means from a single channel.

Inputs are uint8 images given by Pixel() (pixel_image in
gen_preprocessing_goldens.py, mirrored in the tests).

Regenerate from the repository root (needs tensorflow-cpu; CI never runs it):
  python3 scripts/golden/gen_inception_vgg_preprocessing_goldens.py
Writes tests/golden/inception_vgg_preprocessing_goldens.inc.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Plain Eigen kernels, so that regenerating gives the same bits on any CPU.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_preprocessing_goldens import c_array, c_bool, c_num  # noqa: E402
from gen_preprocessing_goldens import pixel_image, write_lines  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "python3 scripts/golden/gen_inception_vgg_preprocessing_goldens.py"
OUTPUT = os.path.join(REPO, "tests", "golden",
                      "inception_vgg_preprocessing_goldens.inc")

VGG_MEANS = [123.68, 116.78, 103.94]
GRAY_WEIGHTS = [0.2989, 0.5870, 0.1140]
BOX_DRAWS = 4000


def resize_legacy(x, h, w):
  return tf.squeeze(
      tf.compat.v1.image.resize_bilinear(tf.expand_dims(x, 0), [h, w],
                                         align_corners=False), [0])


def saturation_input(h, w, seed):
  """Floats in [-0.2, 1.2) with gray, black and tied-maximum pixels."""
  x = pixel_image(h, w, 3, seed).astype(np.float32) / 255.0 * 1.4 - 0.2
  x[0, 0] = [0.5, 0.5, 0.5]
  x[0, 1] = [0.0, 0.0, 0.0]
  x[1, 0] = [0.7, 0.7, 0.2]
  x[1, 1] = [0.3, 0.9, 0.9]
  x[2, 0] = [0.9, 0.1, 0.9]
  x[2, 1] = [-0.1, -0.2, -0.05]
  return x.astype(np.float32)


# (name, h, w, seed, factor)
SATURATION_CASES = [
    ("sat_0.5", 6, 5, 1, 0.5),
    ("sat_1.37", 6, 5, 2, 1.37),
    ("sat_1.0", 4, 3, 3, 1.0),
]

# (name, h, w, c, seed, out_h, out_w)
RESIZE_CASES = [
    ("up_7x5_to_11x13", 7, 5, 3, 4, 11, 13),
    ("down_37x53_to_16x9", 37, 53, 3, 5, 16, 9),
    ("gray_4x6_to_9x4", 4, 6, 1, 6, 9, 4),
]

CENTRAL_CROP_SIZES = [(37, 53), (300, 200), (7, 9), (1, 1), (8, 8), (2, 3),
                      (299, 299), (481, 640)]

# (h, w, side)
VGG_SIZE_CASES = [(37, 53, 256), (300, 200, 256), (333, 500, 300),
                  (500, 333, 511), (1, 1000, 256), (256, 256, 256),
                  (57, 41, 512), (375, 500, 384)]

BOX_SIZES = [(300, 200), (37, 53), (5, 7)]

# Inception eval: (name, h, w, c, seed, out_h, out_w, grayscale, stride)
INCEPTION_EVAL = [
    ("incep_eval_37x53", 37, 53, 3, 7, 29, 31, False, 7),
    ("incep_eval_300x200", 300, 200, 3, 8, 224, 224, False, 997),
    ("incep_eval_gray_input", 45, 31, 1, 9, 20, 24, False, 3),
    ("incep_eval_grayscale", 37, 53, 3, 10, 29, 31, True, 5),
]

# Inception train: (name, h, w, c, seed, out_h, out_w, crop (y, x, h, w),
#  flip, brightness delta, saturation factor, grayscale, stride)
INCEPTION_TRAIN = [
    ("incep_train_300x200", 300, 200, 3, 11, 224, 224, (20, 13, 150, 171),
     True, 0.09, 1.37, False, 997),
    ("incep_train_whole", 37, 53, 3, 12, 29, 31, (0, 0, 37, 53), False,
     -0.12, 0.55, False, 7),
    ("incep_train_grayscale", 37, 53, 3, 13, 16, 20, (3, 5, 30, 40), True,
     0.03, 1.49, True, 3),
    ("incep_train_gray_input", 45, 31, 1, 14, 20, 24, (2, 1, 40, 25), True,
     -0.05, 0.8, False, 3),
]

# VGG eval: (name, h, w, c, seed, out_h, out_w, grayscale, stride)
VGG_EVAL = [
    ("vgg_eval_37x53", 37, 53, 3, 15, 224, 224, False, 997),
    ("vgg_eval_300x200", 300, 200, 3, 16, 224, 224, False, 997),
    ("vgg_eval_gray_input", 45, 31, 1, 17, 100, 120, False, 97),
    ("vgg_eval_grayscale", 300, 200, 3, 18, 224, 200, True, 499),
]

# VGG train: (name, h, w, c, seed, out_h, out_w, resize side, crop y,
#  crop x, flip, grayscale, stride)
VGG_TRAIN = [
    ("vgg_train_300x200", 300, 200, 3, 19, 224, 224, 300, 71, 30, True,
     False, 997),
    ("vgg_train_37x53", 37, 53, 3, 20, 224, 224, 512, 0, 509, False, False,
     997),
    ("vgg_train_grayscale", 300, 200, 3, 21, 100, 150, 256, 284, 1, True,
     True, 97),
    ("vgg_train_gray_input", 45, 31, 1, 22, 64, 48, 257, 309, 208, False,
     False, 31),
]


def gray(x):
  return tf.image.rgb_to_grayscale(x)


def inception_eval(img, out_h, out_w, grayscale):
  x = tf.image.convert_image_dtype(tf.constant(img), tf.float32)
  if grayscale:
    x = gray(x)
  x = tf.image.central_crop(x, central_fraction=0.875)
  x = resize_legacy(x, out_h, out_w)
  return (x - 0.5) * 2.0


def inception_train(img, out_h, out_w, crop, flip, delta, factor, grayscale):
  x = tf.image.convert_image_dtype(tf.constant(img), tf.float32)
  y0, x0, h, w = crop
  x = tf.slice(x, [y0, x0, 0], [h, w, -1])
  x = resize_legacy(x, out_h, out_w)
  if flip:
    x = tf.image.flip_left_right(x)
  x = tf.image.adjust_brightness(x, delta)
  if x.shape[-1] == 3:
    x = tf.image.adjust_saturation(x, factor)
  x = tf.clip_by_value(x, 0.0, 1.0)
  if grayscale:
    x = gray(x)
  return (x - 0.5) * 2.0


def smallest_size_at_least(height, width, smallest_side):
  """vgg_preprocessing._smallest_size_at_least."""
  height = tf.cast(height, tf.float32)
  width = tf.cast(width, tf.float32)
  side = tf.cast(smallest_side, tf.float32)
  scale = tf.cond(tf.greater(height, width), lambda: side / width,
                  lambda: side / height)
  return (int(tf.cast(tf.math.rint(height * scale), tf.int32)),
          int(tf.cast(tf.math.rint(width * scale), tf.int32)))


def subtract_means(x):
  if x.shape[-1] == 1:
    gray_mean = sum(np.float32(a) * np.float32(b)
                    for a, b in zip(GRAY_WEIGHTS, VGG_MEANS))
    return x - np.float32(gray_mean)
  return x - tf.constant(VGG_MEANS, tf.float32)


def vgg_chain(img, out_h, out_w, side, crop_y, crop_x, flip, grayscale):
  """Crop at (crop_y, crop_x); None: the central crop (eval)."""
  h, w = img.shape[:2]
  new_h, new_w = smallest_size_at_least(h, w, side)
  x = resize_legacy(tf.constant(img), new_h, new_w)
  if crop_y is None:
    crop_y, crop_x = (new_h - out_h) // 2, (new_w - out_w) // 2
  x = tf.slice(x, [crop_y, crop_x, 0], [out_h, out_w, -1])
  x = tf.cast(x, tf.float32)
  if grayscale:
    x = gray(x)
  if flip:
    x = tf.image.flip_left_right(x)
  return subtract_means(x)


def box_stats(h, w):
  bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4])

  # The stateless op runs the same kernel with a given seed, so that
  # regenerating writes the same numbers.
  @tf.function
  def draw(seed):
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        [h, w, 3], bounding_boxes=bbox, seed=seed, min_object_covered=0.1,
        aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
        max_attempts=100, use_image_if_no_bounding_boxes=True)
    return begin, size

  rows = []
  for i in range(BOX_DRAWS):
    begin, size = draw(tf.constant([i, h * 1000 + w], tf.int64))
    rows.append([size[0], size[1], begin[0], begin[1]])
  a = np.array(rows, np.float64)
  full = np.mean((a[:, 0] == h) & (a[:, 1] == w))
  return a.mean(axis=0), a.std(axis=0), full


def sampled(y, stride):
  flat = np.asarray(y, np.float32).reshape(-1)
  a = flat.astype(np.float64)
  return flat[::stride], a.sum(), np.abs(a).sum()


def main():
  out = [
      "// inception/vgg preprocessing goldens computed by TensorFlow %s "
      "(tf.image," % tf.__version__,
      "// float32, eager, legacy resize_bilinear).",
      "// Generated by scripts/golden/gen_inception_vgg_preprocessing_"
      "goldens.py;",
      "// do not edit. Regenerate from the repository root:",
      "//   " + COMMAND,
      "",
      "// Included by tests/preprocessing/inception_preprocessing_test.cc and",
      "// vgg_preprocessing_test.cc after the definitions of the *Golden",
      "// structs; images are Pixel(y, x, c, seed) (see the script).",
      "",
  ]

  rows = []
  for i, (name, h, w, seed, factor) in enumerate(SATURATION_CASES):
    x = saturation_input(h, w, seed)
    y = tf.image.adjust_saturation(x, factor).numpy()
    out += c_array("kSatInput%d" % i, x) + c_array("kSatOutput%d" % i, y)
    rows.append('    {"%s", %d, %d, %s, kSatInput%d, kSatOutput%d},' %
                (name, h, w, c_num(factor), i, i))
  out += ["", "// {name, H, W, factor, input [H, W, 3], output}",
          "const SaturationGolden kSaturationGoldens[] = {"]
  out += rows + ["};", ""]

  rows = []
  for i, (name, h, w, c, seed, oh, ow) in enumerate(RESIZE_CASES):
    y = resize_legacy(tf.constant(pixel_image(h, w, c, seed)), oh, ow)
    out += c_array("kResizeOutput%d" % i, y.numpy())
    rows.append('    {"%s", %d, %d, %d, %d, %d, %d, kResizeOutput%d},' %
                (name, h, w, c, seed, oh, ow, i))
  out += ["", "// {name, H, W, C, seed, out H, out W, output}",
          "const ResizeBilinearGolden kResizeBilinearGoldens[] = {"]
  out += rows + ["};", ""]

  rows = []
  for h, w in CENTRAL_CROP_SIZES:
    img = np.arange(h * w, dtype=np.int32).reshape(h, w, 1)
    crop = tf.image.central_crop(tf.constant(img), 0.875).numpy()
    first = int(crop[0, 0, 0])
    rows.append("    {%d, %d, %d, %d, %d, %d}," %
                (h, w, first // w, first % w, crop.shape[0], crop.shape[1]))
  out += ["// {H, W, y, x, height, width} of central_crop(0.875)",
          "const CentralCropGolden kCentralCropGoldens[] = {"]
  out += rows + ["};", ""]

  rows = []
  for h, w, side in VGG_SIZE_CASES:
    nh, nw = smallest_size_at_least(h, w, side)
    rows.append("    {%d, %d, %d, %d, %d}," % (h, w, side, nh, nw))
  out += ["// {H, W, smallest side, resized H, resized W}",
          "const VggSizeGolden kVggSizeGoldens[] = {"]
  out += rows + ["};", ""]

  rows = []
  for h, w in BOX_SIZES:
    mean, std, full = box_stats(h, w)
    rows.append("    {%d, %d, %d, {%s}, {%s}, %s}," %
                (h, w, BOX_DRAWS, ", ".join(c_num(v) for v in mean),
                 ", ".join(c_num(v) for v in std), c_num(full)))
    print("box %dx%d mean %s std %s full %.4f" % (h, w, mean, std, full),
          file=sys.stderr)
  out += ["// {H, W, draws, mean and std of {height, width, y, x}, fraction",
          "//  of whole-image boxes}",
          "const BoxStatsGolden kBoxStatsGoldens[] = {"]
  out += rows + ["};", ""]

  def chain_rows(prefix, cases, run, fields):
    """Rows of one chain table; the output as a SampledOutput."""
    lines, entries = [], []
    for i, case in enumerate(cases):
      name, h, w, c, seed = case[:5]
      stride = case[-1]
      y = run(pixel_image(h, w, c, seed), *case[5:-1])
      values, total, abs_total = sampled(y, stride)
      lines += c_array("k%sOutput%d" % (prefix, i), values)
      entries.append('    {"%s", %d, %d, %d, %d, %s, {%d, k%sOutput%d, %d, '
                     "%s, %s}}," % (name, h, w, c, seed, fields(case[5:-1]),
                                   stride, prefix, i, values.size,
                                   c_num(total, 17), c_num(abs_total, 17)))
      print("%-24s mean %.4g" % (name, total / np.asarray(y).size),
            file=sys.stderr)
    return lines, entries

  def bools_and_numbers(values):
    return ", ".join(c_bool(v) if isinstance(v, bool) else
                     "{%s}" % ", ".join(str(t) for t in v)
                     if isinstance(v, tuple) else c_num(v) for v in values)

  # (prefix, cases, chain, row type, row comment)
  chains = [
      ("InceptionEval", INCEPTION_EVAL,
       lambda img, oh, ow, g: inception_eval(img, oh, ow, g),
       "EvalGolden", "{name, H, W, C, seed, out H, out W, grayscale"),
      ("InceptionTrain", INCEPTION_TRAIN, inception_train,
       "InceptionTrainGolden",
       "{name, H, W, C, seed, out H, out W, crop {y, x, h, w}, flip, delta,"
       "\n//  saturation, grayscale"),
      ("VggEval", VGG_EVAL,
       lambda img, oh, ow, g: vgg_chain(img, oh, ow, 256, None, None, False,
                                        g),
       "EvalGolden", "{name, H, W, C, seed, out H, out W, grayscale"),
      ("VggTrain", VGG_TRAIN, vgg_chain, "VggTrainGolden",
       "{name, H, W, C, seed, out H, out W, resize side, crop y, crop x,\n"
       "//  flip, grayscale"),
  ]
  for prefix, cases, run, row_type, doc in chains:
    lines, entries = chain_rows(prefix, cases, run, bools_and_numbers)
    out += lines
    out += ["", "// " + doc + ", {stride, every stride-th value",
            "//  of the flat [out H, out W, C'] output, their count, float64",
            "//  sum and sum of |.| of the whole output}}",
            "const %s k%sGoldens[] = {" % (row_type, prefix)]
    out += entries + ["};", ""]

  write_lines(OUTPUT, out)


if __name__ == "__main__":
  main()
