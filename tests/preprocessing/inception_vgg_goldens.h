#pragma once
// The golden tables of tests/golden/inception_vgg_preprocessing_goldens.inc
// (written by scripts/golden/gen_inception_vgg_preprocessing_goldens.py),
// shared by inception_preprocessing_test.cc and vgg_preprocessing_test.cc.
// Images are preprocessing_test::PixelImage(h, w, c, seed).

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "preprocessing/preprocessing_test_util.h"

namespace slimtorch {
namespace preprocessing_test {

// tf.image.adjust_saturation of a float [h, w, 3] image, in full.
struct SaturationGolden {
  const char* name;
  int64_t h, w;
  float factor;
  const float* input;
  const float* output;
};

// tf.compat.v1.image.resize_bilinear (legacy) of PixelImage(h, w, c, seed)
// to [out_h, out_w, c], in full.
struct ResizeBilinearGolden {
  const char* name;
  int64_t h, w, c, seed, out_h, out_w;
  const float* output;
};

// The window tf.image.central_crop(0.875) keeps of an h x w image.
struct CentralCropGolden {
  int64_t h, w, y, x, height, width;
};

// vgg_preprocessing._smallest_size_at_least(h, w, side).
struct VggSizeGolden {
  int64_t h, w, side, resized_h, resized_w;
};

// tf.image.sample_distorted_bounding_box with inception's arguments over
// `draws` draws: mean and population stddev of {height, width, y, x}, and
// the fraction of whole-image boxes.
struct BoxStatsGolden {
  int64_t h, w, draws;
  double mean[4];
  double stddev[4];
  double whole_fraction;
};

// An evaluation chain (inception or vgg) of PixelImage(h, w, c, seed).
struct EvalGolden {
  const char* name;
  int64_t h, w, c, seed, out_h, out_w;
  bool grayscale;
  SampledOutput output;
};

// inception's training chain with the given distortion.
struct InceptionTrainGolden {
  const char* name;
  int64_t h, w, c, seed, out_h, out_w;
  int64_t crop[4];  // y, x, height, width
  bool flip;
  float brightness_delta, saturation_factor;
  bool grayscale;
  SampledOutput output;
};

// vgg's training chain with the given distortion.
struct VggTrainGolden {
  const char* name;
  int64_t h, w, c, seed, out_h, out_w, resize_side, crop_y, crop_x;
  bool flip;
  bool grayscale;
  SampledOutput output;
};

#include "golden/inception_vgg_preprocessing_goldens.inc"

// Checks an evaluation chain `apply` (ApplyInceptionEval, ApplyVggEval)
// against `goldens`, and that the preprocessing registered as `registered`
// gives the same output.
template <size_t N, typename Apply>
void ExpectEvalMatchesGoldens(const EvalGolden (&goldens)[N], Apply apply,
                              const char* registered, double tolerance) {
  for (const EvalGolden& g : goldens) {
    torch::Tensor image = PixelImage(g.h, g.w, g.c, g.seed);
    PreprocessingOptions o = Options(g.out_h, g.out_w, false, g.grayscale);
    torch::Tensor out = apply(image.unsqueeze(0), o);
    ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{1, g.grayscale ? 1 : g.c,
                                                       g.out_h, g.out_w}))
        << g.name;
    ExpectMatchesSampled(out[0], g.output, tolerance, g.name);
    std::mt19937_64 rng(0);
    EXPECT_TRUE(
        torch::equal(GetPreprocessing(registered, o)(image, rng), out[0]))
        << g.name;
  }
}

}  // namespace preprocessing_test
}  // namespace slimtorch
