#pragma once
// Private helpers of the preprocessing functions: reproducible random draws
// and the per-image / batched factories of a preprocessing that draws one
// parameter struct per example.

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {
namespace preprocessing_util {

// U(lo, hi) from one generator output r: float(lo + (hi - lo) * (r >> 11) *
// 2^-53), replaced by the next float below hi if rounding reached hi, so the
// result lies in [lo, hi). Only fixed-width integer and double arithmetic,
// so the values are the same with every standard library.
inline float UniformFloat(uint64_t r, float lo, float hi) {
  const double u = static_cast<double>(r >> 11) * 0x1p-53;
  const float v = static_cast<float>(lo + (static_cast<double>(hi) - lo) * u);
  return v < hi ? v : std::nextafter(hi, lo);
}

// An integer in [0, n] from one generator output (bias < n * 2^-64, ignored).
inline int64_t UniformInclusive(uint64_t r, int64_t n) {
  return static_cast<int64_t>(r % static_cast<uint64_t>(n + 1));
}

// A fair coin from one generator output (its top bit).
inline bool Coin(uint64_t r) { return (r >> 63) != 0; }

inline void CheckBatch(const torch::Tensor& images, const char* what) {
  SLIM_CHECK(images.dim() == 4, what, " expects images [N, H, W, C], got ",
             images.sizes());
}

// Also requires 1 or 3 channels (grayscale or RGB).
inline void CheckGrayOrRgbBatch(const torch::Tensor& images, const char* what) {
  CheckBatch(images, what);
  SLIM_CHECK(images.size(3) == 1 || images.size(3) == 3, what,
             " expects 1 or 3 channels, got ", images.size(3));
}

// Float copy of uint8/float [N, H, W, C] images in NCHW memory, returned as
// the NHWC view the image ops take.
inline torch::Tensor ToChannelsFirstFloat(const torch::Tensor& images) {
  torch::Tensor out = torch::empty(
      {images.size(0), images.size(3), images.size(1), images.size(2)},
      images.options().dtype(torch::kFloat32));
  out.copy_(images.permute({0, 3, 1, 2}));
  return out.permute({0, 2, 3, 1});
}

// NHWC (any layout) → contiguous NCHW.
inline torch::Tensor ToNchw(const torch::Tensor& images) {
  return images.permute({0, 3, 1, 2}).contiguous();
}

// With options.augmentation: one example's draws (after the
// preprocessing's own, from the same generator) appended to *augments.
inline void DrawAugment(std::mt19937_64& rng,
                        const PreprocessingOptions& options,
                        std::vector<ExampleAugment>* augments) {
  if (options.augmentation == nullptr) return;
  augments->push_back(options.augmentation->Draw(rng, options.output_height,
                                                 options.output_width));
}

// Pointers to `augments`, one per example (EraseBatch, AugmentFloatBatch).
inline std::vector<const ExampleAugment*> Pointers(
    const std::vector<ExampleAugment>& augments) {
  std::vector<const ExampleAugment*> ptrs;
  ptrs.reserve(augments.size());
  for (const ExampleAugment& a : augments) ptrs.push_back(&a);
  return ptrs;
}

// A preprocessing described by its parts; Factories() below builds the
// per-image and batched functions from them, so that both draw and apply
// the same way (the per-image function is the batched one on a batch of
// one).
template <typename Distortion>
struct DistortionPreprocessing {
  // Name in error messages ("inception preprocessing").
  std::string what;
  // Validates the options once, when a function is built (may be empty).
  std::function<void(const PreprocessingOptions&)> check;
  // Draws one training example's parameters for an h x w image.
  std::function<Distortion(std::mt19937_64& rng, int64_t h, int64_t w,
                           const PreprocessingOptions& options)>
      draw;
  // The training chain: images [N, H, W, C], one distortion per image →
  // float [N, C', out_h, out_w], contiguous, on the images' device.
  std::function<torch::Tensor(const torch::Tensor& images,
                              const std::vector<Distortion>& distortions,
                              const PreprocessingOptions& options)>
      train;
  // The evaluation chain, same shapes.
  std::function<torch::Tensor(const torch::Tensor& images,
                              const PreprocessingOptions& options)>
      eval;
  // The training chain in two parts, for --auto_augment between them: the
  // crop (and flip) → a float [N, C, out_h, out_w] tensor (a view is fine)
  // of pixel values times pixel_scale; and the rest (it may modify its
  // input). Empty: the preprocessing takes no policy.
  std::function<torch::Tensor(const torch::Tensor& images,
                              const std::vector<Distortion>& distortions,
                              const PreprocessingOptions& options)>
      crop;
  std::function<torch::Tensor(torch::Tensor cropped,
                              const std::vector<Distortion>& distortions,
                              const PreprocessingOptions& options)>
      finish;
  double pixel_scale = 1.0;

  // The training chain with the examples' augmentation (`augments[i]` for
  // image i; none: plain `train`).
  torch::Tensor Train(const torch::Tensor& images,
                      const std::vector<Distortion>& distortions,
                      const std::vector<ExampleAugment>& augments,
                      const PreprocessingOptions& options) const {
    if (augments.empty()) return train(images, distortions, options);
    const std::vector<const ExampleAugment*> ptrs = Pointers(augments);
    torch::Tensor out;
    if (options.augmentation->has_policy()) {
      SLIM_CHECK(crop && finish, what, " does not take --auto_augment");
      torch::Tensor x = crop(images, distortions, options);
      AugmentFloatBatch(x, ptrs, pixel_scale);
      out = finish(x, distortions, options);
    } else {
      out = train(images, distortions, options);
    }
    EraseBatch(out, ptrs);
    return out;
  }

  PreprocessingFactory PerImage() const {
    DistortionPreprocessing p = *this;
    return [p](const PreprocessingOptions& options) -> PreprocessingFn {
      if (p.check) p.check(options);
      return [p, options](const torch::Tensor& image, std::mt19937_64& rng) {
        SLIM_CHECK(image.dim() == 3, p.what, " expects an image [H, W, C], ",
                   "got ", image.sizes());
        torch::Tensor batch = image.unsqueeze(0);
        if (!options.is_training) return p.eval(batch, options)[0];
        std::vector<Distortion> d{
            p.draw(rng, image.size(0), image.size(1), options)};
        std::vector<ExampleAugment> augments;
        DrawAugment(rng, options, &augments);
        return p.Train(batch, d, augments, options)[0];
      };
    };
  }

  BatchPreprocessingFactory Batched() const {
    DistortionPreprocessing p = *this;
    return [p](const PreprocessingOptions& options) -> BatchPreprocessingFn {
      if (p.check) p.check(options);
      return [p, options](const torch::Tensor& images,
                          std::vector<std::mt19937_64>& rngs) {
        const std::string what = "batched " + p.what;
        CheckBatch(images, what.c_str());
        SLIM_CHECK(static_cast<int64_t>(rngs.size()) == images.size(0), what,
                   ": ", rngs.size(), " generators for ", images.size(0),
                   " images");
        if (!options.is_training) return p.eval(images, options);
        std::vector<Distortion> distortions;
        std::vector<ExampleAugment> augments;
        distortions.reserve(rngs.size());
        for (std::mt19937_64& rng : rngs) {
          distortions.push_back(
              p.draw(rng, images.size(1), images.size(2), options));
          DrawAugment(rng, options, &augments);
        }
        return p.Train(images, distortions, augments, options);
      };
    };
  }
};

// Registers `p` per image and batched under each of `names`.
template <typename Distortion>
void RegisterDistortionPreprocessing(
    const DistortionPreprocessing<Distortion>& p,
    const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    GetPreprocessingRegistry().Register(name, p.PerImage());
    GetBatchPreprocessingRegistry().Register(name, p.Batched());
  }
}

}  // namespace preprocessing_util
}  // namespace slimtorch
