#include "slimtorch/preprocessing/photo_preprocessing.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/preprocessing/inception_preprocessing.h"

namespace slimtorch {
namespace {

// Random pixels with some gray ones (R = G = B: adjust_saturation's
// zero-range branch) and saturated ones (0 and 255).
torch::Tensor TestImage(int64_t h, int64_t w, int64_t c, uint32_t seed) {
  std::mt19937 gen(seed);
  torch::Tensor image = torch::empty({h, w, c}, torch::kUInt8);
  uint8_t* p = image.data_ptr<uint8_t>();
  for (int64_t i = 0; i < h * w; ++i) {
    const uint32_t kind = gen() % 8;
    const uint8_t gray = static_cast<uint8_t>(gen());
    for (int64_t k = 0; k < c; ++k) {
      p[i * c + k] = kind == 0   ? gray
                     : kind == 1 ? static_cast<uint8_t>((gen() & 1) * 255)
                                 : static_cast<uint8_t>(gen());
    }
  }
  return image;
}

PreprocessingOptions Options(int64_t size, bool training) {
  PreprocessingOptions o;
  o.output_height = size;
  o.output_width = size;
  o.is_training = training;
  return o;
}

// Plan + Apply on (a) the whole image, pointing at the plan's window, and
// (b) a copy of the window alone (what the JPEG decoder hands over) equal
// the per-image function bit for bit, under the same generator.
void ExpectFusedEqualsPerImage(const std::string& name, bool training,
                               int64_t h, int64_t w, int64_t c, int64_t size,
                               uint64_t seed) {
  SCOPED_TRACE(name + (training ? " train " : " eval ") + std::to_string(h) +
               "x" + std::to_string(w) + "x" + std::to_string(c) + " seed " +
               std::to_string(seed));
  const PreprocessingOptions o = Options(size, training);
  auto fused = PhotoPreprocessing::Create(name, o);
  ASSERT_NE(fused, nullptr);
  torch::Tensor image = TestImage(h, w, c, static_cast<uint32_t>(seed));
  std::mt19937_64 rng_a(seed);
  torch::Tensor expected = GetPreprocessing(name, o)(image, rng_a);

  std::mt19937_64 rng_b(seed);
  PhotoPlan plan = fused->Plan(h, w, rng_b);
  EXPECT_EQ(rng_a(), rng_b()) << "different number of draws";
  const image_ops::CropBox& src = plan.source;
  ASSERT_TRUE(src.y >= 0 && src.x >= 0 && src.y + src.height <= h &&
              src.x + src.width <= w);
  PhotoScratch scratch;
  torch::Tensor got = torch::empty({c, size, size}, torch::kFloat32);
  const uint8_t* whole = image.data_ptr<uint8_t>();
  fused->Apply(plan, whole + (src.y * w + src.x) * c, w * c,
               static_cast<int>(c), got.data_ptr<float>(), &scratch);
  EXPECT_TRUE(torch::equal(got, expected))
      << "max diff " << (got - expected).abs().max().item<float>();

  torch::Tensor window = image.narrow(0, src.y, src.height)
                             .narrow(1, src.x, src.width)
                             .contiguous();
  got.zero_();
  fused->Apply(plan, window.data_ptr<uint8_t>(), src.width * c,
               static_cast<int>(c), got.data_ptr<float>(), &scratch);
  EXPECT_TRUE(torch::equal(got, expected));
}

TEST(PhotoPreprocessingTest, InceptionTrainingEqualsPerImage) {
  uint64_t seed = 1;
  for (int64_t c : {3, 1}) {
    for (auto hw : std::vector<std::pair<int64_t, int64_t>>{
             {375, 500}, {500, 333}, {64, 48}, {17, 300}, {224, 224}}) {
      for (int k = 0; k < 3; ++k) {
        ExpectFusedEqualsPerImage("inception", true, hw.first, hw.second, c,
                                  224, seed++);
      }
    }
  }
  ExpectFusedEqualsPerImage("inception_v3", true, 400, 300, 3, 299, seed++);
}

TEST(PhotoPreprocessingTest, InceptionEvalEqualsPerImage) {
  ExpectFusedEqualsPerImage("inception", false, 375, 500, 3, 224, 7);
  ExpectFusedEqualsPerImage("inception_v1", false, 50, 90, 1, 224, 8);
  ExpectFusedEqualsPerImage("mobilenet_v1", false, 333, 500, 3, 128, 9);
}

TEST(PhotoPreprocessingTest, VggEqualsPerImage) {
  uint64_t seed = 100;
  for (int64_t c : {3, 1}) {
    for (auto hw : std::vector<std::pair<int64_t, int64_t>>{
             {375, 500}, {500, 333}, {64, 48}, {256, 256}}) {
      for (bool training : {true, true, false}) {
        ExpectFusedEqualsPerImage("vgg_16", training, hw.first, hw.second, c,
                                  224, seed++);
      }
    }
  }
}

// Object boxes reach sample_distorted_bounding_box: the same draws as
// DrawInceptionDistortion with those boxes, and every crop covers at least
// min_object_covered (0.1) of the one small box.
TEST(PhotoPreprocessingTest, InceptionBoxesGuideTheCrop) {
  auto fused = PhotoPreprocessing::Create("inception", Options(224, true));
  const std::vector<std::array<float, 4>> boxes = {{0.8f, 0.8f, 1.0f, 1.0f}};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::mt19937_64 a(seed), b(seed);
    PhotoPlan plan = fused->Plan(400, 600, a, boxes);
    InceptionDistortion d = DrawInceptionDistortion(b, 400, 600, boxes);
    EXPECT_EQ(plan.base_y, d.crop.y);
    EXPECT_EQ(plan.base_x, d.crop.x);
    EXPECT_EQ(plan.in_h, d.crop.height);
    EXPECT_EQ(plan.in_w, d.crop.width);
    const int64_t iy = std::min<int64_t>(400, d.crop.y + d.crop.height) -
                       std::max<int64_t>(320, d.crop.y);
    const int64_t ix = std::min<int64_t>(600, d.crop.x + d.crop.width) -
                       std::max<int64_t>(480, d.crop.x);
    EXPECT_GE(std::max<int64_t>(iy, 0) * std::max<int64_t>(ix, 0),
              0.1 * 80 * 120) << seed;
  }
}

TEST(PhotoPreprocessingTest, CoversOnlyInceptionAndVgg) {
  EXPECT_EQ(PhotoPreprocessing::Create("cifarnet", Options(32, true)), nullptr);
  PreprocessingOptions gray = Options(224, true);
  gray.use_grayscale = true;
  EXPECT_EQ(PhotoPreprocessing::Create("inception", gray), nullptr);
  EXPECT_THROW(PhotoPreprocessing::Create("vgg", Options(300, true)), Error);
  EXPECT_THROW(PhotoPreprocessing::Create("no_such", Options(224, true)),
               Error);
}

}  // namespace
}  // namespace slimtorch
