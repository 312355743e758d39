// slimtorch's own depthwise convolution backward kernel
// (src/nets/kernels/cpu/depthwise_kernel.h): gradients against LibTorch's
// convolution in float64 on TensorFlow's explicitly padded input, for the
// filters and strides the zoo uses (and odd ones), channel counts below, at
// and between vector widths, SAME (asymmetric pads included) and VALID;
// the same bits at every thread count and on the FMA instruction sets; and
// the layers route to it (src/nets/depthwise_conv.h) only where it applies.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nets/depthwise_conv.h"
#include "nets/kernels/cpu/depthwise_kernel.h"
#include "slimtorch/core/cpu_isa.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/nets/layers.h"

namespace slimtorch {
namespace nets {
namespace {

// max |a - b| / max |b|.
double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor bd = b.to(torch::kFloat64);
  return ((a.to(torch::kFloat64) - bd).abs().max() / bd.abs().max())
      .item<double>();
}

struct Case {
  int64_t channels, height, width, kernel, stride;
  Padding padding;
};

std::string Describe(const Case& c) {
  return std::to_string(c.channels) + " channels " + std::to_string(c.height) +
         "x" + std::to_string(c.width) + " kernel " + std::to_string(c.kernel) +
         " stride " + std::to_string(c.stride) +
         (c.padding == Padding::kSame ? " SAME" : " VALID");
}

// {top, left, bottom, right} as TensorFlow pads.
std::array<int64_t, 4> TfPads(const Case& c) {
  if (c.padding == Padding::kValid) return {0, 0, 0, 0};
  const std::array<int64_t, 4> p =
      SamePadding(c.height, c.width, c.kernel, c.kernel, c.stride);
  return {p[0], p[2], p[1], p[3]};
}

// The reference: pad as TensorFlow does, then LibTorch's grouped
// convolution in float64 (no depthwise kernel of ours runs on float64).
torch::Tensor Reference(const torch::Tensor& x, const torch::Tensor& w,
                        const Case& c) {
  const std::array<int64_t, 4> p = TfPads(c);
  const std::vector<int64_t> stride = {c.stride, c.stride}, zero = {0, 0},
                             one = {1, 1};
  return torch::conv2d(torch::constant_pad_nd(x, {p[1], p[3], p[0], p[2]}), w,
                       torch::Tensor(), stride, zero, one, c.channels);
}

std::vector<Case> Cases() {
  return {
      {32, 16, 16, 3, 1, Padding::kSame},   {44, 14, 13, 5, 1, Padding::kSame},
      {44, 15, 15, 7, 2, Padding::kSame},   {16, 12, 12, 5, 2, Padding::kSame},
      {3, 9, 10, 3, 1, Padding::kSame},     {21, 8, 8, 3, 2, Padding::kValid},
      {40, 7, 7, 7, 1, Padding::kSame},     {72, 6, 9, 1, 1, Padding::kSame},
      {17, 11, 11, 4, 3, Padding::kSame},   {100, 5, 5, 5, 1, Padding::kValid},
      {64, 1, 1, 3, 1, Padding::kSame},     {24, 13, 13, 3, 2, Padding::kSame},
  };
}

// dx and dw of the own kernel for g, x [N, C, H, W] channels-last and w.
std::pair<torch::Tensor, torch::Tensor> OwnBackward(const torch::Tensor& x,
                                                    const torch::Tensor& w,
                                                    const torch::Tensor& g,
                                                    const Case& c) {
  const std::array<int64_t, 4> p = TfPads(c);
  internal::DepthwiseShape s;
  s.n = x.size(0);
  s.channels = c.channels;
  s.in_h = c.height;
  s.in_w = c.width;
  s.kernel_h = s.kernel_w = c.kernel;
  s.stride = c.stride;
  s.pad_top = p[0];
  s.pad_left = p[1];
  s.out_h = g.size(2);
  s.out_w = g.size(3);
  const torch::Tensor xs = x.contiguous(torch::MemoryFormat::ChannelsLast);
  const torch::Tensor gs = g.contiguous(torch::MemoryFormat::ChannelsLast);
  const torch::Tensor taps = w.permute({2, 3, 0, 1}).contiguous();
  torch::Tensor dx = torch::empty_like(xs, torch::MemoryFormat::ChannelsLast);
  torch::Tensor dtaps = torch::empty_like(taps);
  torch::Tensor scratch = torch::empty({s.n, taps.numel()});
  internal::DepthwiseBackwardCpu(s, xs.data_ptr<float>(), taps.data_ptr<float>(),
                                 gs.data_ptr<float>(), dx.data_ptr<float>(),
                                 dtaps.data_ptr<float>(),
                                 scratch.data_ptr<float>());
  return {dx, dtaps.permute({2, 3, 0, 1}).contiguous()};
}

TEST(DepthwiseConvTest, EqualsTheGroupedConvolutionOnPaddedInput) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(Describe(c));
    torch::manual_seed(7);
    const torch::Tensor x = torch::randn({3, c.channels, c.height, c.width});
    const torch::Tensor w = torch::randn({c.channels, 1, c.kernel, c.kernel});
    torch::Tensor xr = x.to(torch::kFloat64).requires_grad_(true);
    torch::Tensor wr = w.to(torch::kFloat64).requires_grad_(true);
    torch::Tensor want = Reference(xr, wr, c);
    const torch::Tensor g = torch::randn(want.sizes());
    (want * g.to(torch::kFloat64)).sum().backward();
    const auto got = OwnBackward(x, w, g, c);
    EXPECT_LT(RelativeError(got.first, xr.grad()), 1e-6);
    EXPECT_LT(RelativeError(got.second, wr.grad()), 1e-6);
  }
}

