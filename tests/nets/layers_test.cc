#include "slimtorch/nets/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"

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

// A convolution without activation, biases (if any) 0.3.
Conv2d PlainConv(int64_t in, int64_t out, int64_t kernel, Padding padding,
                 bool bias) {
  return Conv2d(Conv2dOptions(in, out, kernel)
                    .padding(padding)
                    .use_bias(bias)
                    .biases_init(Initializer::Constant(0.3))
                    .activation(Activation::kNone));
}

// A random input of `sizes` that requires its gradient; with
// channels_last, it and conv's weights in that order.
torch::Tensor Input(Conv2d& conv, std::vector<int64_t> sizes,
                    bool channels_last) {
  torch::Tensor x = torch::randn(sizes);
  if (channels_last) {
    x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    torch::NoGradGuard no_grad;
    conv->weights.set_(
        conv->weights.contiguous(torch::MemoryFormat::ChannelsLast));
  }
  return x.requires_grad_(true);
}

// A kernel covering the whole unpadded input (fc6 of VGG / AlexNet as a
// convolution; a 1x1 kernel on a 1x1 input, any padding) is computed as one
// matrix product: the same values and gradients as LibTorch's convolution,
// in NCHW and channels-last, with and without biases.
TEST(Conv2dTest, WholeInputKernelIsAMatrixProduct) {
  struct Case {
    int64_t in, out, kernel;
    Padding padding;
    bool bias;
  };
  for (const Case& c : {Case{6, 5, 4, Padding::kValid, true},
                        Case{3, 7, 1, Padding::kSame, false},
                        Case{4, 2, 1, Padding::kFixed, true}}) {
    for (bool cl : {false, true}) {
      torch::manual_seed(2);
      Conv2d conv = PlainConv(c.in, c.out, c.kernel, c.padding, c.bias);
      torch::Tensor x =
          Input(conv, {3, c.in, c.kernel, c.kernel}, /*channels_last=*/cl);
      torch::Tensor y = conv(x);
      ASSERT_EQ(y.sizes().vec(), (std::vector<int64_t>{3, c.out, 1, 1}));
      const torch::Tensor g = torch::randn_like(y);
      (y * g).sum().backward();

      torch::Tensor xr = x.detach().clone().requires_grad_(true);
      torch::Tensor wr = conv->weights.detach().clone().requires_grad_(true);
      torch::Tensor br =
          c.bias ? conv->biases.detach().clone().requires_grad_(true)
                 : torch::Tensor();
      torch::Tensor want = torch::conv2d(xr, wr, br);
      (want * g).sum().backward();
      const std::string what = "kernel " + std::to_string(c.kernel) +
                               (cl ? " channels-last" : " NCHW");
      EXPECT_TRUE(torch::allclose(y, want, 1e-5, 1e-6)) << what;
      EXPECT_TRUE(torch::allclose(x.grad(), xr.grad(), 1e-5, 1e-6)) << what;
      EXPECT_TRUE(torch::allclose(conv->weights.grad(), wr.grad(), 1e-5, 1e-6))
          << what;
      if (c.bias) {
        EXPECT_TRUE(torch::allclose(conv->biases.grad(), br.grad(), 1e-5, 1e-6))
            << what;
      }
    }
  }
}

// max |a - b| / max |b|.
double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor bd = b.to(torch::kFloat64);
  return ((a.to(torch::kFloat64) - bd).abs().max() / bd.abs().max())
      .item<double>();
}

