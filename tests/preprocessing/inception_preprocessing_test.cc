#include "slimtorch/preprocessing/inception_preprocessing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "preprocessing/inception_vgg_goldens.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using namespace preprocessing_test;  // NOLINT: test helpers and goldens

// ---------------------------------------------------------------------------
// Image ops, against TensorFlow.

TEST(InceptionImageOpsTest, AdjustSaturationMatchesTensorFlow) {
  for (const SaturationGolden& g : kSaturationGoldens) {
    torch::Tensor x = FromArray(g.input, {g.h, g.w, 3});
    torch::Tensor expected = FromArray(g.output, {g.h, g.w, 3});
    torch::Tensor y = image_ops::AdjustSaturation(x, torch::tensor(g.factor));
    EXPECT_LE(MaxAbsDiff(y, expected), 2e-6) << g.name;
    // Per-image factors in a batch, in an NCHW layout viewed as NHWC.
    torch::Tensor batch = torch::stack({x, x})
                              .permute({0, 3, 1, 2})
                              .contiguous()
                              .permute({0, 2, 3, 1});
    torch::Tensor factors = torch::tensor({1.0f, g.factor}).view({2, 1, 1, 1});
    torch::Tensor yb = image_ops::AdjustSaturation(batch, factors);
    EXPECT_LE(MaxAbsDiff(yb[1], expected), 2e-6) << g.name;
  }
  EXPECT_THROW(
      image_ops::AdjustSaturation(torch::zeros({2, 2, 1}), torch::tensor(1.0f)),
      Error);
}

TEST(InceptionImageOpsTest, ResizeBilinearLegacyMatchesTensorFlow) {
  for (const ResizeBilinearGolden& g : kResizeBilinearGoldens) {
    torch::Tensor image = PixelImage(g.h, g.w, g.c, g.seed);
    torch::Tensor expected = FromArray(g.output, {g.out_h, g.out_w, g.c});
    torch::Tensor y = image_ops::ResizeBilinearLegacy(image, g.out_h, g.out_w);
    ASSERT_EQ(y.scalar_type(), torch::kFloat32);
    // Values up to 255: a few float ulps.
    EXPECT_LE(MaxAbsDiff(y, expected), 1e-4) << g.name;
    torch::Tensor batch = torch::stack({PixelImage(g.h, g.w, g.c, 0), image});
    EXPECT_LE(
        MaxAbsDiff(image_ops::ResizeBilinearLegacy(batch, g.out_h, g.out_w)[1],
                   expected),
        1e-4)
        << g.name;
  }
}

TEST(InceptionImageOpsTest, CentralCropMatchesTensorFlow) {
  for (const CentralCropGolden& g : kCentralCropGoldens) {
    image_ops::CropBox box = image_ops::CentralCropBox(g.h, g.w, 0.875);
    EXPECT_EQ(box.y, g.y) << g.h << "x" << g.w;
    EXPECT_EQ(box.x, g.x) << g.h << "x" << g.w;
    EXPECT_EQ(box.height, g.height) << g.h << "x" << g.w;
    EXPECT_EQ(box.width, g.width) << g.h << "x" << g.w;
    torch::Tensor image = torch::arange(g.h * g.w).view({g.h, g.w, 1});
    torch::Tensor crop = image_ops::CentralCrop(image, 0.875);
    EXPECT_EQ(crop.sizes().vec(), (std::vector<int64_t>{g.height, g.width, 1}));
    EXPECT_EQ(crop[0][0][0].item<int64_t>(), g.y * g.w + g.x);
  }
  EXPECT_THROW(image_ops::CentralCropBox(8, 8, 0.0), Error);
  EXPECT_THROW(image_ops::CentralCropBox(8, 8, 1.5), Error);
}

// ---------------------------------------------------------------------------
// sample_distorted_bounding_box.

constexpr int kBoxDraws = 20000;

