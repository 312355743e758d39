#include "slimtorch/preprocessing/cifarnet_preprocessing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "preprocessing/cifar_counter_kernel.h"
#include "preprocessing/preprocessing_test_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"

namespace slimtorch {
namespace {

using preprocessing_test::ExpectUniformCounts;
using preprocessing_test::FromArray;
using preprocessing_test::MaxAbsDiff;
using preprocessing_test::Options;
using preprocessing_test::PixelImage;

struct OpGolden {
  const char* name;
  const char* op;    // "standardize", "contrast" or "brightness"
  int64_t shape[4];  // N (0: a single [H, W, C] image), H, W, C
  float parameter;   // contrast factor or brightness delta
  const float* input;
  const float* output;
  int64_t values;
};

struct ResizeGolden {
  const char* name;
  int64_t h, w, seed, target_h, target_w;
  const float* output;  // [target_h, target_w, 3]
};

struct ChainGolden {
  const char* name;
  int64_t h, w, seed, padding, out_h, out_w, crop_y, crop_x;
  bool flip;
  float delta, factor;
  bool grayscale;
  int64_t stride;
  const float* sampled;  // flat [out_h, out_w, C'] output, every stride-th
  int64_t sampled_count;
  double sum, abs_sum;
};

#include "golden/preprocessing_goldens.inc"

// ---------------------------------------------------------------------------
// Goldens from TensorFlow (scripts/golden/gen_preprocessing_goldens.py).

TEST(CifarPreprocessingGoldenTest, ImageOpsMatchTensorFlow) {
  for (const OpGolden& g : kOpGoldens) {
    std::vector<int64_t> shape(g.shape + (g.shape[0] == 0 ? 1 : 0),
                               g.shape + 4);
    torch::Tensor x = FromArray(g.input, shape);
    torch::Tensor expected = FromArray(g.output, shape);
    const std::string op = g.op;
    torch::Tensor param = torch::tensor(g.parameter);
    torch::Tensor y =
        op == "standardize" ? image_ops::PerImageStandardization_(x)
        : op == "contrast"  ? image_ops::AdjustContrast_(x, param)
                            : image_ops::AdjustBrightness_(x, param);
    ASSERT_EQ(y.numel(), g.values) << g.name;
    // Values up to ~300 (contrast): a relative bound of a few float ulps.
    torch::Tensor tol = 1e-5 + 2e-6 * expected.abs();
    EXPECT_TRUE(((y - expected).abs() <= tol).all().item<bool>())
        << g.name << ": max diff " << MaxAbsDiff(y, expected);
  }
}

TEST(CifarPreprocessingGoldenTest, ResizeWithCropOrPadMatchesTensorFlow) {
  for (const ResizeGolden& g : kResizeGoldens) {
    torch::Tensor image = PixelImage(g.h, g.w, 3, g.seed);
    torch::Tensor expected =
        FromArray(g.output, {g.target_h, g.target_w, 3}).to(torch::kUInt8);
    EXPECT_TRUE(torch::equal(
        image_ops::ResizeWithCropOrPad(image, g.target_h, g.target_w),
        expected))
        << g.name;
    // The batched form crops each image alike.
    torch::Tensor batch = torch::stack({image, image});
    EXPECT_TRUE(torch::equal(
        image_ops::ResizeWithCropOrPad(batch, g.target_h, g.target_w)[1],
        expected))
        << g.name;
  }
}

TEST(CifarPreprocessingGoldenTest, TrainingChainMatchesTensorFlow) {
  for (const ChainGolden& g : kChainGoldens) {
    CifarDistortion d;
    d.crop_y = g.crop_y;
    d.crop_x = g.crop_x;
    d.flip = g.flip;
    d.brightness_delta = g.delta;
    d.contrast_factor = g.factor;
    torch::Tensor image = PixelImage(g.h, g.w, 3, g.seed);
    // Two different images in one batch: the golden one second.
    torch::Tensor batch = torch::stack({PixelImage(g.h, g.w, 3, 99), image});
    CifarDistortion other;
    torch::Tensor out =
        ApplyCifarDistortion(batch, {other, d}, g.padding,
                             Options(g.out_h, g.out_w, true, g.grayscale));
    const int64_t channels = g.grayscale ? 1 : 3;
    ASSERT_EQ(out.sizes().vec(),
              (std::vector<int64_t>{2, channels, g.out_h, g.out_w}));
    torch::Tensor hwc = out[1].permute({1, 2, 0}).reshape(-1);
    torch::Tensor sampled = hwc.slice(0, 0, hwc.numel(), g.stride);
    torch::Tensor expected = FromArray(g.sampled, {g.sampled_count});
    // Standardized values up to ~3.5; float rounding here is below 1e-6 and
    // a 0.1% error in the contrast factor moves some values by 2e-5.
    EXPECT_LE(MaxAbsDiff(sampled, expected), 5e-6) << g.name;
    torch::Tensor h64 = hwc.to(torch::kFloat64);
    EXPECT_NEAR(h64.sum().item<double>(), g.sum, 1e-3) << g.name;
    // A stddev off by 1 float ulp scales every value alike: relative bound.
    EXPECT_NEAR(h64.abs().sum().item<double>(), g.abs_sum, 2e-6 * g.abs_sum)
        << g.name;
  }
}

// ---------------------------------------------------------------------------
// The random draws.

constexpr int kDraws = 20000;

TEST(CifarDistortionDrawTest, ParametersStayInRange) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < kDraws; ++i) {
    CifarDistortion d = DrawCifarDistortion(rng, 8, 3);
    ASSERT_GE(d.crop_y, 0);
    ASSERT_LE(d.crop_y, 8);
    ASSERT_GE(d.crop_x, 0);
    ASSERT_LE(d.crop_x, 3);
    ASSERT_GE(d.brightness_delta, -63.0f);
    ASSERT_LT(d.brightness_delta, 63.0f);
    ASSERT_GE(d.contrast_factor, 0.2f);
    ASSERT_LT(d.contrast_factor, 1.8f);
  }
  // No room to move: the only offset is 0.
  EXPECT_EQ(DrawCifarDistortion(rng, 0, 0).crop_y, 0);
  EXPECT_THROW(DrawCifarDistortion(rng, -1, 0), Error);
}