// 3 x 3 stride-1 float32 convolutions run through oneDNN's Winograd kernels
// (where the build and the CPU have them): values and gradients against
// LibTorch's convolution in float64, in NCHW and channels-last, SAME and
// VALID, with and without biases. Winograd's F(4x4, 3x3) transforms round
// more than a direct sum: ~1e-6 of the largest output here, bounded at
// 2e-5. With SetDnnlWinograd(false) LibTorch's convolution runs.
TEST(Conv2dTest, WinogradEqualsTheDirectConvolution) {
  struct Case {
    int64_t in, out, size;
    Padding padding;
    bool bias;
  };
  const bool built = SetDnnlWinograd(true);
  if (!built) GTEST_SKIP() << "built without oneDNN's convolutions";
  int ran = 0;
  for (const Case& c : {Case{16, 32, 14, Padding::kSame, true},
                        Case{32, 16, 18, Padding::kValid, false},
                        Case{64, 48, 20, Padding::kSame, false}}) {
    for (bool cl : {false, true}) {
      torch::manual_seed(3);
      Conv2d conv = PlainConv(c.in, c.out, 3, c.padding, c.bias);
      torch::Tensor x =
          Input(conv, {3, c.in, c.size, c.size}, /*channels_last=*/cl);
      torch::Tensor y = conv(x);
      const std::string what =
          std::to_string(c.in) + "->" + std::to_string(c.out) + " at " +
          std::to_string(c.size) + (cl ? " channels-last" : " NCHW");
      ASSERT_TRUE(y.grad_fn() != nullptr) << what;
      if (y.grad_fn()->name().find("Winograd") == std::string::npos) {
        continue;  // no Winograd kernels on this CPU (AVX-512 needed)
      }
      ++ran;
      EXPECT_EQ(y.is_contiguous(torch::MemoryFormat::ChannelsLast) &&
                    !y.is_contiguous(),
                cl)
          << what;
      const torch::Tensor g = torch::randn_like(y);
      (y * g).sum().backward();

      torch::Tensor xr = x.detach().to(torch::kFloat64).requires_grad_(true);
      torch::Tensor wr =
          conv->weights.detach().to(torch::kFloat64).requires_grad_(true);
      torch::Tensor br =
          c.bias
              ? conv->biases.detach().to(torch::kFloat64).requires_grad_(true)
              : torch::Tensor();
      const int64_t pad = c.padding == Padding::kSame ? 1 : 0;
      torch::Tensor want = torch::conv2d(xr, wr, br, 1, pad);
      (want * g.to(torch::kFloat64)).sum().backward();
      EXPECT_LT(RelativeError(y, want), 2e-5) << what;
      EXPECT_LT(RelativeError(x.grad(), xr.grad()), 2e-5) << what;
      EXPECT_LT(RelativeError(conv->weights.grad(), wr.grad()), 2e-5) << what;
      if (c.bias) {
        EXPECT_LT(RelativeError(conv->biases.grad(), br.grad()), 1e-5) << what;
      }
      // Without gradients (evaluation, export): the same kernels, no graph.
      {
        torch::NoGradGuard no_grad;
        const torch::Tensor again = conv(x.detach());
        EXPECT_TRUE(again.grad_fn() == nullptr) << what;
        EXPECT_TRUE(torch::equal(again, y.detach())) << what;
      }
      {
        c10::InferenceMode inference;
        EXPECT_TRUE(torch::equal(conv(x.detach()), y.detach())) << what;
      }
      // The switch: LibTorch's convolution, the same values within float.
      SetDnnlWinograd(false);
      torch::Tensor plain = conv(x.detach());
      SetDnnlWinograd(true);
      EXPECT_LT(RelativeError(plain, want), 1e-6) << what;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no Winograd kernels on this CPU";
  EXPECT_EQ(ran, 6);
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

// SAME max pooling equals TensorFlow's definition (pad with -infinity as TF
// computes the pads, then pool) for every size, kernel and stride tried —
// whether it runs through PyTorch's own padding / ceil mode or a padded
// copy — on NCHW and channels-last inputs, values and gradients.
TEST(MaxPoolTest, SameEqualsPaddingWithMinusInfinity) {
  torch::manual_seed(3);
  for (int64_t size : {5, 6, 7, 8, 13, 14, 35, 112}) {
    for (int64_t kernel : {1, 2, 3, 5}) {
      for (int64_t stride : {1, 2, 3}) {
        SCOPED_TRACE(
            StrCat("size ", size, " kernel ", kernel, " stride ", stride));
        for (bool nhwc : {false, true}) {
          torch::Tensor x = torch::randn({2, 3, size, size + 1});
          if (nhwc) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
          x.requires_grad_();
          const auto p = SamePadding(size, size + 1, kernel, kernel, stride);
          torch::Tensor want = torch::max_pool2d(
              torch::constant_pad_nd(x, {p[2], p[3], p[0], p[1]},
                                     -std::numeric_limits<double>::infinity()),
              {kernel, kernel}, {stride, stride});
          torch::Tensor got = MaxPool2d(x, kernel, stride, Padding::kSame);
          ASSERT_EQ(got.sizes(), want.sizes());
          EXPECT_TRUE(torch::equal(got, want));
          const torch::Tensor gw = torch::randn(want.sizes());
          const torch::Tensor dx_want =
              torch::autograd::grad({want}, {x}, {gw})[0];
          const torch::Tensor dx_got =
              torch::autograd::grad({got}, {x}, {gw})[0];
          EXPECT_TRUE(torch::equal(dx_got, dx_want));
        }
      }
    }
  }
}

// The CPU's max pool (float32: NCHW by our kernel, channels-last by
// LibTorch's) on values with many ties, SAME and VALID: LibTorch's outputs and
// gradients exactly, so each tie's gradient goes where TensorFlow's and
// LibTorch's go (the first maximum in row-major window order); a NaN in a
// window comes out.
TEST(MaxPoolTest, FusedKernelBreaksTiesAsLibTorchDoes) {
  torch::manual_seed(9);
  for (int64_t size : {4, 9, 24}) {
    for (int64_t kernel : {2, 3}) {
      for (int64_t stride : {1, 2}) {
        SCOPED_TRACE(
            StrCat("size ", size, " kernel ", kernel, " stride ", stride));
        for (bool nhwc : {false, true}) {
          torch::Tensor x =
              torch::randint(0, 3, {3, 4, size, size + 2}).to(torch::kFloat32);
          if (nhwc) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
          x.requires_grad_();
          const auto p = SamePadding(size, size + 2, kernel, kernel, stride);
          const torch::Tensor same_want = torch::max_pool2d(
              torch::constant_pad_nd(x, {p[2], p[3], p[0], p[1]},
                                     -std::numeric_limits<double>::infinity()),
              {kernel, kernel}, {stride, stride});
          const torch::Tensor valid_want =
              torch::max_pool2d(x, {kernel, kernel}, {stride, stride});
          for (Padding padding : {Padding::kSame, Padding::kValid}) {
            const torch::Tensor& want =
                padding == Padding::kSame ? same_want : valid_want;
            torch::Tensor got = MaxPool2d(x, kernel, stride, padding);
            ASSERT_EQ(got.sizes(), want.sizes());
            EXPECT_TRUE(torch::equal(got, want));
            const torch::Tensor g = torch::randn(want.sizes());
            const torch::Tensor dx = torch::autograd::grad({got}, {x}, {g})[0];
            EXPECT_TRUE(
                torch::equal(dx, torch::autograd::grad({want}, {x}, {g})[0]));
            EXPECT_EQ(got.is_contiguous(torch::MemoryFormat::ChannelsLast),
                      nhwc);
            EXPECT_EQ(dx.is_contiguous(torch::MemoryFormat::ChannelsLast),
                      nhwc);
          }
        }
      }
    }
  }
  for (bool nhwc : {false, true}) {
    torch::Tensor x = torch::zeros({1, 3, 4, 4});
    x[0][1][1][2] = std::numeric_limits<float>::quiet_NaN();
    if (nhwc) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    torch::Tensor y = MaxPool2d(x, 2, 2, Padding::kValid);
    EXPECT_TRUE(std::isnan(y[0][1][0][1].item<float>())) << nhwc;
    EXPECT_EQ(y[0][1][0][0].item<float>(), 0.0f);
    EXPECT_EQ(y[0][0][0][1].item<float>(), 0.0f);
  }
}

// Channels-last bfloat16 CPU max pooling (--precision=bf16) runs through
// oneDNN's pooling where the build has it: LibTorch's values exactly, and
// its gradients within bfloat16's rounding of the sums of overlapping
// windows, SAME and VALID, on values with many ties (a tie's gradient going
// to another element would be off by a whole g), including inception's 3x3
// stride 2 on odd and even sizes; without a gradient the inference
// primitive, the same values. A window of NaNs comes out not finite. Float32
// and SetDnnlPooling(false) keep LibTorch's max_pool2d.
TEST(MaxPoolTest, OneDnnPoolingEqualsLibTorchInBfloat16) {
  torch::manual_seed(4);
  const bool built = SetDnnlPooling(true);
  int ran = 0;
  for (int64_t size : {7, 14, 35, 56}) {
    for (int64_t kernel : {2, 3}) {
      for (int64_t stride : {1, 2}) {
        for (Padding padding : {Padding::kSame, Padding::kValid}) {
          SCOPED_TRACE(StrCat("size ", size, " kernel ", kernel, " stride ",
                              stride,
                              padding == Padding::kSame ? " SAME" : " VALID"));
          torch::Tensor x = torch::randint(0, 5, {2, 24, size, size + 1})
                                .to(torch::kBFloat16)
                                .contiguous(torch::MemoryFormat::ChannelsLast)
                                .requires_grad_();
          // LibTorch's pooling, and in float32 on the same values (its
          // gradient the exact sums of the bfloat16 g's).
          const torch::Tensor x32 =
              x.detach().to(torch::kFloat32).requires_grad_();
          auto pool = [&](const torch::Tensor& t) {
            if (padding == Padding::kValid) {
              return torch::max_pool2d(t, {kernel, kernel}, {stride, stride});
            }
            const auto p = SamePadding(size, size + 1, kernel, kernel, stride);
            return torch::max_pool2d(
                torch::constant_pad_nd(
                    t, {p[2], p[3], p[0], p[1]},
                    -std::numeric_limits<double>::infinity()),
                {kernel, kernel}, {stride, stride});
          };
          const torch::Tensor want = pool(x);
          const torch::Tensor want32 = pool(x32);
          torch::Tensor got = MaxPool2d(x, kernel, stride, padding);
          ASSERT_EQ(got.sizes(), want.sizes());
          ASSERT_TRUE(got.grad_fn());
          if (got.grad_fn()->name().find("DnnlMaxPool") != std::string::npos) {
            ++ran;
          }
          EXPECT_TRUE(got.is_contiguous(torch::MemoryFormat::ChannelsLast));
          EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
          EXPECT_TRUE(torch::equal(got, want));
          const torch::Tensor g =
              torch::randn(want.sizes()).to(torch::kBFloat16);
          const torch::Tensor dx = torch::autograd::grad({got}, {x}, {g})[0];
          const torch::Tensor g32 = g.to(torch::kFloat32);
          const torch::Tensor ref =
              torch::autograd::grad({want32}, {x32}, {g32}, true)[0];
          const torch::Tensor ref_abs =
              torch::autograd::grad({want32}, {x32}, {g32.abs()})[0];
          EXPECT_TRUE(dx.is_contiguous(torch::MemoryFormat::ChannelsLast));
          EXPECT_EQ(dx.scalar_type(), torch::kBFloat16);
          // Each element within bfloat16's rounding of a sum of up to
          // kernel^2 windows' g (2^-8 of the sum of their |g| per addition)
          // of the exact sum, as LibTorch's bfloat16 gradient is; a gradient
          // sent to another tied element would be off by a whole g there.
          const torch::Tensor bound =
              ref_abs * (kernel * kernel / 256.0f) + 1e-3f;
          const torch::Tensor err = (dx.to(torch::kFloat32) - ref).abs();
          EXPECT_TRUE(err.le(bound).all().item<bool>())
              << "worst " << (err / bound).max().item<float>()
              << " of the bound";
          const torch::Tensor dx_want =
              torch::autograd::grad({want}, {x}, {g})[0];
          EXPECT_TRUE((dx_want.to(torch::kFloat32) - ref)
                          .abs()
                          .le(bound)
                          .all()
                          .item<bool>());
          torch::NoGradGuard no_grad;
          EXPECT_TRUE(
              torch::equal(MaxPool2d(x, kernel, stride, padding), want));
        }
      }
    }
  }
  {
    torch::Tensor x = torch::zeros({1, 16, 4, 4});
    x.narrow(2, 0, 2).narrow(3, 0, 2).fill_(
        std::numeric_limits<float>::quiet_NaN());
    x = x.to(torch::kBFloat16).contiguous(torch::MemoryFormat::ChannelsLast);
    const torch::Tensor y =
        MaxPool2d(x, 2, 2, Padding::kValid).to(torch::kFloat32);
    EXPECT_FALSE(std::isfinite(y[0][3][0][0].item<float>()));
    EXPECT_EQ(y[0][3][1][1].item<float>(), 0.0f);
  }
  torch::Tensor f = torch::randn({1, 16, 9, 9})
                        .contiguous(torch::MemoryFormat::ChannelsLast)
                        .requires_grad_();
  EXPECT_EQ(
      MaxPool2d(f, 3, 2, Padding::kSame).grad_fn()->name().find("DnnlMaxPool"),
      std::string::npos);
  SetDnnlPooling(false);
  torch::Tensor b = f.detach().to(torch::kBFloat16).requires_grad_();
  EXPECT_EQ(
      MaxPool2d(b, 3, 2, Padding::kSame).grad_fn()->name().find("DnnlMaxPool"),
      std::string::npos);
  SetDnnlPooling(true);
  if (!built) GTEST_SKIP() << "this build has no oneDNN pooling";
  EXPECT_EQ(ran, 4 * 2 * 2 * 2);
}

// A 1x1 window with a stride (resnet_utils.subsample) equals LibTorch's
// max_pool2d over it, values and gradients, NCHW and channels-last, 'SAME'
// and 'VALID', odd and even sizes; the output and the gradient keep the
// input's layout.
TEST(MaxPoolTest, OneByOneWindowIsAStridedPick) {
  torch::manual_seed(6);
  for (int64_t size : {7, 8, 56}) {
    for (int64_t stride : {1, 2, 3}) {
      for (bool nhwc : {false, true}) {
        for (Padding padding : {Padding::kSame, Padding::kValid}) {
          SCOPED_TRACE(
              StrCat("size ", size, " stride ", stride, " nhwc ", nhwc));
          torch::Tensor x = torch::randn({2, 5, size, size + 1});
          if (nhwc) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
          x.requires_grad_();
          torch::Tensor want = torch::max_pool2d(x, {1, 1}, {stride, stride});
          torch::Tensor got = MaxPool2d(x, 1, stride, padding);
          ASSERT_EQ(got.sizes(), want.sizes());
          EXPECT_TRUE(torch::equal(got, want));
          EXPECT_EQ(got.is_contiguous(torch::MemoryFormat::ChannelsLast), nhwc);
          const torch::Tensor g = torch::randn(want.sizes());
          const torch::Tensor dx = torch::autograd::grad({got}, {x}, {g})[0];
          EXPECT_TRUE(
              torch::equal(dx, torch::autograd::grad({want}, {x}, {g})[0]));
          // The gradient in the input's layout too (it meets the gradient
          // of x's other consumers).
          EXPECT_EQ(dx.is_contiguous(torch::MemoryFormat::ChannelsLast), nhwc);
        }
      }
    }
  }
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

// tf.nn.lrn worked by hand: x = {1, 2, 3} over channels, radius 1, bias 1,
// alpha 1, beta 1: sums of squares 1+4, 1+4+9, 4+9.
TEST(LrnTest, WorkedByHand) {
  torch::Tensor x = torch::tensor({1.0f, 2.0f, 3.0f}).reshape({1, 3, 1, 1});
  torch::Tensor expected =
      torch::tensor({1.0f / 6, 2.0f / 15, 3.0f / 14}).reshape({1, 3, 1, 1});
  EXPECT_TRUE(
      torch::allclose(LocalResponseNormFused(x, 1, 1.0, 1.0, 1.0), expected));
  EXPECT_TRUE(torch::allclose(LocalResponseNormComposite(x, 1, 1.0, 1.0, 1.0),
                              expected));
}

// LibTorch's LocalResponseNorm(size 9, alpha 0.001, beta 0.75, k 1) is
// tf.nn.lrn(depth_radius 4, bias 1, alpha 0.001 / 9, beta 0.75).
TEST(LrnTest, MatchesLibTorchWithItsParameterisation) {
  torch::manual_seed(4);
  torch::Tensor x = torch::randn({2, 12, 3, 5}) * 10;
  torch::Tensor theirs = torch::nn::functional::local_response_norm(
      x, torch::nn::functional::LocalResponseNormFuncOptions(9)
             .alpha(0.001)
             .beta(0.75)
             .k(1.0));
  EXPECT_TRUE(torch::allclose(LocalResponseNorm(x, 4, 1.0, 0.001 / 9, 0.75),
                              theirs, 1e-5, 1e-6));
}

struct LrnConfig {
  int64_t radius;
  double bias, alpha, beta;
};

// The betas with their own code paths (0.75, 0.5, 1, other) and windows
// wider than the channels.
const LrnConfig kLrnConfigs[] = {
    {4, 1.0, 0.001 / 9, 0.75}, {2, 2.0, 0.05, 0.5}, {1, 1.0, 0.3, 1.0},
    {3, 1.5, 0.1, 0.6},        {0, 1.0, 0.2, 0.75}, {40, 1.0, 0.01, 0.75}};

// Fused against composite, forward and first-order gradients, on shapes
// whose H*W (323) spans several of the fused kernel's segments and whose
// N*H*W splits unevenly into threads.
TEST(LrnTest, FusedMatchesCompositeForwardAndGradient) {
  torch::manual_seed(5);
  for (const auto& shape : std::vector<std::vector<int64_t>>{
           {2, 10, 17, 19}, {3, 64, 6, 6}, {1, 1, 2, 2}}) {
    torch::Tensor x = (torch::randn(shape) * 4).requires_grad_(true);
    torch::Tensor up = torch::randn(shape);
    for (const auto& c : kLrnConfigs) {
      SCOPED_TRACE("radius " + std::to_string(c.radius) + " beta " +
                   std::to_string(c.beta) + " C " + std::to_string(shape[1]));
      torch::Tensor fused =
          LocalResponseNormFused(x, c.radius, c.bias, c.alpha, c.beta);
      torch::Tensor composite =
          LocalResponseNormComposite(x, c.radius, c.bias, c.alpha, c.beta);
      EXPECT_TRUE(torch::allclose(fused, composite, 1e-5, 1e-6));
      torch::Tensor g_fused =
          torch::autograd::grad({(fused * up).sum()}, {x})[0];
      torch::Tensor g_composite =
          torch::autograd::grad({(composite * up).sum()}, {x})[0];
      EXPECT_TRUE(torch::allclose(g_fused, g_composite, 1e-4, 1e-5))
          << (g_fused - g_composite).abs().max().item<float>();
    }
  }
}

// The composite's gradient against central differences, in double.
TEST(LrnTest, CompositeGradientMatchesFiniteDifferences) {
  torch::manual_seed(6);
  const auto dbl = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor x = (torch::randn({2, 7, 2, 3}, dbl) * 2).requires_grad_(true);
  torch::Tensor up = torch::randn({2, 7, 2, 3}, dbl);
  for (const auto& c : kLrnConfigs) {
    auto f = [&](const torch::Tensor& in) {
      return (LocalResponseNorm(in, c.radius, c.bias, c.alpha, c.beta) * up)
          .sum();
    };
    torch::Tensor analytic = torch::autograd::grad({f(x)}, {x})[0];
    torch::NoGradGuard no_grad;
    torch::Tensor flat = x.detach().clone().reshape({-1});
    const double eps = 1e-6;
    for (int64_t i = 0; i < flat.numel(); ++i) {
      torch::Tensor plus = flat.clone(), minus = flat.clone();
      plus[i] += eps;
      minus[i] -= eps;
      const double numeric = (f(plus.view(x.sizes())).item<double>() -
                              f(minus.view(x.sizes())).item<double>()) /
                             (2 * eps);
      EXPECT_NEAR(analytic.reshape({-1})[i].item<double>(), numeric, 1e-6)
          << "radius " << c.radius << " beta " << c.beta << " at " << i;
    }
  }
}

TEST(LrnTest, NonContiguousAndDoubleInputsTakeTheComposite) {
  torch::manual_seed(7);
  torch::Tensor nhwc = torch::randn({2, 5, 6, 9});
  torch::Tensor x = nhwc.permute({0, 3, 1, 2});  // NCHW view, not contiguous
  ASSERT_FALSE(x.is_contiguous());
  torch::Tensor expected =
      LocalResponseNormFused(x.contiguous(), 2, 1.0, 0.5, 0.75);
  EXPECT_TRUE(torch::allclose(LocalResponseNorm(x, 2, 1.0, 0.5, 0.75), expected,
                              1e-5, 1e-6));
  torch::Tensor d = LocalResponseNorm(x.to(torch::kFloat64), 2, 1.0, 0.5, 0.75);
  EXPECT_EQ(d.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::allclose(d.to(torch::kFloat32), expected, 1e-5, 1e-6));
  EXPECT_THROW(LocalResponseNormFused(x.to(torch::kFloat64), 2, 1, 1, 1),
               Error);
  EXPECT_THROW(LocalResponseNorm(torch::ones({3, 4}), 2, 1, 1, 1), Error);
}

// In bfloat16 (autocast's type) the composite keeps LRN's small effect:
// the tutorial's parameters on x = 2 scale by 1.004^-0.75 = 0.997 (by
// 1.0022^-0.75 at the edges), which
// bias + alpha * sum rounded to bfloat16 (1.004 -> 1) would lose.
TEST(LrnTest, CompositeInBfloat16KeepsTheSmallScaling) {
  torch::Tensor x = torch::full({2, 16, 3, 3}, 2.0f);
  torch::Tensor want = LocalResponseNormFused(x, 4, 1.0, 0.001 / 9, 0.75);
  ASSERT_LT(want.max().item<float>(), 1.998f);  // edges: 1.0022^-0.75
  torch::Tensor got = LocalResponseNormComposite(x.to(torch::kBFloat16), 4, 1.0,
                                                 0.001 / 9, 0.75)
                          .to(torch::kFloat32);
  EXPECT_LE((got - want).abs().max().item<float>(), 2e-4)
      << got.max().item<float>() << " vs " << want.max().item<float>();
}

// The composite in its three memory orders (NCHW, channels-last, strided):
// the fused kernel's output and gradient, and the input's order kept.
TEST(LrnTest, CompositeTakesEveryMemoryOrder) {
  torch::manual_seed(8);
  torch::Tensor base = torch::randn({3, 11, 5, 7}) * 3;
  torch::Tensor up = torch::randn({3, 11, 5, 7});
  const LrnConfig c = kLrnConfigs[1];
  torch::Tensor xf = base.clone().requires_grad_(true);
  torch::Tensor fused =
      LocalResponseNormFused(xf, c.radius, c.bias, c.alpha, c.beta);
  torch::Tensor g_fused = torch::autograd::grad({(fused * up).sum()}, {xf})[0];
  const torch::Tensor orders[] = {
      base.clone(), base.contiguous(torch::MemoryFormat::ChannelsLast),
      base.transpose(2, 3).contiguous().transpose(2, 3)};
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE("order " + std::to_string(k));
    torch::Tensor x = orders[k].detach().requires_grad_(true);
    torch::Tensor y =
        LocalResponseNormComposite(x, c.radius, c.bias, c.alpha, c.beta);
    EXPECT_TRUE(torch::allclose(y, fused, 1e-5, 1e-6));
    if (k == 1) {
      EXPECT_TRUE(y.is_contiguous(torch::MemoryFormat::ChannelsLast));
    }
    torch::Tensor g = torch::autograd::grad({(y * up).sum()}, {x})[0];
    EXPECT_TRUE(torch::allclose(g, g_fused, 1e-4, 1e-5))
        << (g - g_fused).abs().max().item<float>();
  }
}

}  // namespace
}  // namespace nets
}  // namespace slimtorch
