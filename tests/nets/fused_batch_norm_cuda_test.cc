// The fused CUDA kernels (src/nets/kernels/cuda/cuda_kernels.cu). Batch norm against
// LibTorch's batch_norm then the activation in float64 on the CPU, from the
// same inputs (already rounded to the element type under test): outputs, moving
// statistics, the gradients of x, gamma and beta, in training and
// inference, for float32, bfloat16 and float16, channel counts that do and
// do not fill 16-byte vectors, and H = W = 1. Also add + ReLU, max pooling
// and LRN, and batch norm + add + ReLU under CUDA graph capture. Skipped
// without a GPU or without the kernels.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/train/precision.h"
#include "test_util.h"

#ifdef SLIMTORCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace slimtorch {
namespace {

using nets::Activation;

bool HaveKernels() {
  if (!torch::cuda::is_available()) return false;
  // The fused path names its autograd node; LibTorch's would not.
  nets::BatchNorm bn(nets::BatchNormOptions(8));
  bn->to(torch::kCUDA);
  torch::Tensor x = torch::randn({2, 8, 3, 3}, torch::kCUDA)
                        .contiguous(torch::MemoryFormat::ChannelsLast)
                        .requires_grad_(true);
  torch::Tensor y = bn->forward(x);
  return y.grad_fn() != nullptr &&
         y.grad_fn()->name().find("BatchNormActCuda") != std::string::npos;
}

#define SKIP_WITHOUT_KERNELS()                                           \
  if (!HaveKernels()) {                                                  \
    GTEST_SKIP() << "no CUDA device, or built without the CUDA kernels"; \
  }

double MaxRel(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor a64 = a.detach().cpu().to(torch::kFloat64);
  const torch::Tensor b64 = b.detach().cpu().to(torch::kFloat64);
  const double scale = 1.0 + b64.abs().max().item<double>();
  return (a64 - b64).abs().max().item<double>() / scale;
}

const char* Name(Activation a) {
  return a == Activation::kNone   ? "none"
         : a == Activation::kRelu ? "relu"
                                  : "relu6";
}

// Half an ulp of the element type, relative: the rounding of one result.
double Ulp(torch::ScalarType t) {
  return t == torch::kBFloat16  ? 1.0 / 256
         : t == torch::kFloat16 ? 1.0 / 2048
                                : 1e-6;
}

void CheckCase(std::vector<int64_t> shape, torch::ScalarType dtype,
               Activation act) {
  std::string what = std::string(c10::toString(dtype)) + " " + Name(act) + " [";
  for (int64_t d : shape) what += std::to_string(d) + ",";
  what += "]";
  const int64_t C = shape[1];
  nets::BatchNorm fused(nets::BatchNormOptions(C).decay(0.9).scale(true));
  nets::BatchNorm ref(nets::BatchNormOptions(C).decay(0.9).scale(true));
  ref->fused_kernels = false;
  {
    torch::NoGradGuard no_grad;
    torch::Tensor beta = torch::randn({C});
    torch::Tensor gamma = torch::rand({C}) + 0.5;
    for (nets::BatchNorm* bn : {&fused, &ref}) {
      (*bn)->beta.copy_(beta);
      (*bn)->gamma.copy_(gamma);
    }
  }
  fused->to(torch::kCUDA);
  ref->to(torch::kFloat64);
  const auto format = shape.size() == 4 && shape[2] * shape[3] > 1
                          ? torch::MemoryFormat::ChannelsLast
                          : torch::MemoryFormat::Contiguous;
  // Inputs rounded to the element type first: the reference starts from
  // the same values.
  const torch::Tensor x = (torch::randn(shape) * 3 + 0.5).to(dtype);
  const torch::Tensor upstream = torch::randn(shape).to(dtype);

  torch::Tensor xf = x.to(torch::kCUDA).contiguous(format).requires_grad_(true);
  fused->train();
  torch::Tensor yf = fused->ForwardActivated(xf, act, fused.get());
  ASSERT_NE(yf.grad_fn(), nullptr) << what;
  EXPECT_NE(yf.grad_fn()->name().find("BatchNormActCuda"), std::string::npos)
      << what << ": took " << yf.grad_fn()->name();
  EXPECT_EQ(yf.scalar_type(), dtype) << what;
  EXPECT_TRUE(yf.is_contiguous(format)) << what;
  (yf * upstream.to(torch::kCUDA)).sum().backward();

  torch::Tensor xr = x.to(torch::kFloat64).requires_grad_(true);
  ref->train();
  torch::Tensor yr = ref->ForwardActivated(xr, act, ref.get());
  (yr * upstream.to(torch::kFloat64)).sum().backward();

  const double u = Ulp(dtype);
  EXPECT_LE(MaxRel(yf, yr), u + 4e-6) << what << " output";
  EXPECT_LE(MaxRel(xf.grad(), xr.grad()), 2 * u + 2e-5) << what << " dx";
  EXPECT_LE(MaxRel(fused->beta.grad(), ref->beta.grad()), 2e-5)
      << what << " dbeta";
  EXPECT_LE(MaxRel(fused->gamma.grad(), ref->gamma.grad()), 2e-5)
      << what << " dgamma";
  EXPECT_LE(MaxRel(fused->moving_mean, ref->moving_mean), 1e-6)
      << what << " moving_mean";
  EXPECT_LE(MaxRel(fused->moving_variance, ref->moving_variance), 1e-6)
      << what << " moving_variance";
  // The statistics moved (batch variance ~9 against the initial 1).
  EXPECT_GT((fused->moving_variance.cpu() - 1).abs().max().item<double>(), 0.1)
      << what;

  torch::NoGradGuard no_grad;
  fused->eval();
  ref->eval();
  EXPECT_LE(MaxRel(fused->ForwardActivated(xf.detach(), act, fused.get()),
                   ref->ForwardActivated(xr.detach(), act, ref.get())),
            u + 4e-6)
      << what << " inference output";
}

TEST(FusedBatchNormCudaTest, EqualsLibTorchsBatchNormThenActivation) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(0);
  const std::vector<std::vector<int64_t>> shapes = {
      {8, 64, 10, 12},  // 16-byte vectors, more rows than one block
      {4, 256, 7, 7},   // several blocks across the channels
      {6, 20, 5, 3},    // float32 vectors, single bfloat16 / float16 lanes
      {5, 3, 4, 4},     // single lanes
      {32, 96, 1, 1},   // H = W = 1: plain rows
      {16, 40}};        // 2-D
  for (const auto& shape : shapes) {
    for (torch::ScalarType t :
         {torch::kFloat32, torch::kBFloat16, torch::kFloat16}) {
      for (Activation a :
           {Activation::kNone, Activation::kRelu, Activation::kRelu6}) {
        CheckCase(shape, t, a);
      }
    }
  }
}

