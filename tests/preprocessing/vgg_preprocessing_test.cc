#include "slimtorch/preprocessing/vgg_preprocessing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "preprocessing/inception_vgg_goldens.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using namespace preprocessing_test;  // NOLINT: test helpers and goldens

// Values about [-124, 152] from a resize in float32: a few ulps of 255.
constexpr double kVggTolerance = 1e-4;

TEST(VggPreprocessingGoldenTest, ResizedSizeMatchesTensorFlow) {
  for (const VggSizeGolden& g : kVggSizeGoldens) {
    auto size = VggResizedSize(g.h, g.w, g.side);
    EXPECT_EQ(size.first, g.resized_h) << g.h << "x" << g.w << " " << g.side;
    EXPECT_EQ(size.second, g.resized_w) << g.h << "x" << g.w << " " << g.side;
  }
  EXPECT_THROW(VggResizedSize(0, 5, 256), Error);
}

TEST(VggPreprocessingGoldenTest, EvalMatchesTensorFlow) {
  ExpectEvalMatchesGoldens(kVggEvalGoldens, ApplyVggEval, "resnet_v1_50",
                           kVggTolerance);
}

TEST(VggPreprocessingGoldenTest, TrainingChainMatchesTensorFlow) {
  for (const VggTrainGolden& g : kVggTrainGoldens) {
    VggDistortion d;
    d.resize_side = g.resize_side;
    d.crop_y = g.crop_y;
    d.crop_x = g.crop_x;
    d.flip = g.flip;
    // Two different images in one batch: the golden one second.
    torch::Tensor batch = torch::stack(
        {PixelImage(g.h, g.w, g.c, 99), PixelImage(g.h, g.w, g.c, g.seed)});
    torch::Tensor out =
        ApplyVggDistortion(batch, {VggDistortion(), d},
                           Options(g.out_h, g.out_w, true, g.grayscale));
    ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, g.grayscale ? 1 : g.c,
                                                       g.out_h, g.out_w}));
    ExpectMatchesSampled(out[1], g.output, kVggTolerance, g.name);
  }
}

// Only the window is computed, with the values of the whole resize.
TEST(VggPreprocessingTest, ResizeWindowEqualsCroppedResize) {
  torch::Tensor image = PixelImage(37, 53, 3, 1);
  torch::Tensor whole = AspectPreservingResize(image, 300);
  ASSERT_EQ(whole.sizes().vec(), (std::vector<int64_t>{300, 430, 3}));
  image_ops::CropBox window;
  window.y = 17;
  window.x = 201;
  window.height = 50;
  window.width = 229;
  torch::Tensor part =
      image_ops::ResizeBilinearLegacyWindow(image, 300, 430, window);
  EXPECT_TRUE(torch::equal(part, whole.narrow(0, 17, 50).narrow(1, 201, 229)));
  window.x = 202;
  EXPECT_THROW(image_ops::ResizeBilinearLegacyWindow(image, 300, 430, window),
               Error);
}

TEST(VggDistortionDrawTest, ParametersAreUniformAndRepeat) {
  constexpr int kDraws = 20000;
  std::mt19937_64 rng(1);
  std::vector<int> sides(257), side_bins(8), flips(2);
  for (int i = 0; i < kDraws; ++i) {
    VggDistortion d = DrawVggDistortion(rng, 30, 40, 224, 224);
    ASSERT_GE(d.resize_side, 256);
    ASSERT_LE(d.resize_side, 512);
    auto size = VggResizedSize(30, 40, d.resize_side);
    ASSERT_LE(d.crop_y + 224, size.first);
    ASSERT_LE(d.crop_x + 224, size.second);
    ++sides[d.resize_side - 256];
    ++flips[d.flip];
  }
  // Sides 256..511 in 8 bins of 32 (512 alone, p = 1/257).
  for (int k = 0; k < 256; ++k) side_bins[k / 32] += sides[k];
  const int in_bins = kDraws - sides[256];
  ExpectUniformCounts(side_bins, in_bins, "resize side");
  EXPECT_GT(sides[0], 0);
  EXPECT_GT(sides[256], 0);
  ExpectUniformCounts(flips, kDraws, "flip");
  // Exactly four outputs, the first giving the side.
  std::mt19937_64 a(2), skipped(2), raw(2);
  VggDistortion d = DrawVggDistortion(a, 30, 40, 224, 224);
  skipped.discard(4);
  EXPECT_EQ(a(), skipped());
  EXPECT_EQ(d.resize_side, 256 + static_cast<int64_t>(raw() % 257));
  EXPECT_THROW(DrawVggDistortion(a, 30, 40, 600, 224), Error);
}

