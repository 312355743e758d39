#pragma once
// TF-Slim's inception_preprocessing (fast_mode=True, as
// train_image_classifier uses it), registered per image and batched under
// the names TF-Slim's preprocessing_factory maps to it: inception,
// inception_v1..v4, inception_resnet_v2, mobilenet_v1, mobilenet_v2,
// mobilenet_v2_035, mobilenet_v2_140, nasnet_mobile, nasnet_large,
// pnasnet_mobile, pnasnet_large; and (ours, unmapped in TF-Slim)
// mobilenet_v1_075, mobilenet_v1_050, mobilenet_v1_025.
//
// Training: convert to float [0, 1] (x * float(1/255)) →
//   crop to a sample_distorted_bounding_box window (whole-image box,
//   DistortedBoxOptions defaults) → resize_bilinear to out_h x out_w
//   (legacy, aspect ratio ignored) → random flip left-right →
//   random_brightness(32/255) → random_saturation(0.5, 1.5) →
//   clip to [0, 1] → [rgb_to_grayscale] → (x - 0.5) * 2, range [-1, 1].
// Evaluation: convert to float [0, 1] → [rgb_to_grayscale] →
//   central_crop(0.875) → resize_bilinear to out_h x out_w (legacy,
//   align_corners=False) → (x - 0.5) * 2.
//
// Grayscale input ([H, W, 1]): TF-Slim's training chain requires 3
// channels; here a 1-channel image is treated as R = G = B, for which
// adjust_saturation is the identity, so saturation is skipped (its factor is
// still drawn, keeping the random stream the same) and the output has one
// channel. Evaluation needs no special case.
//
// The per-image and batched functions draw with DrawInceptionDistortion and
// apply with ApplyInceptionDistortion / ApplyInceptionEval (the per-image
// one on a batch of one), so they agree by construction.

#include <array>
#include <random>
#include <string>
#include <vector>

#include "slimtorch/preprocessing/image_ops.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {

// random_brightness(max_delta) and random_saturation(lower, upper).
constexpr float kInceptionMaxBrightnessDelta = 32.0f / 255.0f;
constexpr float kInceptionSaturationLower = 0.5f;
constexpr float kInceptionSaturationUpper = 1.5f;
// preprocess_for_eval's central_fraction.
constexpr double kInceptionCentralFraction = 0.875;

// One training example's random distortion.
struct InceptionDistortion {
  // Window of the source image that is resized to the output.
  image_ops::CropBox crop;
  // Mirror left-right (after the resize).
  bool flip = false;
  // Added to every value; in [-32/255, 32/255).
  float brightness_delta = 0.0f;
  // Saturation factor; in [0.5, 1.5).
  float saturation_factor = 1.0f;
};

// Draws one example's distortion for a height x width image, in this order
// (persisted behaviour: runs repeat under a seed; do not change):
//   crop = image_ops::SampleDistortedBoundingBox(height, width, defaults)
//     (a variable number of outputs);
//   flip = top bit of the next output;
//   brightness_delta = U(-32/255, 32/255), then saturation_factor =
//     U(0.5, 1.5), each from the next output as DrawCifarDistortion's U.
InceptionDistortion DrawInceptionDistortion(std::mt19937_64& rng,
                                            int64_t height, int64_t width);

// The same with object boxes ([ymin, xmin, ymax, xmax] in [0, 1], as
// image/object/bbox/* of an ImageNet record) handed to
// sample_distorted_bounding_box (empty: the whole image, as above).
InceptionDistortion DrawInceptionDistortion(
    std::mt19937_64& rng, int64_t height, int64_t width,
    const std::vector<std::array<float, 4>>& boxes);

// The training chain with given distortions.
//   images: uint8 [N, H, W, C] (C = 1 or 3), any device.
//   distortions: N entries, distortions[i] for image i; crops inside H x W.
//   options: output size and use_grayscale (is_training is not read).
//   returns: float [N, C', out_h, out_w], contiguous, on the images' device.
torch::Tensor ApplyInceptionDistortion(
    const torch::Tensor& images,
    const std::vector<InceptionDistortion>& distortions,
    const PreprocessingOptions& options);
// ApplyInceptionDistortion in two parts (--auto_augment runs between
// them): the crop, resize and flip → float [N, C, out_h, out_w] in [0, 1]
// (a view of NHWC memory); then brightness, saturation, clamp, grayscale
// and the [-1, 1] scaling → contiguous NCHW.
torch::Tensor CropInceptionDistortion(
    const torch::Tensor& images,
    const std::vector<InceptionDistortion>& distortions,
    const PreprocessingOptions& options);
torch::Tensor FinishInceptionDistortion(
    const torch::Tensor& cropped,
    const std::vector<InceptionDistortion>& distortions,
    const PreprocessingOptions& options);

// The evaluation chain: uint8 images [N, H, W, C], any device →
// float [N, C', out_h, out_w], contiguous, on the images' device.
torch::Tensor ApplyInceptionEval(const torch::Tensor& images,
                                 const PreprocessingOptions& options);

}  // namespace slimtorch