// Many rows (a ResNet's first layers): the per-thread and per-block sums in
// float lose nothing the bound notices, and inputs far from zero do not
// cancel (the pivot).
TEST(FusedBatchNormCudaTest, ManyRowsFarFromZero) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(1);
  const int64_t C = 64;
  nets::BatchNorm bn(nets::BatchNormOptions(C).decay(0.5));
  bn->to(torch::kCUDA);
  bn->train();
  torch::Tensor x = (torch::randn({64, C, 56, 56}, torch::kFloat64) * 2 + 500);
  torch::Tensor y =
      bn->forward(x.to(torch::kCUDA, torch::kFloat32)
                      .contiguous(torch::MemoryFormat::ChannelsLast));
  const torch::Tensor mean = x.mean({0, 2, 3});
  const torch::Tensor var = x.var({0, 2, 3}, /*unbiased=*/true);
  EXPECT_LE(MaxRel(bn->moving_mean, mean * 0.5), 1e-6);
  EXPECT_LE(MaxRel(bn->moving_variance, var * 0.5 + 0.5), 1e-5);
  // Normalized: per channel mean 0 and variance 1.
  torch::Tensor y64 = y.cpu().to(torch::kFloat64);
  EXPECT_LE(y64.mean({0, 2, 3}).abs().max().item<double>(), 1e-4);
  EXPECT_LE((y64.var({0, 2, 3}, false) - 1).abs().max().item<double>(), 1e-3);
}