TEST(VggPreprocessingTest, TrainingOutputIsMeanSubtractedAndSeeded) {
  torch::Tensor image = PixelImage(60, 45, 3, 4);
  for (bool gray : {false, true}) {
    auto fn = GetPreprocessing("vgg_16", Options(224, 200, true, gray));
    std::mt19937_64 r1(11), r2(11), r3(12);
    torch::Tensor a = fn(image, r1);
    ASSERT_EQ(a.sizes().vec(), (std::vector<int64_t>{gray ? 1 : 3, 224, 200}));
    EXPECT_TRUE(a.is_contiguous());
    EXPECT_GE(a.min().item<float>(), -123.68f - 1e-3f);
    EXPECT_LE(a.max().item<float>(), 255.0f - 103.94f + 1e-3f);
    EXPECT_TRUE(torch::equal(a, fn(image, r2)));
    EXPECT_FALSE(torch::equal(a, fn(image, r3)));
  }
}

// One channel: the gray mean is subtracted, so a 1-channel image equals the
// grayscale of its RGB replica (weights summing to 0.9999) up to that scale.
TEST(VggPreprocessingTest, GrayscaleInputSubtractsTheGrayMean) {
  torch::Tensor gray = torch::full({40, 50, 1}, 200, torch::kUInt8);
  std::mt19937_64 rng(0);
  torch::Tensor out = GetPreprocessing("vgg", Options(32, 32, true))(gray, rng);
  ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{1, 32, 32}));
  EXPECT_NEAR(out.min().item<float>(), 200.0f - kVggGrayMean, 1e-4);
  EXPECT_NEAR(out.max().item<float>(), 200.0f - kVggGrayMean, 1e-4);
  EXPECT_NEAR(kVggGrayMean, 117.3670, 1e-3);
}

TEST(VggPreprocessingTest, OutputLargerThanResizeSideThrows) {
  for (bool training : {true, false}) {
    for (auto size : {std::make_pair<int64_t, int64_t>(600, 600),
                      std::make_pair<int64_t, int64_t>(224, 257)}) {
      PreprocessingOptions o = Options(size.first, size.second, training);
      try {
        GetPreprocessing("resnet_v2_50", o);
        FAIL() << size.first << "x" << size.second;
      } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(std::to_string(size.first) + "x" +
                               std::to_string(size.second)),
                  std::string::npos)
            << message;
        EXPECT_NE(message.find("at most 256"), std::string::npos) << message;
      }
      EXPECT_THROW(GetBatchPreprocessing("vgg", o), Error);
    }
  }
  // 256 fits (the crop covers the smaller side in evaluation).
  std::mt19937_64 rng(0);
  torch::Tensor out = GetPreprocessing("vgg", Options(256, 256, false))(
      PixelImage(20, 30, 3, 5), rng);
  EXPECT_EQ(out.size(1), 256);
}

TEST(VggPreprocessingTest, FactoryNamesMapToVgg) {
  const char* names[] = {"resnet_v1_50",  "resnet_v1_101", "resnet_v1_152",
                         "resnet_v1_200", "resnet_v2_50",  "resnet_v2_101",
                         "resnet_v2_152", "resnet_v2_200", "vgg",
                         "vgg_a",         "vgg_16",        "vgg_19",
                         // Ours (unmapped in TF-Slim).
                         "alexnet_v2",    "overfeat"};
  torch::Tensor image = PixelImage(33, 41, 3, 3);
  PreprocessingOptions o = Options(224, 224, false);
  torch::Tensor expected = ApplyVggEval(image.unsqueeze(0), o)[0];
  for (const char* name : names) {
    std::mt19937_64 rng(0);
    EXPECT_TRUE(torch::equal(GetPreprocessing(name, o)(image, rng), expected))
        << name;
    EXPECT_TRUE(HasBatchPreprocessing(name)) << name;
  }
}

}  // namespace
}  // namespace slimtorch