// ExpectUniformCounts: for the crop offsets 0..8 (p = 1/9) the bound is
// 1/9 +- 0.0133: an off-by-one range (0..7, p = 1/8, +0.0139) fails it.
TEST(CifarDistortionDrawTest, ParametersAreUniform) {
  std::mt19937_64 rng(2);
  std::vector<int> ys(9), xs(9), flips(2), brightness(6), contrast(8);
  float min_delta = 1e9f, max_delta = -1e9f;
  for (int i = 0; i < kDraws; ++i) {
    CifarDistortion d = DrawCifarDistortion(rng, 8, 8);
    ++ys[d.crop_y];
    ++xs[d.crop_x];
    ++flips[d.flip];
    ++brightness[std::min(5, static_cast<int>((d.brightness_delta + 63) / 21))];
    ++contrast[std::min(7, static_cast<int>((d.contrast_factor - 0.2) / 0.2))];
    min_delta = std::min(min_delta, d.brightness_delta);
    max_delta = std::max(max_delta, d.brightness_delta);
  }
  ExpectUniformCounts(ys, kDraws, "crop_y");
  ExpectUniformCounts(xs, kDraws, "crop_x");
  ExpectUniformCounts(flips, kDraws, "flip");
  ExpectUniformCounts(brightness, kDraws, "brightness sixth");
  ExpectUniformCounts(contrast, kDraws, "contrast eighth");
  // Both ends reached (a gap of 0.1 has probability (1 - 0.1/126)^20000).
  EXPECT_LT(min_delta, -62.9f);
  EXPECT_GT(max_delta, 62.9f);
}