TEST(FusedBatchNormCudaTest, AddReluEqualsAddThenRelu) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(2);
  for (torch::ScalarType t : {torch::kFloat32, torch::kBFloat16}) {
    for (bool cl : {true, false}) {
      const auto format = cl ? torch::MemoryFormat::ChannelsLast
                             : torch::MemoryFormat::Contiguous;
      // 3 * 7 * 5 * 5: not a whole number of 16-byte vectors.
      for (const std::vector<int64_t>& shape :
           {std::vector<int64_t>{4, 32, 6, 6},
            std::vector<int64_t>{3, 7, 5, 5}}) {
        auto make = [&] {
          return torch::randn(shape, torch::kCUDA)
              .to(t)
              .contiguous(format)
              .requires_grad_(true);
        };
        torch::Tensor a = make(), b = make();
        torch::Tensor g = torch::randn(shape, torch::kCUDA).to(t);
        torch::Tensor y = nets::AddRelu(a, b);
        EXPECT_NE(y.grad_fn()->name().find("AddReluCuda"), std::string::npos);
        y.backward(g);
        torch::Tensor a2 = a.detach().clone().requires_grad_(true);
        torch::Tensor b2 = b.detach().clone().requires_grad_(true);
        torch::Tensor y2 = torch::relu(a2 + b2);
        y2.backward(g);
        EXPECT_TRUE(torch::equal(y, y2)) << c10::toString(t) << " " << cl;
        EXPECT_TRUE(torch::equal(a.grad(), a2.grad()));
        EXPECT_TRUE(torch::equal(b.grad(), b2.grad()));
      }
    }
  }
}

// The CUDA max pool against the CPU's (float32 from the same values): the
// maxima exactly, the gradients within a rounding of the element type (a
// pixel that wins several windows sums their gradients).
TEST(FusedBatchNormCudaTest, MaxPoolEqualsTheCpus) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(5);
  struct Case {
    std::vector<int64_t> shape;
    int64_t kernel, stride;
    nets::Padding padding;
  };
  const std::vector<Case> cases = {
      {{4, 8, 24, 24}, 3, 2, nets::Padding::kSame},
      {{3, 5, 13, 11}, 3, 2, nets::Padding::kSame},
      {{2, 16, 9, 9}, 2, 2, nets::Padding::kValid},
      {{2, 4, 7, 7}, 3, 1, nets::Padding::kSame},
      {{2, 24, 8, 8}, 3, 2, nets::Padding::kValid}};
  for (const Case& c : cases) {
    for (torch::ScalarType t : {torch::kFloat32, torch::kBFloat16}) {
      for (bool cl : {false, true}) {
        const auto format = cl ? torch::MemoryFormat::ChannelsLast
                               : torch::MemoryFormat::Contiguous;
        const std::string what = std::string(c10::toString(t)) +
                                 (cl ? " channels-last k" : " NCHW k") +
                                 std::to_string(c.kernel) + " s" +
                                 std::to_string(c.stride);
        const torch::Tensor x = torch::randn(c.shape).to(t);
        torch::Tensor xg =
            x.to(torch::kCUDA).contiguous(format).requires_grad_(true);
        torch::Tensor yg = nets::MaxPool2d(xg, c.kernel, c.stride, c.padding);
        EXPECT_NE(yg.grad_fn()->name().find("MaxPoolCuda"), std::string::npos)
            << what;
        EXPECT_TRUE(yg.is_contiguous(format)) << what;
        const torch::Tensor g = torch::randn(yg.sizes()).to(t);
        yg.backward(g.to(torch::kCUDA));
        torch::Tensor xc = x.to(torch::kFloat32).requires_grad_(true);
        torch::Tensor yc = nets::MaxPool2d(xc, c.kernel, c.stride, c.padding);
        yc.backward(g.to(torch::kFloat32));
        EXPECT_TRUE(torch::equal(yg.cpu().to(torch::kFloat32), yc)) << what;
        EXPECT_LE(MaxRel(xg.grad(), xc.grad()), Ulp(t)) << what;
      }
    }
  }
}