// Every value has one summation order: the same bits with 1 or 2 threads
// and on AVX2 and AVX-512 (both multiply-add with FMA); the baseline
// rounds the products separately, within float of them.
TEST(DepthwiseConvTest, SameBitsAtEveryThreadCountAndInstructionSet) {
  const Case c{44, 14, 14, 5, 1, Padding::kSame};
  torch::manual_seed(11);
  const torch::Tensor x = torch::randn({4, c.channels, c.height, c.width});
  const torch::Tensor w = torch::randn({c.channels, 1, c.kernel, c.kernel});
  const torch::Tensor g = torch::randn({4, c.channels, c.height, c.width});
  const int threads = at::get_num_threads();
  const CpuIsa isa = ActiveCpuIsa();
  at::set_num_threads(2);
  const auto want = OwnBackward(x, w, g, c);
  at::set_num_threads(1);
  const auto one_thread = OwnBackward(x, w, g, c);
  EXPECT_TRUE(torch::equal(one_thread.first, want.first));
  EXPECT_TRUE(torch::equal(one_thread.second, want.second));
  for (CpuIsa cap : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    SetActiveCpuIsa(cap);
    const auto got = OwnBackward(x, w, g, c);
    SCOPED_TRACE(CpuIsaName(ActiveCpuIsa()));
    if (ActiveCpuIsa() == CpuIsa::kBaseline && isa != CpuIsa::kBaseline) {
      EXPECT_LT(RelativeError(got.first, want.first), 1e-6);
      EXPECT_LT(RelativeError(got.second, want.second), 1e-6);
    } else {
      EXPECT_TRUE(torch::equal(got.first, want.first));
      EXPECT_TRUE(torch::equal(got.second, want.second));
    }
  }
  SetActiveCpuIsa(isa);
  at::set_num_threads(threads);
}

