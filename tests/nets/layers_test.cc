#include "slimtorch/nets/layers.h"

#include <gtest/gtest.h>

namespace slimtorch {
namespace nets {
namespace {

// TensorFlow's 'SAME': out = ceil(in / s), total pad = max((out - 1) * s +
// k - in, 0), the odd pixel at the bottom/right. Worked by hand.
TEST(SamePaddingTest, MatchesTensorFlowFormula) {
  EXPECT_EQ(SamePadding(28, 28, 5, 5, 1), (std::array<int64_t, 4>{2, 2, 2, 2}));
  EXPECT_EQ(SamePadding(7, 7, 3, 3, 2), (std::array<int64_t, 4>{1, 1, 1, 1}));
  // in 8, k 3, s 2: out 4, total 3*2+3-8 = 1 → top 0, bottom 1.
  EXPECT_EQ(SamePadding(8, 8, 3, 3, 2), (std::array<int64_t, 4>{0, 1, 0, 1}));
  // in 224, k 7, s 2: out 112, total 111*2+7-224 = 5 → 2, 3.
  EXPECT_EQ(SamePadding(224, 224, 7, 7, 2),
            (std::array<int64_t, 4>{2, 3, 2, 3}));
  // in 5, k 1, s 2: out 3, total 2*2+1-5 = 0.
  EXPECT_EQ(SamePadding(5, 6, 1, 1, 2), (std::array<int64_t, 4>{0, 0, 0, 0}));
}

TEST(Conv2dTest, SameConvKeepsSizeAndMatchesManualPadding) {
  torch::manual_seed(1);
  Conv2d conv(Conv2dOptions(2, 3, 3).stride(2).activation(Activation::kNone));
  torch::Tensor x = torch::randn({1, 2, 8, 8});
  torch::Tensor y = conv(x);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{1, 3, 4, 4}));
  // Asymmetric: pad 0 top/left, 1 bottom/right, then a VALID conv.
  torch::Tensor manual =
      torch::conv2d(torch::constant_pad_nd(x, {0, 1, 0, 1}), conv->weights,
                    conv->biases, {2, 2});
  EXPECT_TRUE(torch::allclose(y, manual));
}

TEST(Conv2dTest, ValidAndReluAndNoBias) {
  Conv2d conv(Conv2dOptions(1, 1, 3)
                  .padding(Padding::kValid)
                  .use_bias(false)
                  .weights_init(Initializer::Constant(1.0)));
  EXPECT_FALSE(conv->biases.defined());
  EXPECT_EQ(conv->named_parameters().size(), 1u);
  torch::Tensor x = -torch::ones({1, 1, 5, 5});
  torch::Tensor y = conv(x);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(y.abs().sum().item<float>(), 0.0f);  // ReLU of -9
}

TEST(MaxPoolTest, SamePadsWithMinusInfinity) {
  torch::Tensor x = -torch::arange(9, torch::kFloat).reshape({1, 1, 3, 3});
  torch::Tensor y = MaxPool2d(x, 2, 2, Padding::kSame);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{1, 1, 2, 2}));
  // Bottom-right window holds only x[2][2] = -8 and padding.
  EXPECT_EQ(y[0][0][1][1].item<float>(), -8.0f);
  EXPECT_EQ(MaxPool2d(x, 2, 2).sizes().vec(),
            (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(FlattenTest, UsesNhwcOrder) {
  torch::Tensor x = torch::arange(2 * 3 * 2 * 2, torch::kFloat)
                        .reshape({2, 3, 2, 2});  // N C H W
  torch::Tensor f = FlattenNhwc(x);
  ASSERT_EQ(f.sizes().vec(), (std::vector<int64_t>{2, 12}));
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          EXPECT_EQ(f[n][(h * 2 + w) * 3 + c].item<float>(),
                    x[n][c][h][w].item<float>());
}

TEST(InitializerTest, XavierUniformBounds) {
  torch::manual_seed(3);
  torch::Tensor t = torch::empty({200, 300});
  Initialize(t, Initializer::XavierUniform(), 300, 200);
  double limit = std::sqrt(6.0 / 500.0);
  EXPECT_LE(t.abs().max().item<double>(), limit);
  EXPECT_GT(t.abs().max().item<double>(), 0.95 * limit);
}

}  // namespace
}  // namespace nets
}  // namespace slimtorch