// The CUDA LRN against the composite in float64 on the CPU, forward and
// backward, with TF-Slim's CifarNet parameters and a wide radius.
TEST(FusedBatchNormCudaTest, LocalResponseNormEqualsFloat64) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(6);
  for (int64_t radius : {4, 2, 40}) {
    for (torch::ScalarType t : {torch::kFloat32, torch::kBFloat16}) {
      for (bool cl : {false, true}) {
        const auto format = cl ? torch::MemoryFormat::ChannelsLast
                               : torch::MemoryFormat::Contiguous;
        const std::string what = std::string(c10::toString(t)) +
                                 (cl ? " channels-last r" : " NCHW r") +
                                 std::to_string(radius);
        const double bias = 1.0, alpha = 0.001 / 9.0, beta = 0.75;
        const torch::Tensor x = (torch::randn({3, 64, 6, 5}) * 4).to(t);
        const torch::Tensor g = torch::randn({3, 64, 6, 5}).to(t);
        torch::Tensor xg =
            x.to(torch::kCUDA).contiguous(format).requires_grad_(true);
        torch::Tensor yg =
            nets::LocalResponseNorm(xg, radius, bias, alpha * 50, beta);
        EXPECT_NE(yg.grad_fn()->name().find("LrnCuda"), std::string::npos)
            << what;
        EXPECT_EQ(yg.scalar_type(), t) << what;
        EXPECT_TRUE(yg.is_contiguous(format)) << what;
        yg.backward(g.to(torch::kCUDA));
        torch::Tensor xr = x.to(torch::kFloat64).requires_grad_(true);
        torch::Tensor yr =
            nets::LocalResponseNorm(xr, radius, bias, alpha * 50, beta);
        yr.backward(g.to(torch::kFloat64));
        EXPECT_LE(MaxRel(yg, yr), Ulp(t) + 4e-6) << what << " output";
        EXPECT_LE(MaxRel(xg.grad(), xr.grad()), 2 * Ulp(t) + 1e-5)
            << what << " dx";
      }
    }
  }
}

// A convolution's and a fully connected layer's bias + activation on the
// GPU (BiasActCuda), float32, against the same layers in float64 on the CPU:
// outputs and the gradients of the input, weights and biases. (In bfloat16
// the product is rounded before the bias, and an activation's mask differs
// from float64's wherever the rounding crosses 0 or 6: see the next test.)

TEST(FusedBatchNormCudaTest, BiasActivationEqualsFloat64) {
  SKIP_WITHOUT_KERNELS();
  testing::FullFloat32 full_float32;
  torch::manual_seed(7);
  for (torch::ScalarType t : {torch::kFloat32}) {
    for (Activation a :
         {Activation::kNone, Activation::kRelu, Activation::kRelu6}) {
      const std::string what = std::string(c10::toString(t)) + " " + Name(a);
      nets::Conv2d conv(nets::Conv2dOptions(5, 24, 3).activation(a));
      nets::FullyConnected fc(
          nets::FullyConnectedOptions(40, 16).activation(a));
      {
        torch::NoGradGuard no_grad;
        conv->biases.uniform_(-1, 1);
        fc->biases.uniform_(-1, 1);
      }
      nets::Conv2d conv64 =
          std::dynamic_pointer_cast<nets::Conv2dImpl>(conv->clone());
      nets::FullyConnected fc64 =
          std::dynamic_pointer_cast<nets::FullyConnectedImpl>(fc->clone());
      conv64->to(torch::kFloat64);
      fc64->to(torch::kFloat64);
      conv->to(torch::kCUDA);
      fc->to(torch::kCUDA);
      const torch::Tensor x = torch::randn({6, 5, 7, 9}).to(t);
      const torch::Tensor v = torch::randn({12, 40}).to(t);
      // The GPU's product in t: the layers' own inputs rounded as autocast
      // would (float32 runs in full float32).
      torch::Tensor xg = x.to(torch::kCUDA)
                             .contiguous(torch::MemoryFormat::ChannelsLast)
                             .requires_grad_(true);
      torch::Tensor vg = v.to(torch::kCUDA).requires_grad_(true);
      torch::Tensor yg, zg;
      {
        AutocastScope autocast(
            t == torch::kBFloat16 ? Precision::kBFloat16 : Precision::kFloat32,
            torch::kCUDA);
        yg = conv->forward(xg);
        zg = fc->forward(vg);
      }
      EXPECT_NE(yg.grad_fn()->name().find("BiasActCuda"), std::string::npos)
          << what << ": took " << yg.grad_fn()->name();
      EXPECT_NE(zg.grad_fn()->name().find("BiasActCuda"), std::string::npos)
          << what;
      const torch::Tensor gy = torch::randn(yg.sizes());
      const torch::Tensor gz = torch::randn(zg.sizes());
      (yg.to(torch::kFloat32) * gy.to(torch::kCUDA)).sum().backward();
      (zg.to(torch::kFloat32) * gz.to(torch::kCUDA)).sum().backward();
      torch::Tensor xr = x.to(torch::kFloat64).requires_grad_(true);
      torch::Tensor vr = v.to(torch::kFloat64).requires_grad_(true);
      torch::Tensor yr = conv64->forward(xr);
      torch::Tensor zr = fc64->forward(vr);
      (yr * gy.to(torch::kFloat64)).sum().backward();
      (zr * gz.to(torch::kFloat64)).sum().backward();
      const double u = 2e-5;
      EXPECT_LE(MaxRel(yg, yr), u) << what << " conv output";
      EXPECT_LE(MaxRel(zg, zr), u) << what << " fc output";
      EXPECT_LE(MaxRel(conv->biases.grad(), conv64->biases.grad()), u)
          << what << " conv bias gradient";
      EXPECT_LE(MaxRel(fc->biases.grad(), fc64->biases.grad()), u)
          << what << " fc bias gradient";
      EXPECT_LE(MaxRel(conv->weights.grad(), conv64->weights.grad()), u)
          << what << " conv weights gradient";
      EXPECT_LE(MaxRel(xg.grad(), xr.grad()), u) << what << " conv dx";
      EXPECT_LE(MaxRel(vg.grad(), vr.grad()), u) << what << " fc dx";
    }
  }
}