TEST(CifarDistortionDrawTest, UsesExactlyFiveOutputsAndRepeats) {
  std::mt19937_64 a(7), b(7), c(8);
  CifarDistortion da = DrawCifarDistortion(a, 8, 8);
  CifarDistortion db = DrawCifarDistortion(b, 8, 8);
  EXPECT_EQ(da.crop_y, db.crop_y);
  EXPECT_EQ(da.crop_x, db.crop_x);
  EXPECT_EQ(da.flip, db.flip);
  EXPECT_EQ(da.brightness_delta, db.brightness_delta);
  EXPECT_EQ(da.contrast_factor, db.contrast_factor);
  std::mt19937_64 skipped(7);
  skipped.discard(5);
  EXPECT_EQ(a(), skipped());
  // The documented mapping, from the raw outputs.
  std::mt19937_64 raw(7);
  EXPECT_EQ(da.crop_y, static_cast<int64_t>(raw() % 9));
  EXPECT_EQ(da.crop_x, static_cast<int64_t>(raw() % 9));
  EXPECT_EQ(da.flip, (raw() >> 63) != 0);
  EXPECT_EQ(da.brightness_delta,
            static_cast<float>(-63.0 + 126.0 * (raw() >> 11) * 0x1p-53));
  // Another seed gives another sequence of distortions.
  bool differs = false;
  for (int i = 0; i < 4; ++i) {
    CifarDistortion x = DrawCifarDistortion(b, 8, 8);
    CifarDistortion y = DrawCifarDistortion(c, 8, 8);
    differs |= x.brightness_delta != y.brightness_delta;
  }
  EXPECT_TRUE(differs);
}

// ---------------------------------------------------------------------------
// The registered functions.

TEST(CifarPreprocessingTest, TrainingOutputIsStandardizedAndSeeded) {
  for (const char* name : {"cifarnet", "cifarnet_tutorial"}) {
    const int64_t size = std::string(name) == "cifarnet" ? 32 : 24;
    auto fn = GetPreprocessing(name, Options(size, size, true));
    torch::Tensor image = torch::randint(0, 256, {32, 32, 3}, torch::kUInt8);
    std::mt19937_64 r1(11), r2(11), r3(12);
    torch::Tensor a = fn(image, r1);
    ASSERT_EQ(a.sizes().vec(), (std::vector<int64_t>{3, size, size})) << name;
    EXPECT_TRUE(a.is_contiguous());
    EXPECT_NEAR(a.mean().item<float>(), 0.0f, 1e-4) << name;
    EXPECT_NEAR(a.std(/*unbiased=*/false).item<float>(), 1.0f, 1e-3) << name;
    EXPECT_TRUE(torch::equal(a, fn(image, r2))) << name;
    EXPECT_FALSE(torch::allclose(a, fn(image, r3))) << name;
  }
}

TEST(CifarPreprocessingTest, CropLargerThanImageThrows) {
  auto fn = GetPreprocessing("cifarnet_tutorial", Options(24, 24, true));
  std::mt19937_64 rng(0);
  EXPECT_THROW(fn(torch::zeros({20, 30, 3}, torch::kUInt8), rng), Error);
  // cifarnet pads by 4: 16 + 8 = 24 is just enough.
  auto padded = GetPreprocessing("cifarnet", Options(24, 24, true));
  EXPECT_EQ(padded(torch::zeros({16, 16, 3}, torch::kUInt8), rng).size(1), 24);
}

TEST(CifarPreprocessingTest, CifarnetEvalIsStandardizationOnly) {
  torch::Tensor image = torch::randint(0, 256, {32, 32, 3}, torch::kUInt8);
  std::mt19937_64 rng(0);
  torch::Tensor out =
      GetPreprocessing("cifarnet", Options(32, 32, false))(image, rng);
  torch::Tensor expected =
      image_ops::PerImageStandardization_(image.to(torch::kFloat32))
          .permute({2, 0, 1});
  EXPECT_LE(MaxAbsDiff(out, expected), 1e-5);
  // Evaluation draws nothing.
  EXPECT_EQ(rng(), std::mt19937_64(0)());
}

// nasnet_cifar, which TF-Slim's factory leaves unmapped, takes cifarnet's
//: the same draws and output, per image and batched.
TEST(CifarPreprocessingTest, NasnetCifarIsCifarnets) {
  torch::Tensor image = torch::randint(0, 256, {32, 32, 3}, torch::kUInt8);
  for (bool training : {false, true}) {
    std::mt19937_64 r1(5), r2(5);
    torch::Tensor a =
        GetPreprocessing("cifarnet", Options(32, 32, training))(image, r1);
    torch::Tensor b =
        GetPreprocessing("nasnet_cifar", Options(32, 32, training))(image, r2);
    EXPECT_TRUE(torch::equal(a, b)) << training;
  }
  EXPECT_TRUE(HasBatchPreprocessing("nasnet_cifar"));
}

