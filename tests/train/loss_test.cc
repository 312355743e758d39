#include "slimtorch/train/loss.h"

#include <gtest/gtest.h>

#include <cmath>

namespace slimtorch {
namespace {

// Worked by hand: for logits z and label y, CE = log(sum exp z) - z_y; with
// smoothing ls over K classes the target is (1-ls)*onehot + ls/K.
TEST(SoftmaxCrossEntropyTest, MatchesHandWorkedValues) {
  torch::Tensor logits = torch::tensor({{1.0f, 2.0f, 3.0f}, {0.0f, 0.0f, 0.0f}});
  torch::Tensor labels = torch::tensor({2, 0}, torch::kInt64);
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double ce0 = lse0 - 3.0;
  double ce1 = std::log(3.0);
  EXPECT_NEAR(SoftmaxCrossEntropy(logits, labels).item<double>(),
              (ce0 + ce1) / 2, 1e-6);
  EXPECT_NEAR(SoftmaxCrossEntropy(logits, labels, 0.0, 0.4).item<double>(),
              0.4 * (ce0 + ce1) / 2, 1e-6);
  const double ls = 0.1;
  double t_hi = 1 - ls + ls / 3, t_lo = ls / 3;
  double s0 = -(t_lo * (1 - lse0) + t_lo * (2 - lse0) + t_hi * (3 - lse0));
  double s1 = std::log(3.0);  // uniform logits: any target gives log K
  EXPECT_NEAR(SoftmaxCrossEntropy(logits, labels, ls).item<double>(),
              (s0 + s1) / 2, 1e-6);
}

TEST(SoftmaxCrossEntropyTest, GradientIsSoftmaxMinusTarget) {
  torch::Tensor logits =
      torch::tensor({{0.5f, -1.0f, 2.0f}}).set_requires_grad(true);
  torch::Tensor labels = torch::tensor({1}, torch::kInt64);
  SoftmaxCrossEntropy(logits, labels).backward();
  torch::Tensor expected = torch::softmax(logits.detach(), 1);
  expected[0][1] -= 1.0;
  EXPECT_TRUE(torch::allclose(logits.grad(), expected, 1e-5, 1e-6));
}

}  // namespace
}  // namespace slimtorch
