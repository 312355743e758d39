#include "slimtorch/preprocessing/preprocessing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "preprocessing/preprocessing_test_util.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using preprocessing_test::MaxAbsDiff;
using preprocessing_test::Options;

TEST(LenetPreprocessingTest, ScalesTo128Centered) {
  PreprocessingOptions o;
  o.output_height = 2;
  o.output_width = 2;
  auto fn = GetPreprocessing("lenet", o);
  torch::Tensor img =
      torch::tensor({0, 128, 255, 64}, torch::kUInt8).reshape({2, 2, 1});
  std::mt19937_64 rng(0);
  torch::Tensor out = fn(img, rng);
  ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_FLOAT_EQ(out[0][0][0].item<float>(), -1.0f);
  EXPECT_FLOAT_EQ(out[0][0][1].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(out[0][1][0].item<float>(), 127.0f / 128.0f);
  EXPECT_FLOAT_EQ(out[0][1][1].item<float>(), -0.5f);
}

TEST(LenetPreprocessingTest, CropsOrPadsAndConvertsToGray) {
  PreprocessingOptions o;
  o.output_height = 4;
  o.output_width = 4;
  o.use_grayscale = true;
  auto fn = GetPreprocessing("lenet", o);
  torch::Tensor img = torch::full({2, 2, 3}, 128, torch::kUInt8);
  std::mt19937_64 rng(0);
  torch::Tensor out = fn(img, rng);
  ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{1, 4, 4}));
  // Zero padding (value 0 → -1) around a 2x2 centre of gray 128·0.9999 → ~0.
  EXPECT_FLOAT_EQ(out[0][0][0].item<float>(), -1.0f);
  EXPECT_NEAR(out[0][1][1].item<float>(), 0.0f, 1e-3);
  EXPECT_EQ(PreprocessedChannels(3, o), 1);
}

// tf.image.resize_image_with_crop_or_pad offsets, worked by hand.
TEST(ImageOpsTest, ResizeWithCropOrPadOffsets) {
  torch::Tensor img = torch::arange(25, torch::kFloat).reshape({5, 5, 1});
  torch::Tensor c = image_ops::ResizeWithCropOrPad(img, 3, 3);
  EXPECT_EQ(c[0][0][0].item<float>(), 6.0f);  // crop offset (5-3)//2 = 1
  torch::Tensor p = image_ops::ResizeWithCropOrPad(img, 8, 6);
  // pad offsets (8-5)//2 = 1 top, (6-5)//2 = 0 left.
  EXPECT_EQ(p[1][0][0].item<float>(), 0.0f + 0.0f);
  EXPECT_EQ(p[1][1][0].item<float>(), 1.0f);
  EXPECT_EQ(p[0][1][0].item<float>(), 0.0f);
  EXPECT_EQ(p[5][4][0].item<float>(), 24.0f);
}