TEST(CifarPreprocessingTest, TutorialEvalIsCentralCrop) {
  torch::Tensor image = torch::randint(0, 256, {32, 32, 3}, torch::kUInt8);
  std::mt19937_64 rng(0);
  torch::Tensor out =
      GetPreprocessing("cifarnet_tutorial", Options(24, 24, false))(image, rng);
  torch::Tensor centre = image.narrow(0, 4, 24).narrow(1, 4, 24);
  torch::Tensor expected =
      image_ops::PerImageStandardization_(centre.to(torch::kFloat32))
          .permute({2, 0, 1});
  EXPECT_LE(MaxAbsDiff(out, expected), 1e-5);
}

TEST(CifarPreprocessingTest, BatchedChecksItsArguments) {
  auto fn = GetBatchPreprocessing("cifarnet", Options(32, 32, true));
  std::vector<std::mt19937_64> rngs(2);
  EXPECT_THROW(fn(torch::zeros({3, 32, 32, 3}, torch::kUInt8), rngs), Error);
  EXPECT_THROW(fn(torch::zeros({32, 32, 3}, torch::kUInt8), rngs), Error);
}

// CounterHash against the same formula in plain uint64 arithmetic (the
// tensor version emulates unsigned shifts and wrapping products on int64).
uint64_t ReferenceCounterHash(uint64_t seed, uint64_t position, uint64_t k) {
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  const uint64_t key = mix(seed + 0x9E3779B97F4A7C15ULL * (k + 1));
  return mix(position * 0xD1342543DE82EF95ULL + key);
}

TEST(CounterDrawTest, HashIsSplitMix64OfSeedPositionAndIndex) {
  torch::Tensor positions =
      torch::tensor({int64_t{0}, int64_t{1}, int64_t{77}, int64_t{1} << 40,
                     int64_t{123456789012345}},
                    torch::kInt64);
  for (uint64_t seed : {uint64_t{0}, uint64_t{5}, ~uint64_t{0}}) {
    for (int64_t k : {0, 3}) {
      torch::Tensor h = CounterHash(positions, seed, k);
      for (int64_t i = 0; i < positions.size(0); ++i) {
        const int64_t got = h[i].item<int64_t>();
        uint64_t got_bits;
        std::memcpy(&got_bits, &got, sizeof(got));
        EXPECT_EQ(got_bits,
                  ReferenceCounterHash(
                      seed, static_cast<uint64_t>(positions[i].item<int64_t>()),
                      static_cast<uint64_t>(k)))
            << "seed " << seed << " k " << k << " i " << i;
      }
    }
  }
}

// All of an example's hashes at once: the same as one at a time.
TEST(CounterDrawTest, HashesAreTheHashesColumnByColumn) {
  torch::Tensor positions = torch::arange(1000, torch::kInt64) * 7919 - 300;
  torch::Tensor all = CounterHashes(positions, 11, 5);
  ASSERT_EQ(all.sizes(), (std::vector<int64_t>{1000, 5}));
  for (int64_t k = 0; k < 5; ++k) {
    EXPECT_TRUE(torch::equal(all.select(1, k), CounterHash(positions, 11, k)))
        << "k " << k;
  }
  EXPECT_THROW(CounterHashes(positions, 11, 0), Error);
  EXPECT_THROW(CounterHashes(positions.to(torch::kInt32), 11, 2), Error);
}

TEST(CounterDrawTest, UniformsStayInRangeAndAreUniform) {
  torch::Tensor positions = torch::arange(20000, torch::kInt64);
  torch::Tensor u = CounterUniform(CounterHash(positions, 1, 3), -63.0f, 63.0f);
  EXPECT_GE(u.min().item<float>(), -63.0f);
  EXPECT_LT(u.max().item<float>(), 63.0f);
  // Mean 0, sd 126 / sqrt(12) / sqrt(20000) ~ 0.26.
  EXPECT_NEAR(u.mean().item<double>(), 0.0, 1.3);
  torch::Tensor c = CounterUniformInt(CounterHash(positions, 1, 0), 8);
  EXPECT_EQ(c.min().item<int64_t>(), 0);
  EXPECT_EQ(c.max().item<int64_t>(), 8);
  torch::Tensor counts = torch::bincount(c);
  // 20000 / 9 = 2222 each, sd ~ 44.
  EXPECT_LT(
      (counts.to(torch::kFloat64) - 20000.0 / 9).abs().max().item<double>(),
      250.0);
  torch::Tensor coin =
      torch::bitwise_and(CounterHash(positions, 1, 2), 1).to(torch::kFloat64);
  EXPECT_NEAR(coin.mean().item<double>(), 0.5, 0.02);
  // Other seeds, other draws; the same seed, the same.
  EXPECT_FALSE(
      torch::equal(CounterHash(positions, 1, 0), CounterHash(positions, 2, 0)));
  EXPECT_TRUE(
      torch::equal(CounterHash(positions, 1, 0), CounterHash(positions, 1, 0)));
}

