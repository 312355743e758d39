#include "slimtorch/train/batch_mixing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/train/loss.h"

namespace slimtorch {
namespace {

// timm's Mixup on one batch (scripts/golden/gen_mixing_goldens.py): its
// draws, and the images and targets it made.
struct MixingGolden {
  std::string label;
  bool cutmix;
  double lam;  // as drawn
  int64_t cy, cx;
  double smoothing;
  std::vector<float> images;
  std::vector<float> targets;
};

#include "golden/mixing_goldens.inc"

constexpr int64_t kN = 6, kC = 2, kH = 7, kW = 9, kK = 10;

// x[n, c, h, w] = ((97 n + 31 c + 7 h + 3 w) % 251) / 251, as the script.
torch::Tensor GoldenImages() {
  torch::Tensor x = torch::empty({kN, kC, kH, kW});
  auto a = x.accessor<float, 4>();
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t h = 0; h < kH; ++h)
        for (int64_t w = 0; w < kW; ++w)
          a[n][c][h][w] =
              static_cast<float>((97 * n + 31 * c + 7 * h + 3 * w) % 251) /
              251.0f;
  return x;
}

TEST(BatchMixingTest, MatchesTimmForTheSameDraws) {
  ASSERT_EQ(MixingGoldens().size(), 7u);
  const torch::Tensor labels = torch::tensor({3, 1, 4, 1, 5, 9}, torch::kInt64);
  int cutmixes = 0, mixups = 0, unmixed = 0;
  for (const MixingGolden& g : MixingGoldens()) {
    SCOPED_TRACE(g.label);
    const torch::Tensor images = GoldenImages();
    const torch::Tensor before = images.clone();
    MixDraws d;
    d.cutmix = g.cutmix;
    d.lam = g.lam;
    d.cy = g.cy;
    d.cx = g.cx;
    const MixedBatch m = MixBatch(images, labels, kK, d, g.smoothing);
    EXPECT_TRUE(torch::equal(images, before)) << "the input changed";
    const torch::Tensor want_images =
        torch::tensor(g.images).view({kN, kC, kH, kW});
    const torch::Tensor want_targets = torch::tensor(g.targets).view({kN, kK});
    EXPECT_LE((m.images - want_images).abs().max().item<double>(), 1e-7);
    EXPECT_LE((m.targets - want_targets).abs().max().item<double>(), 1e-7);
    // Each row of targets is a distribution.
    EXPECT_TRUE(torch::allclose(m.targets.sum(1), torch::ones({kN})));
    if (g.lam == 1.0) {
      ++unmixed;
    } else if (g.cutmix) {
      ++cutmixes;
      EXPECT_NE(m.lam, g.lam);  // corrected to the box's area
    } else {
      ++mixups;
      EXPECT_EQ(m.lam, g.lam);
    }
  }
  EXPECT_GE(cutmixes, 3);
  EXPECT_GE(mixups, 2);
  EXPECT_EQ(unmixed, 1);
}

// The draws follow the stated distributions: the mix and method coins'
// frequencies, Beta(a, a)'s mean 1/2 and variance 1 / (4 (2a + 1)), and the
// box centre uniform over rows and columns.
TEST(BatchMixingTest, DrawsHaveTheStatedDistributions) {
  MixOptions o;
  o.mixup_alpha = 0.2;
  o.cutmix_alpha = 1.0;
  o.mix_prob = 0.8;
  o.switch_prob = 0.3;
  const int kDraws = 40000;
  std::mt19937_64 rng = MixGenerator(7, 0, 0);
  int mixed = 0, cut = 0;
  double sum[2] = {0, 0}, sum2[2] = {0, 0};
  int count[2] = {0, 0};
  std::vector<int> rows(5, 0), cols(3, 0);
  for (int i = 0; i < kDraws; ++i) {
    const MixDraws d = DrawMix(o, 5, 3, rng);
    if (d.lam == 1.0 && !d.cutmix) continue;
    ++mixed;
    const int m = d.cutmix ? 1 : 0;
    cut += m;
    sum[m] += d.lam;
    sum2[m] += d.lam * d.lam;
    ++count[m];
    if (d.cutmix) {
      ASSERT_TRUE(d.cy >= 0 && d.cy < 5 && d.cx >= 0 && d.cx < 3);
      ++rows[d.cy];
      ++cols[d.cx];
    }
  }
  // Binomial standard errors are ~0.002; 5 of them.
  EXPECT_NEAR(mixed / static_cast<double>(kDraws), 0.8, 0.01);
  EXPECT_NEAR(cut / static_cast<double>(mixed), 0.3, 0.012);
  const double alphas[2] = {0.2, 1.0};
  for (int m = 0; m < 2; ++m) {
    const double mean = sum[m] / count[m];
    const double var = sum2[m] / count[m] - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.01) << "alpha " << alphas[m];
    EXPECT_NEAR(var, 1.0 / (4 * (2 * alphas[m] + 1)), 0.01)
        << "alpha " << alphas[m];
  }
  for (int r : rows) EXPECT_NEAR(r / static_cast<double>(cut), 0.2, 0.02);
  for (int c : cols) EXPECT_NEAR(c / static_cast<double>(cut), 1 / 3.0, 0.02);
}

