// The fused batch norm + activation kernels (CPU float32, NCHW and
// channels-last) against LibTorch's batch_norm followed by the activation
// (BatchNormImpl::fused_kernels = false) in float64: outputs, moving statistics
// and the gradients of x, gamma and beta, in training and inference, for
// channel counts that are and are not multiples of the vector width, one
// value per channel, and inputs far from zero (the statistics must not
// cancel).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "slimtorch/core/cpu_isa.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/layers.h"

namespace slimtorch {
namespace {

using nets::Activation;

double MaxRel(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = 1.0 + b.abs().max().item<double>();
  return (a - b).abs().max().item<double>() / scale;
}

// A trainable batch norm of C channels with gamma 0.5 .. 1.5 and beta
// -1 .. 1 across the channels.
nets::BatchNorm ScaledBatchNorm(int64_t C) {
  nets::BatchNorm bn(nets::BatchNormOptions(C).decay(0.9).scale(true));
  torch::NoGradGuard no_grad;
  bn->gamma.copy_(torch::linspace(0.5, 1.5, C));
  bn->beta.copy_(torch::linspace(-1, 1, C));
  bn->train();
  return bn;
}

struct Case {
  std::vector<int64_t> shape;
  bool channels_last;
  Activation activation;
  bool scale;
  double offset;  // added to x: the statistics' cancellation
};

std::string Name(const Case& c) {
  std::string s = "shape [";
  for (int64_t d : c.shape) s += std::to_string(d) + ",";
  s += c.channels_last ? "] channels-last" : "] NCHW";
  s += c.activation == Activation::kNone   ? " none"
       : c.activation == Activation::kRelu ? " relu"
                                           : " relu6";
  s += c.scale ? " scale" : "";
  return s + " offset " + std::to_string(c.offset);
}

// One training step of the fused path and of LibTorch's in float64 (the
// reference) from the same state, then inference. Inputs far from zero
// lose digits in float32 itself (x * scale + shift cancels), so the bounds
// grow with the offset.
void CheckCase(const Case& c) {
  const std::string what = Name(c);
  const int64_t C = c.shape[1];
  const double k = 1 + std::abs(c.offset) / 100;
  nets::BatchNorm fused(nets::BatchNormOptions(C).decay(0.9).scale(c.scale));
  nets::BatchNorm ref(nets::BatchNormOptions(C).decay(0.9).scale(c.scale));
  ref->fused_kernels = false;
  {
    torch::NoGradGuard no_grad;
    torch::Tensor beta = torch::randn({C}) * 2;
    fused->beta.copy_(beta);
    ref->beta.copy_(beta);
    if (c.scale) {
      torch::Tensor gamma = torch::rand({C}) + 0.5;
      fused->gamma.copy_(gamma);
      ref->gamma.copy_(gamma);
    }
  }
  ref->to(torch::kFloat64);
  torch::Tensor x = torch::randn(c.shape) * 3 + c.offset;
  if (c.channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
  torch::Tensor upstream = torch::randn(c.shape);

  std::vector<torch::Tensor> outs, dxs;
  for (nets::BatchNorm* bn : {&fused, &ref}) {
    const auto dtype = bn == &ref ? torch::kFloat64 : torch::kFloat32;
    torch::Tensor xi = x.detach().to(dtype).requires_grad_(true);
    (*bn)->train();
    torch::Tensor y = (*bn)->ForwardActivated(xi, c.activation, bn->get());
    (y * upstream.to(dtype)).sum().backward();
    outs.push_back(y.detach().to(torch::kFloat64));
    dxs.push_back(xi.grad().to(torch::kFloat64));
  }
  EXPECT_EQ(outs[0].is_contiguous(torch::MemoryFormat::ChannelsLast) &&
                !outs[0].is_contiguous(),
            c.channels_last && c.shape[2] * c.shape[3] > 1)
      << what << ": the output keeps the input's memory order";
  EXPECT_LE(MaxRel(outs[0], outs[1]), 2e-6 * k) << what << " output";
  EXPECT_LE(MaxRel(dxs[0], dxs[1]), 2e-5 * k) << what << " input gradient";
  EXPECT_LE(MaxRel(fused->beta.grad().to(torch::kFloat64), ref->beta.grad()),
            2e-5 * k)
      << what << " beta gradient";
  if (c.scale) {
    EXPECT_LE(
        MaxRel(fused->gamma.grad().to(torch::kFloat64), ref->gamma.grad()),
        2e-5 * k)
        << what << " gamma gradient";
  }
  EXPECT_LE(MaxRel(fused->moving_mean.to(torch::kFloat64), ref->moving_mean),
            1e-6)
      << what << " moving_mean";
  EXPECT_LE(
      MaxRel(fused->moving_variance.to(torch::kFloat64), ref->moving_variance),
      1e-6)
      << what << " moving_variance";
  // The statistics moved (the comparison above is not of two defaults):
  // the batch variance is about 9, the initial moving one 1.
  EXPECT_GT((fused->moving_variance - 1).abs().max().item<double>(), 0.1)
      << what;

  // Inference with the moving statistics, without autograd.
  torch::NoGradGuard no_grad;
  fused->eval();
  ref->eval();
  EXPECT_LE(MaxRel(fused->ForwardActivated(x, c.activation, fused.get())
                       .to(torch::kFloat64),
                   ref->ForwardActivated(x.to(torch::kFloat64), c.activation,
                                         ref.get())),
            2e-6 * k)
      << what << " inference output";
}

// oneDNN's kernels (channels-last training, where built) or slimtorch's
// own for the whole scope.
class DnnlBatchNorm {
 public:
  explicit DnnlBatchNorm(bool on) : built_(nets::SetDnnlBatchNorm(on)) {}
  ~DnnlBatchNorm() { nets::SetDnnlBatchNorm(true); }
  bool built() const { return built_; }

 private:
  bool built_;
};

void EqualsLibTorchs();

TEST(FusedBatchNormTest, EqualsLibTorchsBatchNormThenActivation) {
  for (bool dnnl : {true, false}) {
    DnnlBatchNorm scope(dnnl);
    if (dnnl && !scope.built()) continue;
    SCOPED_TRACE(dnnl ? "oneDNN's batch norm" : "own kernels");
    EqualsLibTorchs();
  }
}

void EqualsLibTorchs() {
  torch::manual_seed(0);
  const std::vector<std::vector<int64_t>> shapes = {
      {4, 16, 7, 9},
      {2, 24, 1, 1},
      {3, 5, 33, 17},
      {1, 3, 2, 2},
      // Column chunks of 4, 2 and 1 vectors and single channels (the
      // channels-last reductions' paths), and more rows than a block of 32.
      {2, 83, 5, 7},
      {3, 64, 4, 5}};
  for (const auto& shape : shapes) {
    for (bool cl : {false, true}) {
      for (Activation a :
           {Activation::kNone, Activation::kRelu, Activation::kRelu6}) {
        for (bool scale : {false, true}) {
          CheckCase({shape, cl, a, scale, 0.0});
        }
      }
    }
  }
  // Far from zero: sum(x^2) - sum(x)^2 / n would lose every digit.
  CheckCase({{4, 16, 7, 9}, true, Activation::kRelu, true, 1000.0});
  CheckCase({{4, 16, 7, 9}, false, Activation::kNone, true, -1000.0});
}

// A channels-last output concatenated with others (an Inception block's
// branch) gets its gradient as a channel slice of the wider gradient: the
// own kernel reads it in place (oneDNN's from a dense copy), with the same
// results as from a dense copy.
void ReadsAGradientSlice();

TEST(FusedBatchNormTest, ReadsAConcatenationsGradientSliceInPlace) {
  for (bool dnnl : {true, false}) {
    DnnlBatchNorm scope(dnnl);
    if (dnnl && !scope.built()) continue;
    SCOPED_TRACE(dnnl ? "oneDNN's batch norm" : "own kernels");
    ReadsAGradientSlice();
  }
}

void ReadsAGradientSlice() {
  torch::manual_seed(4);
  const int64_t C = 24;
  const auto cl = torch::MemoryFormat::ChannelsLast;
  torch::Tensor x = torch::randn({3, C, 6, 5}).contiguous(cl);
  torch::Tensor left = torch::randn({3, 8, 6, 5}).contiguous(cl);
  torch::Tensor right = torch::randn({3, 13, 6, 5}).contiguous(cl);
  torch::Tensor upstream = torch::randn({3, 8 + C + 13, 6, 5}).contiguous(cl);
  for (Activation a : {Activation::kRelu, Activation::kRelu6}) {
    std::vector<torch::Tensor> dxs, dgammas, dbetas;
    for (bool concat : {true, false}) {
      nets::BatchNorm bn = ScaledBatchNorm(C);
      torch::Tensor xi = x.clone().requires_grad_(true);
      torch::Tensor y = bn->ForwardActivated(xi, a, bn.get());
      if (concat) {
        torch::Tensor g_seen;
        y.register_hook([&g_seen](torch::Tensor g) { g_seen = g; });
        (torch::cat({left, y, right}, 1) * upstream).sum().backward();
        // The case under test: a channel slice, rows 8 + C + 13 apart.
        ASSERT_TRUE(g_seen.defined());
        EXPECT_EQ(g_seen.stride(1), 1);
        EXPECT_EQ(g_seen.stride(3), 8 + C + 13);
      } else {
        torch::Tensor dense = upstream.narrow(1, 8, C).contiguous(cl);
        (y * dense).sum().backward();
      }
      dxs.push_back(xi.grad());
      dgammas.push_back(bn->gamma.grad());
      dbetas.push_back(bn->beta.grad());
    }
    EXPECT_TRUE(torch::equal(dxs[0], dxs[1]));
    EXPECT_TRUE(torch::equal(dgammas[0], dgammas[1]));
    EXPECT_TRUE(torch::equal(dbetas[0], dbetas[1]));
    EXPECT_GT(dxs[0].abs().max().item<float>(), 0.0f);
  }
}

// The activation's mask in backward is decided from x as the forward pass
// decided it: where relu6 clamps at 6 or relu at 0 the gradient is 0.
TEST(FusedBatchNormTest, GradientStopsWhereTheActivationClamps) {
  nets::BatchNorm bn(nets::BatchNormOptions(1).decay(0.9).scale(true));
  torch::Tensor x = torch::tensor({-3.0f, -1.0f, 0.5f, 1.0f, 2.0f, 40.0f})
                        .reshape({6, 1, 1, 1})
                        .requires_grad_(true);
  {
    torch::NoGradGuard no_grad;
    bn->gamma.fill_(10.0f);
    bn->beta.fill_(5.0f);
  }
  bn->train();
  torch::Tensor y = bn->ForwardActivated(x, Activation::kRelu6, bn.get());
  const float max_y = y.max().item<float>();
  EXPECT_EQ(max_y, 6.0f);  // 40 normalises to > 6 and is clamped
  EXPECT_EQ(y.min().item<float>(), 0.0f);  // -3 to < 0
  y.sum().backward();
  torch::Tensor passed = (y > 0) & (y < 6);
  // dL/dbeta = sum of the upstream gradient where the activation passed.
  EXPECT_FLOAT_EQ(bn->beta.grad().item<float>(), passed.sum().item<float>());
}

// The kernels' variants (slimtorch/core/cpu_isa.h) compute the same float
// operations: channels-last in the same order, so the same bits; NCHW runs
// split their sums across the vector's lanes, so within rounding.
TEST(FusedBatchNormTest, EveryInstructionSetGivesTheSameValues) {
  if (SupportedCpuIsa() == CpuIsa::kBaseline) {
    GTEST_SKIP() << "this CPU (or build) has only the baseline kernels";
  }
  DnnlBatchNorm own(false);  // (oneDNN's do not depend on ours)
  torch::manual_seed(6);
  struct Result {
    torch::Tensor y, dx, dgamma, dbeta, moving_variance;
  };
  auto run = [](const torch::Tensor& x, const torch::Tensor& up, Activation a) {
    nets::BatchNorm bn = ScaledBatchNorm(x.size(1));
    torch::Tensor xi = x.clone().requires_grad_(true);
    torch::Tensor y = bn->ForwardActivated(xi, a, bn.get());
    (y * up).sum().backward();
    return Result{y.detach(), xi.grad(), bn->gamma.grad(), bn->beta.grad(),
                  bn->moving_variance.clone()};
  };
  const CpuIsa saved = ActiveCpuIsa();
  for (bool cl : {true, false}) {
    // 83 channels: every chunk width; 2 x 9 x 11 = 198 rows: 7 blocks.
    torch::Tensor x = torch::randn({2, 83, 9, 11}) * 2 + 0.5;
    if (cl) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    const torch::Tensor up = torch::randn_like(x);
    for (Activation a : {Activation::kNone, Activation::kRelu6}) {
      SetActiveCpuIsa(CpuIsa::kBaseline);
      const Result base = run(x, up, a);
      for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
        if (static_cast<int>(isa) > static_cast<int>(SupportedCpuIsa())) {
          continue;
        }
        SetActiveCpuIsa(isa);
        ASSERT_EQ(ActiveCpuIsa(), isa);
        const Result r = run(x, up, a);
        const std::string what =
            std::string(CpuIsaName(isa)) + (cl ? " channels-last" : " NCHW");
        const std::vector<
            std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>>>
            pairs = {
                {"output", {r.y, base.y}},
                {"input gradient", {r.dx, base.dx}},
                {"gamma gradient", {r.dgamma, base.dgamma}},
                {"beta gradient", {r.dbeta, base.dbeta}},
                {"moving variance", {r.moving_variance, base.moving_variance}}};
        for (const auto& [name, t] : pairs) {
          if (cl) {
            EXPECT_TRUE(torch::equal(t.first, t.second)) << what << " " << name;
          } else {
            EXPECT_LE(MaxRel(t.first.to(torch::kFloat64),
                             t.second.to(torch::kFloat64)),
                      1e-5)
                << what << " " << name;
          }
        }
      }
    }
  }
  SetActiveCpuIsa(saved);
}

TEST(CpuIsaTest, TheActiveSetIsCappedByWhatTheCpuHas) {
  const CpuIsa saved = ActiveCpuIsa();
  EXPECT_LE(static_cast<int>(saved), static_cast<int>(SupportedCpuIsa()));
  EXPECT_EQ(SetActiveCpuIsa(CpuIsa::kBaseline), saved);
  EXPECT_EQ(ActiveCpuIsa(), CpuIsa::kBaseline);
  SetActiveCpuIsa(CpuIsa::kAvx512);
  EXPECT_EQ(ActiveCpuIsa(), SupportedCpuIsa());
  SetActiveCpuIsa(saved);
  EXPECT_STREQ(CpuIsaName(CpuIsa::kAvx2), "avx2");
}

// bfloat16 channels-last training batch norms (--precision=bf16's
// convolution outputs) go through oneDNN's kernel where built: output,
// input gradient, gamma / beta gradients and moving statistics against
// LibTorch's batch norm + activation in float64 on the same bfloat16
// values. Bounds: y and dx are rounded to bfloat16 (2^-9 = 0.002 of each
// value; observed 0.0013-0.0026 of the largest), the per-channel values are
// float32 sums of exact inputs (observed <= 4e-7).
TEST(FusedBatchNormTest, Bfloat16TrainsThroughOneDnn) {
  DnnlBatchNorm scope(true);
  if (!scope.built()) GTEST_SKIP() << "built without oneDNN's batch norm";
  torch::manual_seed(4);
  for (Activation a : {Activation::kRelu, Activation::kNone}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{4, 16, 7, 9},
          std::vector<int64_t>{2, 83, 5, 7}}) {
      const int64_t C = shape[1];
      const std::string what =
          std::string(a == Activation::kRelu ? "relu" : "none") +
          " C=" + std::to_string(C);
      nets::BatchNorm bn = ScaledBatchNorm(C);
      nets::BatchNorm ref = ScaledBatchNorm(C);
      ref->fused_kernels = false;
      ref->to(torch::kFloat64);
      const torch::Tensor x0 =
          (torch::randn(shape) * 3 + 1)
              .to(torch::kBFloat16)
              .contiguous(torch::MemoryFormat::ChannelsLast);
      const torch::Tensor upstream = torch::randn(shape).to(torch::kBFloat16);
      torch::Tensor x = x0.clone().requires_grad_(true);
      torch::Tensor y = bn->ForwardActivated(x, a, bn.get());
      ASSERT_NE(y.grad_fn(), nullptr) << what;
      EXPECT_NE(y.grad_fn()->name().find("BatchNormDnnl"), std::string::npos)
          << what << ": took " << y.grad_fn()->name();
      EXPECT_EQ(y.scalar_type(), torch::kBFloat16) << what;
      EXPECT_TRUE(y.is_contiguous(torch::MemoryFormat::ChannelsLast)) << what;
      (y.to(torch::kFloat32) * upstream.to(torch::kFloat32)).sum().backward();
      EXPECT_EQ(x.grad().scalar_type(), torch::kBFloat16) << what;

      torch::Tensor xr = x0.to(torch::kFloat64).requires_grad_(true);
      torch::Tensor yr = ref->ForwardActivated(xr, a, ref.get());
      (yr * upstream.to(torch::kFloat64)).sum().backward();
      EXPECT_LE(MaxRel(y.to(torch::kFloat64), yr), 5e-3) << what << " output";
      EXPECT_LE(MaxRel(x.grad().to(torch::kFloat64), xr.grad()), 5e-3)
          << what << " input gradient";
      EXPECT_LE(MaxRel(bn->gamma.grad().to(torch::kFloat64), ref->gamma.grad()),
                1e-5)
          << what << " gamma gradient";
      EXPECT_LE(MaxRel(bn->beta.grad().to(torch::kFloat64), ref->beta.grad()),
                1e-5)
          << what << " beta gradient";
      EXPECT_LE(MaxRel(bn->moving_mean.to(torch::kFloat64), ref->moving_mean),
                1e-6)
          << what << " moving_mean";
      EXPECT_LE(
          MaxRel(bn->moving_variance.to(torch::kFloat64), ref->moving_variance),
          1e-6)
          << what << " moving_variance";
    }
  }
}

