#include "slimtorch/preprocessing/augment_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/preprocessing/augment.h"

namespace slimtorch {
namespace {

struct AugmentImage {
  int64_t c, h, w;
  std::vector<int> pixels;  // [C, H, W]
};

// torchvision's output of `op` at `magnitude` on AugmentImages()[image].
struct AugmentGolden {
  int image;
  std::string op;
  double magnitude;
  std::vector<int> pixels;
};

// AutoAugment's sub-policies and the policies' op tables, as torchvision
// has them.
struct PolicyOpGolden {
  std::string op;
  double probability;
  int bin;
};
struct PolicyGolden {
  std::string name;
  std::vector<std::vector<PolicyOpGolden>> sub_policies;
};
struct SpaceGolden {
  std::string flag;
  std::string op;
  bool signed_op;
  std::vector<double> magnitudes;
};

#include "golden/augment_goldens.inc"

torch::Tensor ToTensor(const std::vector<int>& pixels, int64_t c, int64_t h,
                       int64_t w) {
  return torch::tensor(std::vector<int64_t>(pixels.begin(), pixels.end()))
      .to(torch::kUInt8)
      .view({c, h, w});
}

// The ops that work in uint8 throughout (and the affine ones, whose
// nearest sampling picks whole pixels) must equal torchvision exactly;
// those that blend in float32 and truncate may differ by one step where a
// sum lands on an integer (a different summation order), so within 1/255.
bool ExactOp(AugmentOp op) {
  switch (op) {
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness:
    case AugmentOp::kAutoContrast:
      return false;
    default:
      return true;
  }
}

TEST(AugmentOpsTest, EqualTorchvisionOnGoldenImages) {
  ASSERT_EQ(AugmentGoldens().size(), 114u);
  int exact = 0, within_one = 0, off_by_one_pixels = 0;
  for (const AugmentGolden& g : AugmentGoldens()) {
    SCOPED_TRACE(g.op + " " + std::to_string(g.magnitude) + " on image " +
                 std::to_string(g.image));
    const AugmentImage& im = AugmentImages()[g.image];
    const torch::Tensor image = ToTensor(im.pixels, im.c, im.h, im.w);
    const AugmentOp op = AugmentOpByName(g.op);
    const torch::Tensor got = ApplyAugmentOp(image, op, g.magnitude);
    ASSERT_EQ(got.scalar_type(), torch::kUInt8);
    ASSERT_EQ(got.sizes(), image.sizes());
    const torch::Tensor want = ToTensor(g.pixels, im.c, im.h, im.w);
    const torch::Tensor diff =
        (got.to(torch::kInt32) - want.to(torch::kInt32)).abs();
    if (ExactOp(op)) {
      EXPECT_EQ(diff.max().item<int>(), 0);
      ++exact;
    } else {
      EXPECT_LE(diff.max().item<int>(), 1);
      off_by_one_pixels += diff.gt(0).sum().item<int>();
      ++within_one;
    }
  }
  EXPECT_GT(exact, 60);
  EXPECT_GT(within_one, 25);
  // Rare: a handful of pixels over all the blending cases.
  EXPECT_LE(off_by_one_pixels, 10);
}

// The input is never changed, and every op keeps the shape and the dtype.
TEST(AugmentOpsTest, LeaveTheInputAlone) {
  const AugmentImage& im = AugmentImages()[0];
  const torch::Tensor image = ToTensor(im.pixels, im.c, im.h, im.w);
  const torch::Tensor before = image.clone();
  for (const char* name :
       {"ShearX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
        "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
        "Invert", "Identity"}) {
    const torch::Tensor out = ApplyAugmentOp(image, AugmentOpByName(name), 0.4);
    EXPECT_EQ(out.sizes(), image.sizes()) << name;
    EXPECT_TRUE(torch::equal(image, before)) << name;
  }
}

TEST(AugmentOpsTest, RejectsWhatTorchvisionRejects) {
  const torch::Tensor two = torch::zeros({2, 4, 4}, torch::kUInt8);
  EXPECT_THROW(ApplyAugmentOp(two, AugmentOp::kInvert, 0), Error);
  const torch::Tensor floats = torch::zeros({3, 4, 4});
  EXPECT_THROW(ApplyAugmentOp(floats, AugmentOp::kInvert, 0), Error);
  const torch::Tensor rgb = torch::zeros({3, 4, 4}, torch::kUInt8);
  EXPECT_THROW(ApplyAugmentOp(rgb, AugmentOp::kBrightness, -1.5), Error);
  try {
    AugmentOpByName("Shear");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ShearX, ShearY"), std::string::npos)
        << e.what();
  }
}

TEST(AugmentationTest, AutoAugmentPoliciesAreTorchvisions) {
  ASSERT_EQ(PolicyGoldens().size(), 3u);
  for (const PolicyGolden& g : PolicyGoldens()) {
    SCOPED_TRACE(g.name);
    const auto a = Augmentation::Create(g.name, 0);
    ASSERT_EQ(a->SubPolicies().size(), g.sub_policies.size());
    for (size_t i = 0; i < g.sub_policies.size(); ++i) {
      ASSERT_EQ(a->SubPolicies()[i].size(), 2u);
      for (size_t k = 0; k < 2; ++k) {
        const auto& got = a->SubPolicies()[i][k];
        const auto& want = g.sub_policies[i][k];
        EXPECT_EQ(AugmentOpName(got.op), want.op) << i << "/" << k;
        EXPECT_EQ(got.probability, want.probability) << i << "/" << k;
        EXPECT_EQ(got.bin, want.bin) << i << "/" << k;
      }
    }
  }
}

TEST(AugmentationTest, MagnitudeTablesAreTorchvisions) {
  std::map<std::string, std::vector<const SpaceGolden*>> by_flag;
  for (const SpaceGolden& g : SpaceGoldens()) by_flag[g.flag].push_back(&g);
  ASSERT_EQ(by_flag.size(), 3u);
  for (const auto& [flag, rows] : by_flag) {
    SCOPED_TRACE(flag);
    const auto space = Augmentation::Create(flag, 0)->Space(13, 17);
    ASSERT_EQ(space.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(AugmentOpName(space[i].op), rows[i]->op);
      EXPECT_EQ(space[i].signed_op, rows[i]->signed_op) << rows[i]->op;
      EXPECT_EQ(space[i].magnitudes, rows[i]->magnitudes) << rows[i]->op;
    }
  }
}

// RandAugment draws its ops uniformly (each of 14 with 1/14), at the bin
// asked, signs a fair coin; TrivialAugmentWide its bins uniformly;
// AutoAugment its sub-policies uniformly and each op with its probability.
TEST(AugmentationTest, PoliciesDrawWithThePublishedProbabilities) {
  const int kDraws = 28000;
  std::mt19937_64 rng(5);
  const auto ra = Augmentation::Create("rand-m9-n2", 0);
  const auto space = ra->Space(32, 32);
  std::map<AugmentOp, int> ops;
  int negative = 0, signed_ops = 0;
  for (int i = 0; i < kDraws; ++i) {
    const ExampleAugment a = ra->Draw(rng, 32, 32);
    ASSERT_EQ(a.steps.size(), 2u);
    for (const AugmentStep& s : a.steps) {
      ++ops[s.op];
      for (const auto& sp : space) {
        if (sp.op != s.op || sp.magnitudes.empty()) continue;
        EXPECT_EQ(std::abs(s.magnitude), std::abs(sp.magnitudes[9]));
        if (sp.signed_op) {
          ++signed_ops;
          negative += s.magnitude < 0;
        }
      }
    }
  }
  ASSERT_EQ(ops.size(), 14u);
  // 4000 expected each; the binomial standard deviation is ~61.
  for (const auto& [op, n] : ops)
    EXPECT_NEAR(n, 4000, 300) << AugmentOpName(op);
  EXPECT_NEAR(negative / static_cast<double>(signed_ops), 0.5, 0.01);

  const auto ta = Augmentation::Create("trivialaugment_wide", 0);
  const auto ta_space = ta->Space(32, 32);
  std::map<double, int> rotations;
  for (int i = 0; i < kDraws; ++i) {
    const ExampleAugment a = ta->Draw(rng, 32, 32);
    ASSERT_EQ(a.steps.size(), 1u);
    if (a.steps[0].op == AugmentOp::kRotate) {
      ++rotations[std::abs(a.steps[0].magnitude)];
    }
  }
  // 2000 rotations over 31 bins (bin 0 is 0 either sign): ~65 each.
  EXPECT_EQ(rotations.size(), 31u);
  for (const auto& [m, n] : rotations) EXPECT_NEAR(n, 2000 / 31.0, 40) << m;

  // AutoAugment ImageNet: sub-policy 7 is Posterize 0.8 then Equalize 1.0;
  // every drawn step must come from one sub-policy, and over all draws
  // Equalize (in 12 of the 25, at 0.0-1.0) has its expected frequency.
  const auto aa = Augmentation::Create("autoaugment_imagenet", 0);
  double expected_equalize = 0;
  for (const auto& sub : aa->SubPolicies()) {
    for (const auto& p : sub) {
      if (p.op == AugmentOp::kEqualize) expected_equalize += p.probability / 25;
    }
  }
  int equalize = 0;
  for (int i = 0; i < kDraws; ++i) {
    const ExampleAugment a = aa->Draw(rng, 32, 32);
    ASSERT_LE(a.steps.size(), 2u);
    for (const AugmentStep& s : a.steps)
      equalize += s.op == AugmentOp::kEqualize;
  }
  EXPECT_NEAR(equalize / static_cast<double>(kDraws), expected_equalize, 0.015);
}

// Random erasing: the probability, boxes inside the image of the areas and
// aspects asked, set to 0 by EraseBatch and nothing else.
TEST(AugmentationTest, RandomErasingDrawsBoxesAsTorchvision) {
  const auto er = Augmentation::Create("", 0.25);
  ASSERT_NE(er, nullptr);
  EXPECT_FALSE(er->has_policy());
  std::mt19937_64 rng(9);
  int erased = 0;
  const int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const ExampleAugment a = er->Draw(rng, 24, 20);
    EXPECT_TRUE(a.steps.empty());
    if (!a.erase.erase) continue;
    ++erased;
    const EraseBox& b = a.erase;
    ASSERT_TRUE(b.h > 0 && b.w > 0 && b.h < 24 && b.w < 20);
    ASSERT_TRUE(b.y >= 0 && b.x >= 0 && b.y + b.h <= 24 && b.x + b.w <= 20);
    // The area before rounding was 2 % to 33 %; rounding each side moves
    // it by less than a side's length.
    EXPECT_LE(b.h * b.w, 0.33 * 480 + b.h + b.w + 1);
  }
  // Draws that fit in none of 10 tries stay unerased (rare at this size).
  EXPECT_NEAR(erased / static_cast<double>(kDraws), 0.25, 0.015);