TEST(PreprocessingRegistryTest, UnknownNameListsValidNames) {
  PreprocessingOptions o;
  o.output_height = o.output_width = 8;
  try {
    GetPreprocessing("nope", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lenet"), std::string::npos);
  }
}

// Walks the registry: every preprocessing keeps the requested size, in
// training and evaluation, and repeats under the same per-example seed.
TEST(PreprocessingRegistryTest, EveryEntryProducesRequestedShape) {
  for (const std::string& name : GetPreprocessingRegistry().Names()) {
    for (bool training : {true, false}) {
      PreprocessingOptions o;
      o.output_height = 20;
      o.output_width = 20;
      o.is_training = training;
      auto fn = GetPreprocessing(name, o);
      torch::Tensor img = torch::randint(0, 256, {24, 30, 3}, torch::kUInt8);
      std::mt19937_64 r1(5), r2(5);
      torch::Tensor a = fn(img, r1);
      torch::Tensor b = fn(img, r2);
      EXPECT_EQ(a.sizes().vec(), (std::vector<int64_t>{3, 20, 20})) << name;
      EXPECT_TRUE(torch::equal(a, b)) << name;
      EXPECT_EQ(a.scalar_type(), torch::kFloat32);
    }
  }
}

// Walks the batched registry: every entry has a per-image twin, keeps the
// requested size and repeats under the same per-example seeds.
TEST(PreprocessingRegistryTest, EveryBatchedEntryProducesRequestedShape) {
  for (const std::string& name : GetBatchPreprocessingRegistry().Names()) {
    EXPECT_TRUE(GetPreprocessingRegistry().Has(name)) << name;
    EXPECT_TRUE(HasBatchPreprocessing(name)) << name;
    for (bool training : {true, false}) {
      PreprocessingOptions o;
      o.output_height = 20;
      o.output_width = 20;
      o.is_training = training;
      auto fn = GetBatchPreprocessing(name, o);
      torch::Tensor images =
          torch::randint(0, 256, {2, 24, 30, 3}, torch::kUInt8);
      std::vector<std::mt19937_64> r1{std::mt19937_64(5), std::mt19937_64(6)};
      std::vector<std::mt19937_64> r2 = r1;
      torch::Tensor a = fn(images, r1);
      EXPECT_EQ(a.sizes().vec(), (std::vector<int64_t>{2, 3, 20, 20})) << name;
      EXPECT_TRUE(torch::equal(a, fn(images, r2))) << name;
      EXPECT_EQ(a.scalar_type(), torch::kFloat32);
    }
  }
  EXPECT_FALSE(HasBatchPreprocessing("nope"));
}

// The batched form equals the per-image one, example by example, and leaves
// every generator where the per-image calls leave it.
TEST(PreprocessingRegistryTest, BatchedEqualsPerImage) {
  struct Net {
    const char* name;
    int64_t out_h, out_w;
  };
  const Net nets[] = {{"cifarnet", 32, 32},  {"cifarnet_tutorial", 24, 24},
                      {"cifarnet", 28, 30},  {"lenet", 28, 28},
                      {"inception", 29, 31}, {"vgg", 24, 20}};
  torch::manual_seed(3);
  for (const Net& net : nets) {
    for (bool training : {true, false}) {
      for (bool gray : {false, true}) {
        for (int64_t channels : {3, 1}) {
          PreprocessingOptions o =
              Options(net.out_h, net.out_w, training, gray);
          auto per_image = GetPreprocessing(net.name, o);
          auto batched = GetBatchPreprocessing(net.name, o);
          const int64_t n = 7;
          torch::Tensor images =
              torch::randint(0, 256, {n, 32, 32, channels}, torch::kUInt8);
          std::vector<std::mt19937_64> rngs, expected_rngs;
          for (int64_t i = 0; i < n; ++i) {
            rngs.emplace_back(1000 + i);
            expected_rngs.emplace_back(1000 + i);
          }
          std::vector<torch::Tensor> singles;
          for (int64_t i = 0; i < n; ++i) {
            singles.push_back(per_image(images[i], expected_rngs[i]));
          }
          torch::Tensor out = batched(images, rngs);
          const std::string what =
              std::string(net.name) + (training ? " train" : " eval") +
              (gray ? " gray" : "") + " channels " + std::to_string(channels);
          const int64_t out_c = gray ? 1 : channels;
          ASSERT_EQ(out.sizes().vec(),
                    (std::vector<int64_t>{n, out_c, net.out_h, net.out_w}))
              << what;
          EXPECT_TRUE(out.is_contiguous()) << what;
          EXPECT_LE(MaxAbsDiff(out, torch::stack(singles)), 1e-4) << what;
          for (int64_t i = 0; i < n; ++i) {
            EXPECT_EQ(rngs[i](), expected_rngs[i]()) << what;
          }
        }
      }
    }
  }
}

// Every batched entry gives on a CUDA device what it gives on the CPU.
TEST(PreprocessingRegistryTest, BatchedRunsOnCudaLikeOnCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::string& name : GetBatchPreprocessingRegistry().Names()) {
    for (bool training : {true, false}) {
      auto fn = GetBatchPreprocessing(name, Options(24, 24, training));
      torch::Tensor images =
          torch::randint(0, 256, {16, 32, 32, 3}, torch::kUInt8);
      std::vector<std::mt19937_64> cpu_rngs, cuda_rngs;
      for (int i = 0; i < 16; ++i) {
        cpu_rngs.emplace_back(i);
        cuda_rngs.emplace_back(i);
      }
      torch::Tensor on_cpu = fn(images, cpu_rngs);
      torch::Tensor on_cuda = fn(images.to(torch::kCUDA), cuda_rngs);
      ASSERT_TRUE(on_cuda.is_cuda()) << name;
      EXPECT_LE(MaxAbsDiff(on_cuda.cpu(), on_cpu), 1e-4) << name;
    }
  }
}

}  // namespace
}  // namespace slimtorch