// bfloat16 under autocast: the fused bias + activation against the same
// layer's product without bias (the same weights, the same rounded
// product) followed by bias and activation in float64, so that both decide
// the activation's mask from the same sums: the output within one rounding,
// the bias gradient to float32 accuracy, and the input and weight gradients
// (cuDNN's backward of the same masked gradient) within bfloat16's.
TEST(FusedBatchNormCudaTest, BFloat16BiasActivationFollowsItsOwnProduct) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(8);
  const auto cl = torch::MemoryFormat::ChannelsLast;
  for (Activation a :
       {Activation::kNone, Activation::kRelu, Activation::kRelu6}) {
    const std::string what = Name(a);
    auto act = [a](const torch::Tensor& s) {
      return a == Activation::kRelu    ? s.clamp_min(0)
             : a == Activation::kRelu6 ? s.clamp(0, 6)
                                       : s;
    };
    nets::Conv2d conv(nets::Conv2dOptions(5, 24, 3).activation(a));
    nets::Conv2d conv0(nets::Conv2dOptions(5, 24, 3)
                           .activation(Activation::kNone)
                           .use_bias(false));
    nets::FullyConnected fc(nets::FullyConnectedOptions(40, 16).activation(a));
    nets::FullyConnected fc0(nets::FullyConnectedOptions(40, 16)
                                 .activation(Activation::kNone)
                                 .use_bias(false));
    {
      torch::NoGradGuard no_grad;
      conv->biases.uniform_(-3, 3);  // (sums past 6 too)
      fc->biases.uniform_(-3, 3);
      conv0->weights.copy_(conv->weights);
      fc0->weights.copy_(fc->weights);
    }
    for (torch::nn::Module* m : std::vector<torch::nn::Module*>{
             conv.get(), conv0.get(), fc.get(), fc0.get()}) {
      m->to(torch::kCUDA);
    }
    const torch::Tensor x = (torch::randn({6, 5, 7, 9}) * 4).contiguous(cl);
    const torch::Tensor v = torch::randn({12, 40}) * 4;
    torch::Tensor xa = x.to(torch::kCUDA).contiguous(cl).requires_grad_(true);
    torch::Tensor xb = xa.detach().clone().requires_grad_(true);
    torch::Tensor va = v.to(torch::kCUDA).requires_grad_(true);
    torch::Tensor vb = va.detach().clone().requires_grad_(true);
    torch::Tensor y, y0, z, z0;
    {
      AutocastScope autocast(Precision::kBFloat16, torch::kCUDA);
      y = conv->forward(xa);
      y0 = conv0->forward(xb);
      z = fc->forward(va);
      z0 = fc0->forward(vb);
    }
    ASSERT_EQ(y.scalar_type(), torch::kBFloat16) << what;
    ASSERT_EQ(y0.scalar_type(), torch::kBFloat16) << what;
    EXPECT_NE(y.grad_fn()->name().find("BiasActCuda"), std::string::npos)
        << what << ": took " << y.grad_fn()->name();
    EXPECT_NE(z.grad_fn()->name().find("BiasActCuda"), std::string::npos)
        << what;
    torch::Tensor cb =
        conv->biases.detach().to(torch::kFloat64).requires_grad_(true);
    torch::Tensor fb =
        fc->biases.detach().to(torch::kFloat64).requires_grad_(true);
    torch::Tensor yr = act(y0.to(torch::kFloat64) + cb.view({1, -1, 1, 1}));
    torch::Tensor zr = act(z0.to(torch::kFloat64) + fb);
    // Upstream gradients exact in bfloat16, so both paths mask the same
    // values.
    const torch::Tensor gy = torch::randn(y.sizes(), torch::kCUDA)
                                 .to(torch::kBFloat16)
                                 .contiguous(cl);
    const torch::Tensor gz =
        torch::randn(z.sizes(), torch::kCUDA).to(torch::kBFloat16);
    y.backward(gy);
    z.backward(gz);
    yr.backward(gy.to(torch::kFloat64));
    zr.backward(gz.to(torch::kFloat64));
    const double u = 1.0 / 256;
    EXPECT_LE(MaxRel(y, yr), u) << what << " conv output";
    EXPECT_LE(MaxRel(z, zr), u) << what << " fc output";
    EXPECT_LE(MaxRel(conv->biases.grad(), cb.grad()), 1e-5)
        << what << " conv bias gradient";
    EXPECT_LE(MaxRel(fc->biases.grad(), fb.grad()), 1e-5)
        << what << " fc bias gradient";
    EXPECT_LE(MaxRel(xa.grad(), xb.grad()), 2 * u) << what << " conv dx";
    EXPECT_LE(MaxRel(conv->weights.grad(), conv0->weights.grad()), 2 * u)
        << what << " conv weights gradient";
    EXPECT_LE(MaxRel(va.grad(), vb.grad()), 2 * u) << what << " fc dx";
    EXPECT_LE(MaxRel(fc->weights.grad(), fc0->weights.grad()), 2 * u)
        << what << " fc weights gradient";
  }
}

