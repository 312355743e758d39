#pragma once
// CIFAR-10 preprocessing, registered per image and batched under two names:
//   "cifarnet": TF-Slim's cifarnet_preprocessing (padding 4), also under
//     "nasnet_cifar" (which TF-Slim's factory leaves unmapped);
//   "cifarnet_tutorial": the TF CIFAR-10 tutorial's cifar10_input
//     (distorted_inputs / inputs; no padding, 24x24 from 32x32).
// Training: to_float → [rgb_to_grayscale] → zero-pad `padding` on each side
//   → random crop to out_h x out_w → random flip left-right →
//   random_brightness(63) → random_contrast(0.2, 1.8) →
//   per_image_standardization.
// Evaluation: to_float → [rgb_to_grayscale] →
//   resize_image_with_crop_or_pad(out_h, out_w) → per_image_standardization.
//
// The per-image and batched functions draw one example's parameters with the
// same function (DrawCifarDistortion) and apply them with the same tensor
// code (ApplyCifarDistortion on a batch of one), so they agree by
// construction.

#include <cstdint>
#include <random>
#include <vector>

#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {

// TF-Slim cifarnet_preprocessing._PADDING.
constexpr int64_t kCifarnetPadding = 4;
// random_brightness(max_delta) and random_contrast(lower, upper).
constexpr float kCifarMaxBrightnessDelta = 63.0f;
constexpr float kCifarContrastLower = 0.2f;
constexpr float kCifarContrastUpper = 1.8f;

// One training example's random distortion.
struct CifarDistortion {
  // Top-left corner of the crop window in the padded image;
  // 0 <= crop_y <= padded height - out_h (likewise crop_x).
  int64_t crop_y = 0;
  int64_t crop_x = 0;
  // Mirror the crop left-right.
  bool flip = false;
  // Added to every value; in [-63, 63).
  float brightness_delta = 0.0f;
  // Contrast factor; in [0.2, 1.8).
  float contrast_factor = 1.0f;
};

// Draws one example's distortion from exactly five rng() outputs r1..r5, in
// this order (persisted behaviour: runs repeat under a seed; do not change):
//   crop_y = r1 % (max_crop_y + 1)        (bias < 2^-59, ignored)
//   crop_x = r2 % (max_crop_x + 1)
//   flip   = top bit of r3                (probability 1/2)
//   brightness_delta = U(-63, 63) from r4
//   contrast_factor  = U(0.2, 1.8) from r5
// where U(lo, hi) from r = float(lo + (hi - lo) * (r >> 11) * 2^-53),
// replaced by the next float below hi if rounding reached hi, so the result
// lies in [lo, hi). Only fixed-width integer and double arithmetic, so the
// values are the same with every standard library.
// Throws if max_crop_y or max_crop_x is negative (crop larger than image).
CifarDistortion DrawCifarDistortion(std::mt19937_64& rng, int64_t max_crop_y,
                                    int64_t max_crop_x);

// The training chain with given distortions.
//   images: [N, H, W, C] (uint8 as decoded, or float), any device.
//   distortions: N entries, distortions[i] for image i.
//   padding: zero padding on each side before the crop (4 or 0).
//   options: output size and use_grayscale (is_training is not read).
//   returns: float [N, C', out_h, out_w], contiguous, on the images' device.
// Throws on a crop window outside the padded image.
torch::Tensor ApplyCifarDistortion(
    const torch::Tensor& images,
    const std::vector<CifarDistortion>& distortions, int64_t padding,
    const PreprocessingOptions& options);

// The same with the distortions as tensors of N on the images' device:
// crop_y, crop_x, flip (int64; nonzero = mirror), brightness_delta,
// contrast_factor (float32). The crop windows are not checked here.
torch::Tensor ApplyCifarDistortionTensors(
    const torch::Tensor& images, const torch::Tensor& crop_y,
    const torch::Tensor& crop_x, const torch::Tensor& flip,
    const torch::Tensor& brightness_delta, const torch::Tensor& contrast_factor,
    int64_t padding, const PreprocessingOptions& options);

// The counter-based form (CounterBatchPreprocessingFn): example p's
// parameters from CounterHash(p, seed, k), k = 0..4 in DrawCifarDistortion's
// order: crop_y = CounterUniformInt(h0, max_crop_y), crop_x likewise from
// h1, flip = lowest bit of h2, brightness_delta = CounterUniform(h3, -63,
// 63), contrast_factor = CounterUniform(h4, 0.2, 1.8).
torch::Tensor ApplyCifarDistortionCounter(const torch::Tensor& images,
                                          const torch::Tensor& positions,
                                          uint64_t seed, int64_t padding,
                                          const PreprocessingOptions& options);

// The evaluation chain: images [N, H, W, C] (any dtype, any device) →
// float [N, C', out_h, out_w], contiguous, on the images' device.
torch::Tensor ApplyCifarEval(const torch::Tensor& images,
                             const PreprocessingOptions& options);

}  // namespace slimtorch
