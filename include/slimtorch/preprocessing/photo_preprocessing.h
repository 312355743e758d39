#pragma once
// The photo input path's form of inception and vgg preprocessing: the whole
// chain fused into one pass over the pixels it reads, in plain loops, with
// no tensor and no heap allocation per image, written straight into the
// caller's output (a slot of the batch tensor).
//
// Two steps per example, so that the decoder can decode only what is read:
//   Plan(): draws the example's random parameters (exactly the draws of the
//     per-image function, in the same order) and says which window of the
//     stored image the chain reads (the crop, or the rows and columns the
//     resize samples);
//   Apply(): runs the chain on that window's pixels.
// The result equals the per-image function's (GetPreprocessing) bit for bit:
// the same float operations in the same order (tests compare them).
//
// Not covered (Create() returns nullptr; use the per-image function):
// use_grayscale, --auto_augment / --random_erase, and preprocessing other
// than inception and vgg.

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "slimtorch/preprocessing/image_ops.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {

// One example's parameters, from PhotoPreprocessing::Plan().
struct PhotoPlan {
  // The window of the stored image that Apply() reads.
  image_ops::CropBox source;
  // The resize: an in_h x in_w region at (base_y, base_x) of the stored
  // image, resized to resized_h x resized_w, of which the output window at
  // (window_y, window_x) is kept.
  int64_t base_y = 0, base_x = 0, in_h = 0, in_w = 0;
  int64_t resized_h = 0, resized_w = 0;
  int64_t window_y = 0, window_x = 0;
  bool flip = false;
  // inception training only.
  float brightness_delta = 0.0f;
  float saturation_factor = 1.0f;
};

// Row tables and row buffers Apply() reuses; one per thread.
struct PhotoScratch {
  std::vector<int64_t> x_lower, x_upper;
  std::vector<float> x_lerp, top, bottom;
};

class PhotoPreprocessing {
 public:
  enum class Kind { kInceptionTrain, kInceptionEval, kVggTrain, kVggEval };

  // The fused form of preprocessing `name` (a preprocessing registry name)
  // for `options`, or nullptr when there is none (see above). Validates the
  // options as the per-image function does.
  static std::unique_ptr<PhotoPreprocessing> Create(
      const std::string& name, const PreprocessingOptions& options);

  // Draws the parameters of one example of a height x width image.
  // `boxes` (inception training): object boxes for
  // sample_distorted_bounding_box, [ymin, xmin, ymax, xmax] in [0, 1];
  // empty = the whole image.
  PhotoPlan Plan(int64_t height, int64_t width, std::mt19937_64& rng,
                 const std::vector<std::array<float, 4>>& boxes = {}) const;

  // Runs the chain. `pixels` points at the top-left pixel of plan.source,
  // rows `row_stride` bytes apart, `channels` (1 or 3) uint8 values per
  // pixel. Writes channels x output_height x output_width floats (CHW) to
  // `out`.
  void Apply(const PhotoPlan& plan, const uint8_t* pixels, int64_t row_stride,
             int channels, float* out, PhotoScratch* scratch) const;

  Kind kind() const { return kind_; }
  const PreprocessingOptions& options() const { return options_; }

 private:
  PhotoPreprocessing(Kind kind, const PreprocessingOptions& options)
      : kind_(kind), options_(options) {}

  Kind kind_;
  PreprocessingOptions options_;
};

}  // namespace slimtorch
