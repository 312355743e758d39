// --precision's parts: the flag, the autocast scope (what runs in which
// type inside and after it), and TensorFlow's dynamic loss scaling rules
// (LossScaleOptimizer: halve and skip on a non-finite gradient, double
// after `growth_interval` finite steps in a row).

#include "slimtorch/train/precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

TEST(PrecisionTest, FlagValues) {
  EXPECT_EQ(ParsePrecision("fp32", torch::kCPU), Precision::kFloat32);
  EXPECT_EQ(ParsePrecision("bf16", torch::kCPU), Precision::kBFloat16);
  EXPECT_EQ(ParsePrecision("fp16", torch::Device("cuda:0")),
            Precision::kFloat16);
  EXPECT_STREQ(PrecisionName(Precision::kBFloat16), "bf16");
  for (const char* bad : {"fp16", "float16", ""}) {
    try {
      ParsePrecision(bad, torch::kCPU);
      FAIL() << "'" << bad << "' accepted on the CPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--precision"), std::string::npos)
          << e.what();
    }
  }
}

TEST(PrecisionTest, AutocastScopeCastsMatmulsInsideOnly) {
  const torch::Tensor a = torch::randn({8, 8});
  const torch::Tensor b = torch::randn({8, 8});
  {
    AutocastScope none(Precision::kFloat32, torch::kCPU);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  }
  {
    AutocastScope bf16(Precision::kBFloat16, torch::kCPU);
    const torch::Tensor c = torch::mm(a, b);
    EXPECT_EQ(c.scalar_type(), torch::kBFloat16);
    // Within bfloat16's rounding of the float32 product.
    const torch::Tensor exact =
        torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
    EXPECT_LE((c.to(torch::kDouble) - exact).abs().max().item<double>(),
              0.02 * (1 + exact.abs().max().item<double>()));
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat) << "scope left on";
}

// A whole net under bf16 autocast: every layer runs (the fused batch norm
// and LRN kernels fall back or convert), logits within bfloat16's reach of
// float32's.
TEST(PrecisionTest, NetsRunUnderBf16Autocast) {
  for (const char* name : {"cifarnet", "inception_v1", "mobilenet_v2_035"}) {
    torch::manual_seed(0);
    auto net = CreateNet(name, NetOptions().num_classes(10));
    net->module().eval();
    torch::NoGradGuard no_grad;
    const int64_t size = net->default_image_size();
    const torch::Tensor x = torch::randn({2, 3, size, size});
    const torch::Tensor want = net->Forward(x).logits;
    torch::Tensor got;
    {
      AutocastScope bf16(Precision::kBFloat16, torch::kCPU);
      got = net->Forward(x).logits;
    }
    const double scale = 1 + want.abs().max().item<double>();
    EXPECT_LE((got.to(torch::kFloat) - want).abs().max().item<double>(),
              0.1 * scale)
        << name;
  }
}

TEST(LossScalerTest, TensorFlowsDynamicRules) {
  LossScaler s(true, 1024.0, /*growth_interval=*/3);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_DOUBLE_EQ(s.Scale(torch::tensor(0.5)).item<double>(), 512.0);
  torch::Tensor w = torch::zeros({3}, torch::requires_grad());
  NamedTensors vars = {{"w", w}};
  auto set_grad = [&](float v) { w.mutable_grad() = torch::full({3}, v); };
  set_grad(2048.0f);
  EXPECT_TRUE(s.Unscale(vars));
  EXPECT_FLOAT_EQ(w.grad()[0].item<float>(), 2.0f);  // divided by 1024
  set_grad(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(s.Unscale(vars));  // skipped, scale halved
  EXPECT_EQ(s.scale(), 512.0);
  set_grad(std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(s.Unscale(vars));
  EXPECT_EQ(s.scale(), 256.0);
  for (int i = 0; i < 2; ++i) {
    set_grad(1.0f);
    EXPECT_TRUE(s.Unscale(vars));
    EXPECT_EQ(s.scale(), 256.0);
  }
  set_grad(1.0f);
  EXPECT_TRUE(s.Unscale(vars));  // the third finite step in a row
  EXPECT_EQ(s.scale(), 512.0);

  LossScaler floor(true, 1.0, 5);
  set_grad(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(floor.Unscale(vars));
  EXPECT_EQ(floor.scale(), 1.0);  // never below 1

  LossScaler off(false);
  set_grad(std::numeric_limits<float>::infinity());
  EXPECT_TRUE(off.Unscale(vars));  // disabled: nothing checked or changed
  EXPECT_TRUE(std::isinf(w.grad()[0].item<float>()));
  EXPECT_DOUBLE_EQ(off.Scale(torch::tensor(0.5)).item<double>(), 0.5);
}

}  // namespace
}  // namespace slimtorch