  torch::Tensor batch = torch::ones({2, 3, 6, 5});
  ExampleAugment a;
  a.erase = {true, 1, 2, 3, 2};
  EraseBatch(batch, {&a, nullptr});
  EXPECT_EQ(batch.sum().item<double>(), 2 * 90 - 3 * 6);
  EXPECT_EQ(batch[0].narrow(1, 1, 3).narrow(2, 2, 2).abs().sum().item<double>(),
            0.0);
}

// A float batch in [0, 1] goes to uint8, through the ops and back: an op
// that changes nothing (Identity, Posterize 8) returns the values rounded to
// 1/255; an example without steps is untouched.
TEST(AugmentationTest, FloatBatchRoundTripsThroughUint8) {
  torch::manual_seed(3);
  torch::Tensor batch = torch::rand({2, 3, 7, 7});
  const torch::Tensor before = batch.clone();
  ExampleAugment a;
  a.steps = {{AugmentOp::kPosterize, 8.0}, {AugmentOp::kIdentity, 0.0}};
  ExampleAugment none;
  AugmentFloatBatch(batch, {&a, &none}, 1.0 / 255.0);
  EXPECT_TRUE(torch::equal(batch[1], before[1]));
  EXPECT_LE((batch[0] - before[0]).abs().max().item<double>(),
            0.5 / 255 + 1e-6);
  ExampleAugment inv;
  inv.steps = {{AugmentOp::kInvert, 0.0}};
  torch::Tensor pixels =
      torch::arange(0, 256, torch::kFloat32).view({1, 1, 16, 16});
  AugmentFloatBatch(pixels, {&inv}, 1.0);
  EXPECT_TRUE(torch::equal(pixels.flatten(),
                           torch::arange(255, -1, -1, torch::kFloat32)));
}

TEST(AugmentationTest, FlagsFailLoudly) {
  EXPECT_EQ(Augmentation::Create("", 0), nullptr);
  for (const char* bad : {"rand", "rand-m9", "rand-m9-n2-mstd0.5",
                          "rand-m31-n2", "autoaugment", "trivialaugment"}) {
    try {
      Augmentation::Create(bad, 0);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find(std::string("--auto_augment=") + bad),
          std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(Augmentation::Create("", 1.5), Error);
  EXPECT_EQ(Augmentation::Create("rand-m9-n2", 0.1)->Describe(),
            "rand-m9-n2, random_erase 0.1");
}

}  // namespace
}  // namespace slimtorch
