#pragma once
// Helpers shared by the preprocessing tests.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {
namespace preprocessing_test {

// Mirrors pixel_image() in scripts/golden/gen_preprocessing_goldens.py:
// uint8 [h, w, c], (37y + 11x + 80c + 13((xy + seed) % 7) + 29 seed) % 256.
inline torch::Tensor PixelImage(int64_t h, int64_t w, int64_t c, int64_t seed) {
  torch::Tensor t = torch::empty({h, w, c}, torch::kUInt8);
  auto a = t.accessor<uint8_t, 3>();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        a[y][x][ch] =
            static_cast<uint8_t>((37 * y + 11 * x + 80 * ch +
                                  13 * ((x * y + seed) % 7) + 29 * seed) %
                                 256);
      }
    }
  }
  return t;
}

inline torch::Tensor FromArray(const float* data, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(data), shape, torch::kFloat32)
      .clone();
}

inline float MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<float>();
}

inline PreprocessingOptions Options(int64_t out_h, int64_t out_w, bool training,
                                    bool grayscale = false) {
  PreprocessingOptions o;
  o.output_height = out_h;
  o.output_width = out_w;
  o.is_training = training;
  o.use_grayscale = grayscale;
  return o;
}

// Frequencies over `draws` draws. A count of a category of probability p is
// Binomial(draws, p); every category is required within 6 standard
// deviations of draws * p, which a correct sampler misses with probability
// below 1e-8 per category (the seeds are fixed, so the tests are
// deterministic anyway).
inline void ExpectUniformCounts(const std::vector<int>& counts, int draws,
                                const char* what) {
  const double p = 1.0 / counts.size();
  const double bound = 6.0 * std::sqrt(draws * p * (1.0 - p));
  for (size_t k = 0; k < counts.size(); ++k) {
    EXPECT_LE(std::abs(counts[k] - draws * p), bound)
        << what << " category " << k << ": " << counts[k] << " of " << draws;
  }
}

// A golden chain output as the generator scripts write it: every
// stride-th value of the flat [H, W, C] output, their count, and the
// float64 sum and sum of |.| of the whole output.
struct SampledOutput {
  int64_t stride;
  const float* sampled;
  int64_t count;
  double sum, abs_sum;
};

// Compares `chw` (float [C, H, W]) with `golden`: sampled values within
// `tolerance`, sums within tolerance * numel / 16 (errors that large would
// have to be both systematic and everywhere).
inline void ExpectMatchesSampled(const torch::Tensor& chw,
                                 const SampledOutput& golden, double tolerance,
                                 const char* name) {
  torch::Tensor hwc = chw.permute({1, 2, 0}).reshape(-1);
  torch::Tensor sampled = hwc.slice(0, 0, hwc.numel(), golden.stride);
  ASSERT_EQ(sampled.numel(), golden.count) << name;
  EXPECT_LE(MaxAbsDiff(sampled, FromArray(golden.sampled, {golden.count})),
            tolerance)
      << name;
  torch::Tensor h64 = hwc.to(torch::kFloat64);
  const double sum_tolerance = tolerance * hwc.numel() / 16;
  EXPECT_NEAR(h64.sum().item<double>(), golden.sum, sum_tolerance) << name;
  EXPECT_NEAR(h64.abs().sum().item<double>(), golden.abs_sum, sum_tolerance)
      << name;
}

}  // namespace preprocessing_test
}  // namespace slimtorch