#ifdef SLIMTORCH_WITH_CUDA
// The kernels under stream capture: a captured forward + backward replayed
// gives what the same step gives eagerly.
TEST(FusedBatchNormCudaTest, CapturedStepEqualsEagerStep) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(3);
  const int64_t C = 48;
  const auto cl = torch::MemoryFormat::ChannelsLast;
  nets::BatchNorm bn(nets::BatchNormOptions(C).decay(0.9));
  bn->to(torch::kCUDA);
  bn->train();
  torch::Tensor x = torch::randn({8, C, 9, 9}, torch::kCUDA)
                        .to(torch::kBFloat16)
                        .contiguous(cl)
                        .requires_grad_(true);
  torch::Tensor skip = torch::randn({8, C, 9, 9}, torch::kCUDA)
                           .to(torch::kBFloat16)
                           .contiguous(cl);
  auto step = [&] {
    x.mutable_grad() = torch::Tensor();
    bn->beta.mutable_grad() = torch::Tensor();
    torch::Tensor y = nets::BatchNormRelu(*bn, x);
    y = nets::AddRelu(y, skip);
    y.to(torch::kFloat32).square().sum().backward();
    return y.detach();
  };
  const torch::Tensor m0 = bn->moving_mean.clone();
  const torch::Tensor y_eager = step();
  const torch::Tensor dx_eager = x.grad().clone();
  const torch::Tensor dbeta_eager = bn->beta.grad().clone();
  const torch::Tensor m_eager = bn->moving_mean.clone();
  torch::cuda::synchronize();
  at::cuda::CUDAGraph graph;
  torch::Tensor y_graph;
  {
    c10::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromPool());
    graph.capture_begin();
    y_graph = step();
    graph.capture_end();
  }
  {
    torch::NoGradGuard no_grad;
    bn->moving_mean.copy_(m0);
  }
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(torch::equal(y_graph, y_eager));
  EXPECT_TRUE(torch::equal(x.grad(), dx_eager));
  EXPECT_TRUE(torch::equal(bn->beta.grad(), dbeta_eager));
  EXPECT_TRUE(torch::equal(bn->moving_mean, m_eager));
}
#endif

}  // namespace
}  // namespace slimtorch
