// --auto_augment and --random_erase inside the preprocessing chains: the
// per-image and batched forms agree, the draws come after the
// preprocessing's own, the policy runs on the cropped image and the erasing
// on the output, and evaluation never augments.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "preprocessing_test_util.h"
#include "slimtorch/preprocessing/augment.h"
#include "slimtorch/preprocessing/cifarnet_preprocessing.h"
#include "slimtorch/preprocessing/photo_preprocessing.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {
namespace {

using preprocessing_test::MaxAbsDiff;
using preprocessing_test::Options;

PreprocessingOptions Augmented(int64_t out_h, int64_t out_w,
                               const std::string& policy, double erase,
                               bool grayscale = false) {
  PreprocessingOptions o = Options(out_h, out_w, true, grayscale);
  o.augmentation = Augmentation::Create(policy, erase);
  return o;
}

TEST(AugmentPreprocessingTest, BatchedEqualsPerImageWithAugmentation) {
  struct Net {
    const char* name;
    int64_t out_h, out_w;
  };
  const Net nets[] = {{"cifarnet", 32, 32},
                      {"cifarnet_tutorial", 24, 24},
                      {"lenet", 28, 28},
                      {"inception", 29, 31},
                      {"vgg", 24, 20}};
  torch::manual_seed(4);
  for (const Net& net : nets) {
    for (const char* policy :
         {"rand-m9-n2", "trivialaugment_wide", "autoaugment_imagenet", ""}) {
      for (int64_t channels : {3, 1}) {
        const std::string what = std::string(net.name) + " " + policy +
                                 " channels " + std::to_string(channels);
        const PreprocessingOptions o =
            Augmented(net.out_h, net.out_w, policy, 0.5);
        auto per_image = GetPreprocessing(net.name, o);
        auto batched = GetBatchPreprocessing(net.name, o);
        const int64_t n = 6;
        const torch::Tensor images =
            torch::randint(0, 256, {n, 32, 32, channels}, torch::kUInt8);
        std::vector<std::mt19937_64> rngs, singles_rngs;
        for (int64_t i = 0; i < n; ++i) {
          rngs.emplace_back(50 + i);
          singles_rngs.emplace_back(50 + i);
        }
        std::vector<torch::Tensor> singles;
        for (int64_t i = 0; i < n; ++i) {
          singles.push_back(per_image(images[i], singles_rngs[i]));
        }
        const torch::Tensor out = batched(images, rngs);
        ASSERT_EQ(out.sizes().vec(),
                  (std::vector<int64_t>{n, channels, net.out_h, net.out_w}))
            << what;
        EXPECT_LE(MaxAbsDiff(out, torch::stack(singles)), 1e-4) << what;
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_EQ(rngs[i](), singles_rngs[i]()) << what;
        }
      }
    }
  }
}

// The policy runs on the cropped and flipped values and the erasing on the
// output: cifarnet_tutorial (crop 24 of 32, flip, brightness, contrast,
// standardization) equals the crop done here, the draws' steps on it in
// uint8, then TF-Slim's chain on that crop (an offset-0 crop, no flip), and
// the box set to 0. The draws: the distortion's five, then the policy's.
TEST(AugmentPreprocessingTest, PolicyRunsAfterTheCropErasingOnTheOutput) {
  const PreprocessingOptions o = Augmented(24, 24, "rand-m9-n2", 1.0);
  auto per_image = GetPreprocessing("cifarnet_tutorial", o);
  torch::manual_seed(6);
  const torch::Tensor image =
      torch::randint(0, 256, {32, 32, 3}, torch::kUInt8);
  int checked = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    std::mt19937_64 rng(seed), replay(seed);
    const torch::Tensor got = per_image(image, rng);
    const CifarDistortion d = DrawCifarDistortion(replay, 8, 8);
    const ExampleAugment a = o.augmentation->Draw(replay, 24, 24);
    EXPECT_EQ(rng(), replay()) << "the draws differ";
    torch::Tensor crop = image.narrow(0, d.crop_y, 24).narrow(1, d.crop_x, 24);
    if (d.flip) crop = crop.flip({1});
    const torch::Tensor augmented =
        ApplyAugmentSteps(crop.permute({2, 0, 1}).contiguous(), a.steps)
            .permute({1, 2, 0})
            .unsqueeze(0);
    const auto zero = torch::zeros({1}, torch::kInt64);
    torch::Tensor want = ApplyCifarDistortionTensors(
        augmented, zero, zero, zero, torch::full({1}, d.brightness_delta),
        torch::full({1}, d.contrast_factor), 0, Options(24, 24, true));
    if (a.erase.erase) {
      want[0]
          .narrow(1, a.erase.y, a.erase.h)
          .narrow(2, a.erase.x, a.erase.w)
          .zero_();
      ++checked;
    }
    EXPECT_LE(MaxAbsDiff(got, want[0]), 1e-5) << "seed " << seed;
  }
  EXPECT_GT(checked, 6);
}

// Without --auto_augment / --random_erase nothing changes (TF-Slim's draws
// and values); evaluation never augments; the fused photo path and the
// counter-based draws stand aside.
TEST(AugmentPreprocessingTest, OffChangesNothingAndEvaluationNeverAugments) {
  torch::manual_seed(8);
  const torch::Tensor image =
      torch::randint(0, 256, {32, 32, 3}, torch::kUInt8);
  for (const char* name : {"cifarnet", "inception", "vgg", "lenet"}) {
    PreprocessingOptions plain = Options(24, 24, true);
    PreprocessingOptions eval = Options(24, 24, false);
    PreprocessingOptions eval_aug = eval;
    eval_aug.augmentation = Augmentation::Create("rand-m9-n2", 1.0);
    std::mt19937_64 a(3), b(3);
    EXPECT_TRUE(torch::equal(GetPreprocessing(name, eval)(image, a),
                             GetPreprocessing(name, eval_aug)(image, b)))
        << name;
    EXPECT_EQ(a(), b()) << name;
    PreprocessingOptions aug = plain;
    aug.augmentation = eval_aug.augmentation;
    EXPECT_EQ(PhotoPreprocessing::Create(name, aug), nullptr) << name;
    EXPECT_FALSE(GetCounterBatchPreprocessing(name, aug)) << name;
  }
  EXPECT_NE(PhotoPreprocessing::Create("inception", Options(24, 24, true)),
            nullptr);
  EXPECT_TRUE(GetCounterBatchPreprocessing("cifarnet", Options(24, 24, true)));
}

}  // namespace
}  // namespace slimtorch