// Through the layer: LibTorch's forward, the own backward, the gradients
// of LibTorch's convolution.
TEST(DepthwiseConvTest, TheLayersGradientsEqualLibTorchs) {
  for (int64_t kernel : {5, 7}) {
    SCOPED_TRACE(kernel);
    torch::manual_seed(5);
    Conv2d conv(Conv2dOptions(20, 20, kernel)
                    .depthwise(true)
                    .use_bias(false)
                    .activation(Activation::kNone));
    torch::Tensor x = torch::randn({2, 20, 11, 11})
                          .contiguous(torch::MemoryFormat::ChannelsLast)
                          .requires_grad_(true);
    torch::Tensor y = conv(x);
    ASSERT_NE(std::string(y.grad_fn()->name()).find("DepthwiseConv"),
              std::string::npos);
    EXPECT_TRUE(y.is_contiguous(torch::MemoryFormat::ChannelsLast));
    const torch::Tensor g = torch::randn_like(y);
    (y * g).sum().backward();
    torch::Tensor xr = x.detach().to(torch::kFloat64).requires_grad_(true);
    torch::Tensor wr =
        conv->weights.detach().to(torch::kFloat64).requires_grad_(true);
    torch::Tensor want =
        Reference(xr, wr, {20, 11, 11, kernel, 1, Padding::kSame});
    (want * g.to(torch::kFloat64)).sum().backward();
    EXPECT_LT(RelativeError(y, want), 1e-6);
    EXPECT_LT(RelativeError(x.grad(), xr.grad()), 1e-6);
    EXPECT_LT(RelativeError(conv->weights.grad(), wr.grad()), 1e-6);
  }
}

// The layers send channels-last float32 stride-1 depthwise convolutions of
// 5 x 5 filters and more here and nothing else: NCHW, float64, 3 x 3,
// strided ones, a channel multiplier above 1 and the switch off run
// LibTorch's convolution (the backward node says which ran).
TEST(DepthwiseConvTest, LayersRouteOnlyWhatItTakes) {
  const auto node = [](const torch::Tensor& x, Conv2d& conv) {
    torch::Tensor y = conv(x.requires_grad_(true));
    return std::string(y.grad_fn()->name());
  };
  Conv2d conv(Conv2dOptions(8, 8, 5)
                  .depthwise(true)
                  .use_bias(false)
                  .activation(Activation::kNone));
  const torch::Tensor nhwc = torch::randn({2, 8, 9, 9}).contiguous(
      torch::MemoryFormat::ChannelsLast);
  EXPECT_NE(node(nhwc.clone(), conv).find("DepthwiseConv"), std::string::npos);
  EXPECT_EQ(node(torch::randn({2, 8, 9, 9}), conv).find("DepthwiseConv"),
            std::string::npos);
  const bool was = SetKernelSwitch(KernelSwitch::kDepthwise, false);
  EXPECT_EQ(node(nhwc.clone(), conv).find("DepthwiseConv"), std::string::npos);
  SetKernelSwitch(KernelSwitch::kDepthwise, was);
  Conv2d wide(Conv2dOptions(8, 8, 5)
                  .depthwise(true)
                  .use_bias(false)
                  .activation(Activation::kNone));
  wide->to(torch::kFloat64);
  EXPECT_EQ(node(nhwc.to(torch::kFloat64), wide).find("DepthwiseConv"),
            std::string::npos);
  EXPECT_FALSE(DepthwiseConvCpu(nhwc, torch::randn({16, 1, 5, 5}), 1,
                                {2, 2, 2, 2})
                   .defined());
  EXPECT_FALSE(DepthwiseConvCpu(nhwc, torch::randn({8, 1, 3, 3}), 1,
                                {1, 1, 1, 1})
                   .defined());
  EXPECT_FALSE(DepthwiseConvCpu(nhwc, torch::randn({8, 1, 5, 5}), 2,
                                {2, 2, 2, 2})
                   .defined());
  EXPECT_FALSE(DepthwiseConvCpu(nhwc, torch::randn({8, 1, 5, 5}), 1,
                                {1, 1, 2, 2})
                   .defined());
  EXPECT_TRUE(DepthwiseConvCpu(nhwc, torch::randn({8, 1, 5, 5}), 1,
                               {2, 2, 2, 2})
                  .defined());
}

}  // namespace
}  // namespace nets
}  // namespace slimtorch