// Every box lies in the image, covers at least 10% of it (min_object_covered
// of the whole-image object), has width = lrint(height * aspect) for an
// aspect in [0.75, 1.33], and, as in TF, touches the bottom (right) edge only
// when it spans the whole height (width).
TEST(SampleDistortedBoundingBoxTest, BoxesRespectTheConstraints) {
  const image_ops::DistortedBoxOptions options;
  std::mt19937_64 rng(3);
  for (auto size : {std::make_pair<int64_t, int64_t>(300, 200),
                    std::make_pair<int64_t, int64_t>(37, 53),
                    std::make_pair<int64_t, int64_t>(5, 7),
                    std::make_pair<int64_t, int64_t>(1, 1),
                    std::make_pair<int64_t, int64_t>(2, 600)}) {
    const int64_t h = size.first;
    const int64_t w = size.second;
    for (int i = 0; i < kBoxDraws / 5; ++i) {
      image_ops::CropBox b =
          image_ops::SampleDistortedBoundingBox(h, w, options, rng);
      ASSERT_GE(b.y, 0);
      ASSERT_GE(b.x, 0);
      ASSERT_GE(b.height, 1);
      ASSERT_GE(b.width, 1);
      ASSERT_LE(b.y + b.height, b.height == h ? h : h - 1) << h << "x" << w;
      ASSERT_LE(b.x + b.width, b.width == w ? w : w - 1) << h << "x" << w;
      if (b.height == h && b.width == w) continue;  // possibly the fallback
      ASSERT_GE(static_cast<double>(b.height * b.width), 0.1 * h * w);
      ASSERT_GE(b.width, 0.75 * b.height - 0.5) << b.height << "x" << b.width;
      ASSERT_LE(b.width, 1.33 * b.height + 0.5) << b.height << "x" << b.width;
    }
  }
}

// The distribution of the boxes equals TensorFlow's: mean and stddev of
// height, width, y and x, and the fraction of whole-image boxes, within 5
// standard errors of the difference of two independent estimates.
TEST(SampleDistortedBoundingBoxTest, DistributionMatchesTensorFlow) {
  std::mt19937_64 rng(4);
  for (const BoxStatsGolden& g : kBoxStatsGoldens) {
    std::vector<double> sum(4), sum_sq(4);
    int whole = 0;
    for (int i = 0; i < kBoxDraws; ++i) {
      image_ops::CropBox b = image_ops::SampleDistortedBoundingBox(
          g.h, g.w, image_ops::DistortedBoxOptions(), rng);
      const double v[4] = {static_cast<double>(b.height),
                           static_cast<double>(b.width),
                           static_cast<double>(b.y), static_cast<double>(b.x)};
      for (int k = 0; k < 4; ++k) {
        sum[k] += v[k];
        sum_sq[k] += v[k] * v[k];
      }
      whole += b.height == g.h && b.width == g.w;
    }
    const char* names[4] = {"height", "width", "y", "x"};
    const double n_tf = static_cast<double>(g.draws);
    for (int k = 0; k < 4; ++k) {
      const double mean = sum[k] / kBoxDraws;
      const double sd = std::sqrt(sum_sq[k] / kBoxDraws - mean * mean);
      const double var = g.stddev[k] * g.stddev[k];
      EXPECT_NEAR(mean, g.mean[k], 5 * std::sqrt(var / n_tf + var / kBoxDraws))
          << g.h << "x" << g.w << " " << names[k];
      // Standard error of a stddev estimate: sd / sqrt(2 n).
      EXPECT_NEAR(
          sd, g.stddev[k],
          5 * g.stddev[k] * std::sqrt(1 / (2 * n_tf) + 1.0 / (2 * kBoxDraws)))
          << g.h << "x" << g.w << " " << names[k];
    }
    const double p = g.whole_fraction;
    EXPECT_NEAR(
        static_cast<double>(whole) / kBoxDraws, p,
        5 * std::sqrt(p * (1 - p) * (1 / n_tf + 1.0 / kBoxDraws)) + 1e-3)
        << g.h << "x" << g.w;
  }
}