// The counter form applies, for example p, the distortion its hashes spell
// (checked through the host form with those distortions), whatever batch p
// is in.
TEST(CifarPreprocessingTest, CounterFormIsTheHostFormWithHashedDraws) {
  torch::manual_seed(5);
  torch::Tensor images = torch::randint(0, 256, {6, 32, 32, 3}, torch::kUInt8);
  PreprocessingOptions o;
  o.output_height = 24;
  o.output_width = 24;
  o.is_training = true;
  torch::Tensor positions =
      torch::tensor(std::vector<int64_t>{3, 4, 5, 1000, 1001, 77});
  for (int64_t padding : {int64_t{0}, kCifarnetPadding}) {
    torch::Tensor got =
        ApplyCifarDistortionCounter(images, positions, 11, padding, o);
    const int64_t max = 32 + 2 * padding - 24;
    torch::Tensor cy = CounterUniformInt(CounterHash(positions, 11, 0), max);
    torch::Tensor cx = CounterUniformInt(CounterHash(positions, 11, 1), max);
    torch::Tensor flip = torch::bitwise_and(CounterHash(positions, 11, 2), 1);
    torch::Tensor delta =
        CounterUniform(CounterHash(positions, 11, 3), -63.0f, 63.0f);
    torch::Tensor factor =
        CounterUniform(CounterHash(positions, 11, 4), 0.2f, 1.8f);
    std::vector<CifarDistortion> d(6);
    std::set<int64_t> crops;
    for (int64_t i = 0; i < 6; ++i) {
      d[i].crop_y = cy[i].item<int64_t>();
      d[i].crop_x = cx[i].item<int64_t>();
      d[i].flip = flip[i].item<int64_t>() != 0;
      d[i].brightness_delta = delta[i].item<float>();
      d[i].contrast_factor = factor[i].item<float>();
      crops.insert(d[i].crop_y * 100 + d[i].crop_x);
    }
    EXPECT_GT(crops.size(), 1u);  // the examples are distorted differently
    torch::Tensor want = ApplyCifarDistortion(images, d, padding, o);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5)) << padding;
    // Example 3 (position 1000) alone gets the same.
    torch::Tensor one = ApplyCifarDistortionCounter(
        images.narrow(0, 3, 1), positions.narrow(0, 3, 1), 11, padding, o);
    EXPECT_TRUE(torch::allclose(one[0], got[3], 1e-5, 1e-5)) << padding;
  }
  // Registered for both names, training and evaluation.
  EXPECT_TRUE(GetCounterBatchPreprocessing("cifarnet_tutorial", o));
  EXPECT_FALSE(GetCounterBatchPreprocessing("inception", o));
  o.is_training = false;
  torch::Tensor eval =
      GetCounterBatchPreprocessing("cifarnet", o)(images, positions, 11);
  EXPECT_TRUE(torch::allclose(eval, ApplyCifarEval(images, o)));
}

