#pragma once
// TensorFlow's tf.image ops, as the preprocessing functions use them.
//
// Unless an op says otherwise it takes one [H, W, C] image or an
// [N, H, W, C] batch (every image on its own), on any device, in any memory
// layout (an NCHW tensor permuted to NHWC works and keeps its layout). Float
// results are not clipped (neither are TF's). All ops are stateless and safe
// to call from several threads at once.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace slimtorch {
namespace image_ops {

// tf.image.resize_image_with_crop_or_pad: centrally crops and/or zero-pads
// H x W to target_h x target_w (crop offset (H - target_h) / 2, pad offset
// (target_h - H) / 2, both rounded down; likewise for W). Any dtype.
torch::Tensor ResizeWithCropOrPad(const torch::Tensor& image, int64_t target_h,
                                  int64_t target_w);
// tf.image.rgb_to_grayscale: [..., 3] → float [..., 1], weights 0.2989,
// 0.5870, 0.1140. A 1-channel image is returned unchanged.
torch::Tensor RgbToGrayscale(const torch::Tensor& image);
// The three ops below work in place: `images` (float32, owned by the caller)
// is overwritten and returned. `delta` / `factor`: float32 on the images'
// device, a scalar tensor or [N, 1, 1, 1] (one value per image).
// tf.image.adjust_brightness on floats: images + delta.
torch::Tensor AdjustBrightness_(torch::Tensor images,
                                const torch::Tensor& delta);
// tf.image.adjust_contrast: (x - mean) * factor + mean, the mean taken per
// image and channel over H and W.
torch::Tensor AdjustContrast_(torch::Tensor images,
                              const torch::Tensor& factor);
// tf.image.per_image_standardization: (x - mean) / max(stddev, 1/sqrt(K)),
// mean and population stddev over the K = H * W * C values of each image.
torch::Tensor PerImageStandardization_(torch::Tensor images);

// tf.image.adjust_saturation on float32 RGB images (TF's fused CPU kernel):
// per pixel RGB → HSV, S ← clip(S * factor, 0, 1), HSV → RGB. Values
// outside [0, 1] go through the same formulas as TF's (so a pixel with a
// negative channel may change even at factor 1, as in TF).
//   images: float32 [..., H, W, 3]; factor: float32 scalar tensor or
//   [N, 1, 1, 1]. Returns a new float32 tensor of the same shape.
// Throws unless the images have 3 channels.
torch::Tensor AdjustSaturation(const torch::Tensor& images,
                               const torch::Tensor& factor);

// A crop window in pixels: rows [y, y + height), columns [x, x + width).
struct CropBox {
  int64_t y = 0;
  int64_t x = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// tf.image.central_crop's window: keeps the central `central_fraction` of
// each side; start = int((size - size * fraction) / 2) in double precision,
// length = size - 2 * start. Throws unless 0 < central_fraction <= 1.
CropBox CentralCropBox(int64_t height, int64_t width, double central_fraction);
// tf.image.central_crop: a view of `image` (any dtype) in that window.
torch::Tensor CentralCrop(const torch::Tensor& image, double central_fraction);

// tf.compat.v1.image.resize_bilinear(align_corners=False) with TF1's legacy
// sampling (half_pixel_centers=False): output pixel (y, x) samples the input
// at (y * in_h / out_h, x * in_w / out_w) (scales in float32), between the
// floor and min(ceil, size - 1) neighbours; interpolated along x first, then
// along y, in float32. Any input dtype; returns float32 [..., out_h, out_w, C].
torch::Tensor ResizeBilinearLegacy(const torch::Tensor& images, int64_t out_h,
                                   int64_t out_w);
// The `window` of the out_h x out_w resize above, computed without the rest
// (equal to ResizeBilinearLegacy(images, out_h, out_w) cropped to `window`).
// Throws if the window is not inside out_h x out_w.
torch::Tensor ResizeBilinearLegacyWindow(const torch::Tensor& images,
                                         int64_t out_h, int64_t out_w,
                                         const CropBox& window);

// Options of tf.image.sample_distorted_bounding_box; defaults are the ones
// TF-Slim's inception_preprocessing.distorted_bounding_box_crop uses.
struct DistortedBoxOptions {
  // Each returned crop covers at least this fraction of one of the boxes.
  float min_object_covered = 0.1f;
  // Range of the crop's width / height (sampled uniformly).
  float min_aspect_ratio = 0.75f;
  float max_aspect_ratio = 1.33f;
  // Range of the crop's area as a fraction of the image's.
  float min_area = 0.05f;
  float max_area = 1.0f;
  // Tries before falling back to the whole image.
  int max_attempts = 100;
  // Object boxes, [ymin, xmin, ymax, xmax] relative to the image size, each
  // coordinate in [0, 1]. Empty: the whole image is the one object
  // (use_image_if_no_bounding_boxes=True).
  std::vector<std::array<float, 4>> boxes;
};

// tf.image.sample_distorted_bounding_box for a height x width image, with
// TF's algorithm (sample_distorted_bounding_box_op.cc): for each attempt,
//   aspect = U[min_aspect_ratio, max_aspect_ratio) (float32);
//   crop height uniform over the integers between lrint(sqrt(min_area_px /
//   aspect)) and the largest lrint(sqrt(max_area_px / aspect)) whose
//   width lrint(height * aspect) fits the image, capped at the image height;
//   width = lrint(height * aspect), nudged by one row if rounding left the
//   area outside [min_area_px, max_area_px];
//   y uniform in [0, H - height) and x in [0, W - width) (0 when the crop
//   spans that side; as in TF, a smaller crop never touches the bottom or
//   right edge);
//   accepted when its intersection with some box is at least
//   min_object_covered of that box's area.
// After max_attempts failures the whole image is returned.
// Draws from `rng` only (a variable number of draws; the distribution, not
// the bits, equals TF's). Throws on invalid options or an empty image.
CropBox SampleDistortedBoundingBox(int64_t height, int64_t width,
                                   const DistortedBoxOptions& options,
                                   std::mt19937_64& rng);

}  // namespace image_ops
}  // namespace slimtorch