TEST(BatchMixingTest, OffDrawsNothingAndOnlyMixupOrCutmixWhenAlone) {
  MixOptions o;
  std::mt19937_64 rng = MixGenerator(1, 0, 0);
  const std::mt19937_64 untouched = rng;
  EXPECT_EQ(DrawMix(o, 8, 8, rng).lam, 1.0);
  EXPECT_EQ(rng, untouched);
  o.cutmix_alpha = 1.0;
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(DrawMix(o, 8, 8, rng).cutmix);
  o.cutmix_alpha = 0;
  o.mixup_alpha = 1.0;
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(DrawMix(o, 8, 8, rng).cutmix);
}

// A resumed run draws what the uninterrupted one drew: the generator is a
// function of (seed, replica, micro-batch) alone, and they all matter.
TEST(BatchMixingTest, GeneratorDependsOnSeedReplicaAndMicroBatchOnly) {
  EXPECT_EQ(MixGenerator(3, 1, 17)(), MixGenerator(3, 1, 17)());
  EXPECT_NE(MixGenerator(3, 1, 17)(), MixGenerator(4, 1, 17)());
  EXPECT_NE(MixGenerator(3, 1, 17)(), MixGenerator(3, 0, 17)());
  EXPECT_NE(MixGenerator(3, 1, 17)(), MixGenerator(3, 1, 18)());
}

// The soft-target cross entropy equals the hard one for one-hot targets,
// and TF's label smoothing for smoothed one-hot targets.
TEST(BatchMixingTest, SoftTargetsLossEqualsHardAndSmoothedLabels) {
  torch::manual_seed(2);
  const torch::Tensor logits = torch::randn({kN, kK});
  const torch::Tensor labels = torch::tensor({3, 1, 4, 1, 5, 9}, torch::kInt64);
  for (double ls : {0.0, 0.1}) {
    const MixedBatch m =
        MixBatch(torch::zeros({kN, 1, 2, 2}), labels, kK, MixDraws(), ls);
    EXPECT_NEAR(SoftmaxCrossEntropy(logits, m.targets).item<double>(),
                SoftmaxCrossEntropy(logits, labels, ls).item<double>(), 1e-6);
  }
}

TEST(BatchMixingTest, RejectsOptionsOutOfRange) {
  auto error = [](MixOptions o) -> std::string {
    try {
      CheckMixOptions(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  MixOptions o;
  EXPECT_EQ(error(o), "");
  o.mixup_alpha = -1;
  EXPECT_NE(error(o).find("--mixup_alpha"), std::string::npos);
  o = MixOptions();
  o.mix_prob = 1.5;
  EXPECT_NE(error(o).find("--mix_prob must be in [0, 1], got 1.5"),
            std::string::npos);
  o = MixOptions();
  o.switch_prob = -0.1;
  EXPECT_NE(error(o).find("--mix_switch_prob"), std::string::npos);
}

}  // namespace
}  // namespace slimtorch