// cifar_counter_kernel.h's body run on the CPU, element by element as the
// GPU runs it, against the tensor ops' draws (bit for bit) and a crop made
// independently with narrow / flip.
TEST(CifarCounterKernelTest, DrawsAndCropsAsTheTensorOps) {
  torch::manual_seed(6);
  const int64_t n = 5;
  torch::Tensor images = torch::randint(0, 256, {n, 32, 32, 3}, torch::kUInt8);
  torch::Tensor positions =
      torch::tensor(std::vector<int64_t>{0, 9, 1000, 123456789, 50001});
  for (int64_t padding : {int64_t{0}, kCifarnetPadding}) {
    const int64_t out = 24;
    const int64_t max = 32 + 2 * padding - out;
    preprocessing_internal::CifarCounterCrop p;
    p.n = n;
    p.height = 32;
    p.width = 32;
    p.channels = 3;
    p.padding = padding;
    p.out_h = out;
    p.out_w = out;
    p.max_y = max;
    p.max_x = max;
    preprocessing_internal::SetCifarCounterDraws(
        11, -63.0f, 63.0f, 0.2f, 1.8f, std::nextafter(63.0f, -63.0f),
        std::nextafter(1.8f, 0.2f), &p);
    torch::Tensor cropped = torch::full({n, 3, out, out}, -1.0f);
    torch::Tensor delta = torch::full({n}, -1000.0f);
    torch::Tensor factor = torch::full({n}, -1000.0f);
    p.images = images.data_ptr<uint8_t>();
    p.positions = positions.data_ptr<int64_t>();
    p.out = cropped.data_ptr<float>();
    p.delta = delta.data_ptr<float>();
    p.factor = factor.data_ptr<float>();
    for (int64_t e = 0; e < p.elements(); ++e) {
      preprocessing_internal::CifarCounterCropElement(p, e);
    }
    EXPECT_TRUE(torch::equal(
        delta, CounterUniform(CounterHash(positions, 11, 3), -63.0f, 63.0f)))
        << padding;
    EXPECT_TRUE(torch::equal(
        factor, CounterUniform(CounterHash(positions, 11, 4), 0.2f, 1.8f)))
        << padding;
    torch::Tensor cy = CounterUniformInt(CounterHash(positions, 11, 0), max);
    torch::Tensor cx = CounterUniformInt(CounterHash(positions, 11, 1), max);
    torch::Tensor flip = torch::bitwise_and(CounterHash(positions, 11, 2), 1);
    torch::Tensor padded = torch::constant_pad_nd(
        images, {0, 0, padding, padding, padding, padding});
    std::set<int64_t> kinds;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t y = cy[i].item<int64_t>();
      const int64_t x = cx[i].item<int64_t>();
      const bool mirrored = flip[i].item<int64_t>() != 0;
      kinds.insert(y * 1000 + x * 10 + mirrored);
      torch::Tensor want = padded[i].narrow(0, y, out).narrow(1, x, out);
      if (mirrored) want = want.flip({1});
      want = want.permute({2, 0, 1}).to(torch::kFloat32);
      EXPECT_TRUE(torch::equal(cropped[i], want))
          << "padding " << padding << ", image " << i << " crop (" << y << ", "
          << x << ") flip " << mirrored;
    }
    EXPECT_GT(kinds.size(), 2u);  // the images are cropped differently
  }
}

// On a GPU the counter form takes the fused kernel: the same bits as the
// tensor ops there, and the CPU's values.
TEST(CifarPreprocessingTest, CounterFormOnCudaTakesTheFusedKernelUnchanged) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(8);
  torch::Tensor images = torch::randint(0, 256, {64, 32, 32, 3}, torch::kUInt8);
  torch::Tensor positions = torch::arange(int64_t{5000}, int64_t{5064});
  PreprocessingOptions o;
  o.output_height = 24;
  o.output_width = 24;
  o.is_training = true;
  const torch::Device cuda(torch::kCUDA, 0);
  for (int64_t padding : {int64_t{0}, kCifarnetPadding}) {
    const bool was = SetKernelSwitch(KernelSwitch::kFusedKernels, true);
    torch::Tensor fused = ApplyCifarDistortionCounter(
        images.to(cuda), positions.to(cuda), 11, padding, o);
    SetKernelSwitch(KernelSwitch::kFusedKernels, false);
    torch::Tensor plain = ApplyCifarDistortionCounter(
        images.to(cuda), positions.to(cuda), 11, padding, o);
    SetKernelSwitch(KernelSwitch::kFusedKernels, was);
    EXPECT_TRUE(torch::equal(fused, plain)) << padding;
    torch::Tensor cpu =
        ApplyCifarDistortionCounter(images, positions, 11, padding, o);
    EXPECT_TRUE(torch::allclose(fused.cpu(), cpu, 1e-5, 1e-5)) << padding;
  }
}

}  // namespace
}  // namespace slimtorch