// A residual sum with its ReLU in one pass (nets::AddRelu on CPU float32):
// bit-equal to add then ReLU in every instruction set, NCHW and
// channels-last, lengths that leave a vector tail, NaN kept; the gradient
// goes to both inputs where the output is positive.
TEST(FusedBatchNormTest, AddReluEqualsAddThenRelu) {
  torch::manual_seed(9);
  const CpuIsa saved = ActiveCpuIsa();
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (static_cast<int>(isa) > static_cast<int>(SupportedCpuIsa())) continue;
    SetActiveCpuIsa(isa);
    for (bool cl : {false, true}) {
      const std::string what =
          std::string(CpuIsaName(isa)) + (cl ? " channels-last" : " NCHW");
      const auto format = cl ? torch::MemoryFormat::ChannelsLast
                             : torch::MemoryFormat::Contiguous;
      torch::Tensor a0 = torch::randn({3, 7, 5, 9}).contiguous(format);
      a0[1][2][3][4] = std::numeric_limits<float>::quiet_NaN();
      const torch::Tensor b0 = torch::randn({3, 7, 5, 9}).contiguous(format);
      const torch::Tensor g = torch::randn({3, 7, 5, 9});
      torch::Tensor a = a0.clone().requires_grad_(true);
      torch::Tensor b = b0.clone().requires_grad_(true);
      torch::Tensor y = nets::AddRelu(a, b);
      ASSERT_NE(y.grad_fn(), nullptr) << what;
      EXPECT_NE(y.grad_fn()->name().find("AddReluCpu"), std::string::npos)
          << what << ": took " << y.grad_fn()->name();
      EXPECT_TRUE(y.is_contiguous(format)) << what;
      y.backward(g);
      torch::Tensor a2 = a0.clone().requires_grad_(true);
      torch::Tensor b2 = b0.clone().requires_grad_(true);
      torch::Tensor y2 = torch::relu(a2 + b2);
      y2.backward(g);
      EXPECT_TRUE(torch::equal(y.isnan(), y2.isnan())) << what;
      EXPECT_TRUE(y[1][2][3][4].isnan().item<bool>()) << what;
      EXPECT_TRUE(torch::equal(y.nan_to_num(), y2.nan_to_num())) << what;
      EXPECT_TRUE(torch::equal(a.grad(), a2.grad())) << what;
      EXPECT_TRUE(torch::equal(b.grad(), b2.grad())) << what;
    }
  }
  SetActiveCpuIsa(saved);
}

}  // namespace
}  // namespace slimtorch