TEST(SampleDistortedBoundingBoxTest, FullyCoveredObjectBoxIsInsideTheCrop) {
  image_ops::DistortedBoxOptions o;
  o.min_object_covered = 1.0f;
  o.boxes = {{0.25f, 0.5f, 0.5f, 0.75f}};  // rows 25..50, columns 100..150
  std::mt19937_64 rng(5);
  int fallbacks = 0;
  for (int i = 0; i < 2000; ++i) {
    image_ops::CropBox b =
        image_ops::SampleDistortedBoundingBox(100, 200, o, rng);
    if (b.height == 100 && b.width == 200) {
      ++fallbacks;
      continue;
    }
    ASSERT_LE(b.y, 25);
    ASSERT_GE(b.y + b.height, 50);
    ASSERT_LE(b.x, 100);
    ASSERT_GE(b.x + b.width, 150);
  }
  EXPECT_LT(fallbacks, 2000);
}

TEST(SampleDistortedBoundingBoxTest, InvalidOptionsThrow) {
  std::mt19937_64 rng(6);
  image_ops::DistortedBoxOptions o;
  EXPECT_THROW(image_ops::SampleDistortedBoundingBox(0, 5, o, rng), Error);
  o.min_area = 0.0f;
  EXPECT_THROW(image_ops::SampleDistortedBoundingBox(5, 5, o, rng), Error);
  o = image_ops::DistortedBoxOptions();
  o.boxes = {{0.0f, 0.0f, 1.5f, 1.0f}};
  EXPECT_THROW(image_ops::SampleDistortedBoundingBox(5, 5, o, rng), Error);
}

// ---------------------------------------------------------------------------
// The chains, against TensorFlow (on [-1, 1] data).

constexpr double kChainTolerance = 1e-5;

TEST(InceptionPreprocessingGoldenTest, EvalMatchesTensorFlow) {
  ExpectEvalMatchesGoldens(kInceptionEvalGoldens, ApplyInceptionEval,
                           "inception_v3", kChainTolerance);
}

TEST(InceptionPreprocessingGoldenTest, TrainingChainMatchesTensorFlow) {
  for (const InceptionTrainGolden& g : kInceptionTrainGoldens) {
    InceptionDistortion d;
    d.crop.y = g.crop[0];
    d.crop.x = g.crop[1];
    d.crop.height = g.crop[2];
    d.crop.width = g.crop[3];
    d.flip = g.flip;
    d.brightness_delta = g.brightness_delta;
    d.saturation_factor = g.saturation_factor;
    // Two different images in one batch: the golden one second.
    torch::Tensor batch = torch::stack(
        {PixelImage(g.h, g.w, g.c, 99), PixelImage(g.h, g.w, g.c, g.seed)});
    torch::Tensor out =
        ApplyInceptionDistortion(batch, {InceptionDistortion{{0, 0, 5, 5}}, d},
                                 Options(g.out_h, g.out_w, true, g.grayscale));
    ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, g.grayscale ? 1 : g.c,
                                                       g.out_h, g.out_w}));
    ExpectMatchesSampled(out[1], g.output, kChainTolerance, g.name);
  }
}

// ---------------------------------------------------------------------------
// The draws and the registered functions.

TEST(InceptionDistortionDrawTest, ParametersStayInRangeAndRepeat) {
  std::mt19937_64 rng(7);
  int flips = 0;
  for (int i = 0; i < 2000; ++i) {
    InceptionDistortion d = DrawInceptionDistortion(rng, 40, 60);
    ASSERT_GE(d.brightness_delta, -32.0f / 255.0f);
    ASSERT_LT(d.brightness_delta, 32.0f / 255.0f);
    ASSERT_GE(d.saturation_factor, 0.5f);
    ASSERT_LT(d.saturation_factor, 1.5f);
    ASSERT_LE(d.crop.y + d.crop.height, 40);
    ASSERT_LE(d.crop.x + d.crop.width, 60);
    flips += d.flip;
  }
  EXPECT_NEAR(flips, 1000, 6 * std::sqrt(500.0));
  std::mt19937_64 a(8), b(8);
  InceptionDistortion da = DrawInceptionDistortion(a, 40, 60);
  InceptionDistortion db = DrawInceptionDistortion(b, 40, 60);
  EXPECT_EQ(da.crop.y, db.crop.y);
  EXPECT_EQ(da.crop.width, db.crop.width);
  EXPECT_EQ(da.saturation_factor, db.saturation_factor);
  EXPECT_EQ(a(), b());
}

