#pragma once
// TF-Slim's vgg_preprocessing, registered per image and batched under the
// names TF-Slim's preprocessing_factory maps to it: resnet_v1_50/101/152/200,
// resnet_v2_50/101/152/200, vgg, vgg_a, vgg_16, vgg_19; and (ours, unmapped
// in TF-Slim) alexnet_v2, overfeat.
//
// Training: resize_side uniform in [256, 512] → aspect-preserving
//   resize_bilinear (legacy) so that the smaller side is resize_side →
//   random out_h x out_w crop (offsets uniform in [0, H' - out_h] and
//   [0, W' - out_w]) → to_float → [rgb_to_grayscale] → random flip
//   left-right → subtract the RGB means (123.68, 116.78, 103.94).
// Evaluation: aspect-preserving resize to smaller side 256 → central crop
//   (offsets (H' - out_h) / 2, (W' - out_w) / 2) → to_float →
//   [rgb_to_grayscale] → subtract the means.
// Values are not scaled: about [-124, 152].
//
// Only the output window of the resized image is computed (the same values
// as resizing everything and cropping).
//
// One channel (grayscale input, or use_grayscale): TF-Slim's
// _mean_image_subtraction rejects it; here the single channel has
// kVggGrayMean subtracted, the rgb_to_grayscale of the RGB means, so that
// use_grayscale gives rgb_to_grayscale of the mean-subtracted RGB image.
//
// Output sizes above 256 are rejected when the function is built (TF-Slim
// fails on the crop at run time whenever the drawn side is smaller).

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/preprocessing/image_ops.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {

// vgg_preprocessing._RESIZE_SIDE_MIN / _MAX and the channel means.
constexpr int64_t kVggResizeSideMin = 256;
constexpr int64_t kVggResizeSideMax = 512;
constexpr float kVggRgbMeans[3] = {123.68f, 116.78f, 103.94f};
// rgb_to_grayscale of the means (weights 0.2989, 0.5870, 0.1140).
constexpr float kVggGrayMean =
    0.2989f * 123.68f + 0.5870f * 116.78f + 0.1140f * 103.94f;

// _smallest_size_at_least: (rint(H * scale), rint(W * scale)) with
// scale = side / min(H, W), all in float32 (rint rounds half to even).
std::pair<int64_t, int64_t> VggResizedSize(int64_t height, int64_t width,
                                           int64_t smallest_side);

// _aspect_preserving_resize: images [H, W, C] or [N, H, W, C], any dtype and
// device → float32 resized to VggResizedSize(H, W, smallest_side).
torch::Tensor AspectPreservingResize(const torch::Tensor& images,
                                     int64_t smallest_side);

// One training example's random distortion.
struct VggDistortion {
  // Smaller side after the resize; in [256, 512].
  int64_t resize_side = kVggResizeSideMin;
  // Top-left corner of the crop in the resized image.
  int64_t crop_y = 0;
  int64_t crop_x = 0;
  // Mirror the crop left-right.
  bool flip = false;
};

// Draws one example's distortion for a height x width image and an
// out_h x out_w output from exactly four rng() outputs r1..r4, in this
// order (persisted behaviour: runs repeat under a seed; do not change):
//   resize_side = 256 + r1 % 257
//   crop_y = r2 % (H' - out_h + 1), crop_x = r3 % (W' - out_w + 1), where
//     (H', W') = VggResizedSize(height, width, resize_side)
//   flip = top bit of r4.
// Throws if the resized image is smaller than the output.
VggDistortion DrawVggDistortion(std::mt19937_64& rng, int64_t height,
                                int64_t width, int64_t out_h, int64_t out_w);

// The training chain with given distortions.
//   images: [N, H, W, C] (C = 1 or 3, any dtype), any device.
//   distortions: N entries, distortions[i] for image i.
//   options: output size and use_grayscale (is_training is not read).
//   returns: float [N, C', out_h, out_w], contiguous, on the images' device.
// Throws on a crop window outside the resized image.
torch::Tensor ApplyVggDistortion(const torch::Tensor& images,
                                 const std::vector<VggDistortion>& distortions,
                                 const PreprocessingOptions& options);
// ApplyVggDistortion in two parts (--auto_augment runs between them): the
// resize, crop and flip → float [N, C, out_h, out_w] of 0..255 values (a
// view of NHWC memory); then grayscale and the means → contiguous NCHW.
torch::Tensor CropVggDistortion(const torch::Tensor& images,
                                const std::vector<VggDistortion>& distortions,
                                const PreprocessingOptions& options);
torch::Tensor FinishVggDistortion(const torch::Tensor& cropped,
                                  const std::vector<VggDistortion>& distortions,
                                  const PreprocessingOptions& options);

// The evaluation chain: images [N, H, W, C] (any dtype, any device) →
// float [N, C', out_h, out_w], contiguous, on the images' device.
torch::Tensor ApplyVggEval(const torch::Tensor& images,
                           const PreprocessingOptions& options);

}  // namespace slimtorch