TEST(InceptionPreprocessingTest, TrainingOutputIsInRangeAndSeeded) {
  torch::Tensor image = PixelImage(120, 90, 3, 1);
  for (bool gray : {false, true}) {
    auto fn = GetPreprocessing("inception", Options(64, 48, true, gray));
    std::mt19937_64 r1(11), r2(11), r3(12);
    torch::Tensor a = fn(image, r1);
    ASSERT_EQ(a.sizes().vec(), (std::vector<int64_t>{gray ? 1 : 3, 64, 48}));
    EXPECT_TRUE(a.is_contiguous());
    EXPECT_GE(a.min().item<float>(), -1.0f);
    EXPECT_LE(a.max().item<float>(), 1.0f);
    EXPECT_TRUE(torch::equal(a, fn(image, r2)));
    EXPECT_FALSE(torch::equal(a, fn(image, r3)));
  }
}

// A 1-channel image trains like R = G = B: saturation is the identity.
TEST(InceptionPreprocessingTest, GrayscaleInputTrainsLikeReplicatedRgb) {
  torch::Tensor gray = PixelImage(50, 40, 1, 2);
  auto fn = GetPreprocessing("inception", Options(32, 32, true));
  std::mt19937_64 r1(13), r2(13);
  torch::Tensor one = fn(gray, r1);
  torch::Tensor three = fn(gray.expand({50, 40, 3}).contiguous(), r2);
  ASSERT_EQ(one.sizes().vec(), (std::vector<int64_t>{1, 32, 32}));
  EXPECT_LE(MaxAbsDiff(three, one.expand({3, 32, 32})), 2e-6);
}

TEST(InceptionPreprocessingTest, FactoryNamesMapToInception) {
  const char* names[] = {
      "inception",        "inception_v1",  "inception_v2",
      "inception_v3",     "inception_v4",  "inception_resnet_v2",
      "mobilenet_v1",     "mobilenet_v2",  "mobilenet_v2_035",
      "mobilenet_v2_140", "nasnet_mobile", "nasnet_large",
      "pnasnet_mobile",   "pnasnet_large",
      // Ours: the widths of mobilenet_v1 (unmapped in TF-Slim).
      "mobilenet_v1_075", "mobilenet_v1_050", "mobilenet_v1_025",
      // MobileNet v3 / EdgeTPU.
      "mobilenet_v3_small", "mobilenet_v3_large",
      "mobilenet_v3_small_minimalistic", "mobilenet_v3_large_minimalistic",
      "mobilenet_edgetpu", "mobilenet_edgetpu_075"};
  torch::Tensor image = PixelImage(33, 41, 3, 3);
  PreprocessingOptions o = Options(21, 19, false);
  torch::Tensor expected = ApplyInceptionEval(image.unsqueeze(0), o)[0];
  for (const char* name : names) {
    std::mt19937_64 rng(0);
    EXPECT_TRUE(torch::equal(GetPreprocessing(name, o)(image, rng), expected))
        << name;
    EXPECT_TRUE(HasBatchPreprocessing(name)) << name;
  }
  // Nets slimtorch lacks have none: --preprocessing_name would be needed.
  // TF-Slim maps the video nets to none (and slimtorch's image
  // preprocessing cannot take clips); nasnet_cifar, unmapped in TF-Slim,
  // takes cifarnet's here.
  for (const char* name : {"i3d", "s3dg"}) {
    EXPECT_FALSE(GetPreprocessingRegistry().Has(name)) << name;
  }
  try {
    GetPreprocessing("i3d", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mobilenet_v1, mobilenet_v1_025"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace slimtorch
