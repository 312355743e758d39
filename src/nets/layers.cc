#include "slimtorch/nets/layers.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "batch_norm_dnnl.h"
#include "batch_norm_kernel.h"
#include "conv_dnnl.h"
#include "cuda_fused.h"
#include "lrn_kernel.h"
#include "pool_dnnl.h"
#include "pool_kernel.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {
namespace {

// Whether the fused kernels (batch norm, and on a GPU the others of
// cuda_fused.h) may run: SetFusedBatchNorm, or SLIMTORCH_FUSED_KERNELS=0 for
// a whole process (core/kernel_switches.h).
bool FusedBatchNormOn() { return KernelSwitchOn(KernelSwitch::kFusedKernels); }

// Whether the GPU kernels of cuda_fused.h may replace LibTorch's ops (not
// while a trace takes the ops: it sees the plain ones).
bool UseCudaKernels() { return FusedBatchNormOn() && !TracingOps(); }

// The layer's activation, in place; recorded as "<layer>/Relu" or
// "<layer>/Relu6" (TF-Slim's op names).
torch::Tensor Activate(torch::Tensor x, Activation a,
                       const torch::nn::Module* layer) {
  switch (a) {
    case Activation::kNone:
      return x;
    // In place: the traces see the op's output as the input's tensor.
    case Activation::kRelu:
      torch::relu_(x);
      if (TracingOps()) TraceOp({OpKind::kRelu, layer, "/Relu", {x}, x});
      return x;
    case Activation::kRelu6:
      torch::clamp_(x, 0.0, 6.0);
      if (TracingOps()) TraceOp({OpKind::kRelu6, layer, "/Relu6", {x}, x});
      return x;
  }
  return x;
}

// ---- Local response normalization: the fused CPU path. ----

using internal::LrnParams;

class LrnFunction : public torch::autograd::Function<LrnFunction> {
 public:
  // x: CPU float32 contiguous [N, C, H, W].
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, int64_t radius,
                               double bias, double alpha, double beta) {
    ctx->save_for_backward({x});
    ctx->saved_data["radius"] = radius;
    ctx->saved_data["bias"] = bias;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["beta"] = beta;
    torch::Tensor y = torch::empty_like(x);
    const LrnParams prm{radius, bias, alpha, beta};
    internal::LrnForwardCpu(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0),
                            x.size(1), x.size(2) * x.size(3), prm);
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const torch::Tensor g = grad_outputs[0].contiguous();
    const LrnParams prm{ctx->saved_data["radius"].toInt(),
                        ctx->saved_data["bias"].toDouble(),
                        ctx->saved_data["alpha"].toDouble(),
                        ctx->saved_data["beta"].toDouble()};
    torch::Tensor dx = torch::empty_like(x);
    internal::LrnBackwardCpu(x.data_ptr<float>(), g.data_ptr<float>(),
                             dx.data_ptr<float>(), x.size(0), x.size(1),
                             x.size(2) * x.size(3), prm);
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

// ---- Batch normalization with its activation: the fused CPU path. ----

using internal::BnActivation;
using internal::BnLayout;

BnActivation ToBnActivation(Activation a) {
  switch (a) {
    case Activation::kNone:
      return BnActivation::kNone;
    case Activation::kRelu:
      return BnActivation::kRelu;
    case Activation::kRelu6:
      return BnActivation::kRelu6;
  }
  return BnActivation::kNone;
}

// x's layout as a dense 4-D CPU tensor in NCHW or channels-last order,
// whatever its type.
c10::optional<BnLayout> DenseBnLayout(const torch::Tensor& x) {
  if (!x.defined() || x.dim() != 4 || !x.is_cpu()) return c10::nullopt;
  BnLayout l;
  l.n = x.size(0);
  l.channels = x.size(1);
  l.spatial = x.size(2) * x.size(3);
  if (x.is_contiguous()) {
    l.channels_last = l.spatial == 1;  // the same bytes either way
  } else if (x.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    l.channels_last = true;
  } else {
    return c10::nullopt;
  }
  return l;
}

// The fused kernels' view of x, or nothing when they do not apply (not a
// dense 4-D CPU float32 tensor in NCHW or channels-last order).
c10::optional<BnLayout> FusedBnLayout(const torch::Tensor& x) {
  if (!x.defined() || x.scalar_type() != torch::kFloat32) return c10::nullopt;
  return DenseBnLayout(x);
}

torch::MemoryFormat FormatOf(const BnLayout& l) {
  return l.channels_last && l.spatial > 1 ? torch::MemoryFormat::ChannelsLast
                                          : torch::MemoryFormat::Contiguous;
}

// FusedBnLayout, or for a dense channels-last 4-D CPU bfloat16 tensor its
// layout with bfloat16 set (oneDNN's batch norm only; NCHW bfloat16 would
// run in oneDNN 2.6's reference kernel).
c10::optional<BnLayout> DnnlBnLayout(const torch::Tensor& x) {
  if (!x.defined() || x.scalar_type() != torch::kBFloat16) {
    return FusedBnLayout(x);
  }
  c10::optional<BnLayout> l = DenseBnLayout(x);
  if (!l || !l->channels_last || l->spatial <= 1) return c10::nullopt;
  l->bfloat16 = true;
  return l;
}

// The per-channel float32 values the kernels read, from the batch's (or
// the moving) mean and invstd in double: rows of C of one float32 [3, C]
// tensor: mean, scale = gamma * invstd, shift = beta - mean * scale
// (rounded once from double). gamma / beta may be null (1 / 0).
torch::Tensor KernelCoefficients(const double* mean, const double* invstd,
                                 const float* gamma, const float* beta,
                                 int64_t C) {
  torch::Tensor coef = torch::empty({3, C}, torch::kFloat32);
  float* m = coef.data_ptr<float>();
  float* scale = m + C;
  float* shift = scale + C;
  for (int64_t c = 0; c < C; ++c) {
    const double sc = gamma != nullptr ? invstd[c] * gamma[c] : invstd[c];
    m[c] = static_cast<float>(mean[c]);
    scale[c] = static_cast<float>(sc);
    shift[c] =
        static_cast<float>((beta != nullptr ? beta[c] : 0.0) - mean[c] * sc);
  }
  return coef;
}

const float* FloatsOrNull(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.data_ptr<float>() : nullptr;
}

// y = act((x - mean) * invstd * gamma + beta) with the batch's mean and
// invstd (`stats`: double [2, C], computed by the caller, not
// differentiated: their gradient paths are in the formula below, as in
// every batch norm backward) and the kernels' coefficients from them
// (`coef`, KernelCoefficients). gamma / beta may be empty (1 / 0, no
// gradient). Every per-channel value is computed in plain loops: a
// LibTorch op on a [C] tensor costs more than the loop, and a ResNet step
// has 53 batch norms.
class BatchNormActFunction
    : public torch::autograd::Function<BatchNormActFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& gamma,
                               const torch::Tensor& beta,
                               const torch::Tensor& stats,
                               const torch::Tensor& coef, int64_t act) {
    const BnLayout l = *FusedBnLayout(x);
    const int64_t C = l.channels;
    const float* scale = coef.data_ptr<float>() + C;
    torch::Tensor y = torch::empty_like(x, FormatOf(l));
    internal::BnApplyCpu(x.data_ptr<float>(), l, scale, scale + C,
                         static_cast<BnActivation>(act), y.data_ptr<float>());
    ctx->save_for_backward({x, gamma, stats, coef});
    ctx->saved_data["act"] = act;
    ctx->saved_data["beta"] = beta.numel() > 0;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const float* gamma = FloatsOrNull(saved[1]);
    const double* mean = saved[2].data_ptr<double>();
    const int64_t C = saved[2].size(1);
    const double* invstd = mean + C;
    const float* mean_f = saved[3].data_ptr<float>();
    const float* scale = mean_f + C;
    const float* shift = scale + C;
    const auto act = static_cast<BnActivation>(ctx->saved_data["act"].toInt());
    const BnLayout l = *FusedBnLayout(x);
    // A channels-last gradient that is a channel slice of a wider tensor
    // (a concatenation's backward) is read in place.
    const int64_t sliced = SlicedRowStride(grad_outputs[0], l);
    const torch::Tensor g =
        sliced > 0 ? grad_outputs[0] : grad_outputs[0].contiguous(FormatOf(l));
    const int64_t g_row_stride = sliced > 0 ? sliced : C;
    const double count = static_cast<double>(l.n * l.spatial);
    // sum(g') and sum(g' * (x - mean)) where the activation let g through
    // (decided from the forward pass's scale and shift).
    std::vector<double> sums(2 * C);
    double* sum_g = sums.data();
    double* sum_gx = sum_g + C;
    internal::BnBackwardReduceCpu(g.data_ptr<float>(), g_row_stride,
                                  x.data_ptr<float>(), l, act, scale, shift,
                                  mean_f, sum_g, sum_gx);
    // dx = a * g' + b * (x - mean) + k with a = gamma * invstd,
    // b = -a * invstd^2 * sum_gx / M, k = -a * sum_g / M.
    std::vector<float> abk(3 * C);
    float* a = abk.data();
    float* b = a + C;
    float* k = b + C;
    for (int64_t c = 0; c < C; ++c) {
      const double ac = gamma != nullptr ? gamma[c] * invstd[c] : invstd[c];
      a[c] = static_cast<float>(ac);
      b[c] =
          static_cast<float>(-ac * invstd[c] * invstd[c] * sum_gx[c] / count);
      k[c] = static_cast<float>(-ac * sum_g[c] / count);
    }
    torch::Tensor dx = torch::empty_like(x, FormatOf(l));
    internal::BnBackwardApplyCpu(g.data_ptr<float>(), g_row_stride,
                                 x.data_ptr<float>(), l, act, scale, shift,
                                 mean_f, a, b, k, dx.data_ptr<float>());
    torch::Tensor dgamma, dbeta;
    if (gamma != nullptr) {
      dgamma = torch::empty({C}, torch::kFloat32);
      float* d = dgamma.data_ptr<float>();
      for (int64_t c = 0; c < C; ++c) {
        d[c] = static_cast<float>(sum_gx[c] * invstd[c]);
      }
    }
    if (ctx->saved_data["beta"].toBool()) {
      dbeta = torch::empty({C}, torch::kFloat32);
      float* d = dbeta.data_ptr<float>();
      for (int64_t c = 0; c < C; ++c) d[c] = static_cast<float>(sum_g[c]);
    }
    return {
        dx, dgamma, dbeta, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

  // The row stride of g when it is float32 rows of C channels spaced wider
  // than C (a channel slice of a channels-last tensor), else 0.
  static int64_t SlicedRowStride(const torch::Tensor& g, const BnLayout& l) {
    if (!l.channels_last || l.spatial <= 1 || g.dim() != 4 ||
        g.scalar_type() != torch::kFloat32 || g.size(1) != l.channels ||
        g.stride(1) != 1) {
      return 0;
    }
    const int64_t r = g.stride(3);
    const int64_t h = g.size(2), w = g.size(3);
    if (w <= 1 || r <= l.channels || (h > 1 && g.stride(2) != w * r) ||
        (g.size(0) > 1 && g.stride(0) != h * w * r)) {
      return 0;
    }
    return r;
  }
};

// Training through oneDNN's batch norm (batch_norm_dnnl.h; x float32, or
// bfloat16 channels-last: DnnlBnLayout): y in x's type, and the
// batch's mean and biased variance into `stats` ([2, C] float32, filled
// here, not differentiated); backward by oneDNN from x, the statistics and
// the ReLU's mask it kept. gamma / beta may be empty (1 / 0, no gradient).
class BatchNormDnnlFunction
    : public torch::autograd::Function<BatchNormDnnlFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& gamma,
                               const torch::Tensor& beta,
                               const torch::Tensor& stats, double epsilon,
                               bool relu) {
    const BnLayout l = *DnnlBnLayout(x);
    const float eps = static_cast<float>(epsilon);
    torch::Tensor y = torch::empty_like(x, FormatOf(l));
    torch::Tensor ws = torch::empty(
        {static_cast<int64_t>(internal::DnnlBnWorkspaceBytes(l, relu, eps))},
        torch::kUInt8);
    float* mean = stats.data_ptr<float>();
    internal::DnnlBnForwardTraining(x.data_ptr(), l, FloatsOrNull(gamma),
                                    FloatsOrNull(beta), eps, relu, y.data_ptr(),
                                    mean, mean + l.channels,
                                    ws.numel() > 0 ? ws.data_ptr() : nullptr);
    ctx->save_for_backward({x, gamma, stats, ws});
    ctx->saved_data["epsilon"] = epsilon;
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["beta"] = beta.numel() > 0;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& gamma = saved[1];
    const float* mean = saved[2].data_ptr<float>();
    const torch::Tensor& ws = saved[3];
    const BnLayout l = *DnnlBnLayout(x);
    const torch::Tensor g =
        grad_outputs[0].to(x.scalar_type()).contiguous(FormatOf(l));
    torch::Tensor dx = torch::empty_like(x, FormatOf(l));
    torch::Tensor dgamma, dbeta;
    if (gamma.numel() > 0) dgamma = torch::empty({l.channels}, torch::kFloat32);
    if (ctx->saved_data["beta"].toBool()) {
      dbeta = torch::empty({l.channels}, torch::kFloat32);
    }
    internal::DnnlBnBackward(
        x.data_ptr(), g.data_ptr(), l, FloatsOrNull(gamma), mean,
        mean + l.channels, ws.numel() > 0 ? ws.data_ptr() : nullptr,
        static_cast<float>(ctx->saved_data["epsilon"].toDouble()),
        ctx->saved_data["relu"].toBool(), dx.data_ptr(),
        dgamma.defined() ? dgamma.data_ptr<float>() : nullptr,
        dbeta.defined() ? dbeta.data_ptr<float>() : nullptr);
    return {
        dx, dgamma, dbeta, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Whether a training batch norm on the CPU goes through oneDNN's kernels:
// built with them, channels-last (oneDNN 2.6 runs plain NCHW in a reference
// kernel ~8x slower than ours), no ReLU6 (oneDNN fuses ReLU only), and not
// turned off (SetDnnlBatchNorm, SLIMTORCH_DNNL_BATCH_NORM=0).

bool UseDnnlBatchNorm(BnActivation act, const BnLayout& l) {
  return KernelSwitchOn(KernelSwitch::kDnnlBatchNorm) &&
         internal::DnnlBatchNormBuilt() && l.channels_last &&
         act != BnActivation::kRelu6;
}

void CheckLrnArgs(const torch::Tensor& x, int64_t depth_radius, double bias,
                  double alpha, double beta) {
  SLIM_CHECK(x.dim() == 4, "LocalResponseNorm expects [N, C, H, W], got ",
             x.sizes());
  SLIM_CHECK(depth_radius >= 0,
             "LocalResponseNorm: depth_radius must be >= 0, got ",
             depth_radius);
  SLIM_CHECK(bias > 0.0 && alpha >= 0.0,
             "LocalResponseNorm: needs bias > 0 and alpha >= 0, got bias ",
             bias, ", alpha ", alpha, ", beta ", beta);
}

int64_t Numel(const torch::Tensor& t) { return t.defined() ? t.numel() : 0; }

}  // namespace

torch::Tensor TruncatedNormal(torch::IntArrayRef shape, double stddev) {
  // TensorFlow's sampler: standard normals, those beyond 2 redrawn until
  // none is left (4.6% per round), then scaled. Float32, in chunks that stay
  // in cache, so that a 100M-parameter net is drawn in about a second.
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::empty(shape, torch::kFloat32);
  torch::Tensor flat = x.view({-1});
  constexpr int64_t kChunk = int64_t{1} << 18;
  for (int64_t begin = 0; begin < flat.numel(); begin += kChunk) {
    torch::Tensor c =
        flat.narrow(0, begin, std::min(kChunk, flat.numel() - begin));
    c.normal_();
    for (;;) {
      torch::Tensor outside = c.abs() > 2.0f;
      const int64_t n = outside.sum().item<int64_t>();
      if (n == 0) break;
      c.masked_scatter_(outside, torch::empty({n}, torch::kFloat32).normal_());
    }
  }
  return x.mul_(stddev);
}

void Initialize(torch::Tensor& t, const Initializer& init, int64_t fan_in,
                int64_t fan_out) {
  torch::NoGradGuard no_grad;
  switch (init.kind) {
    case Initializer::Kind::kZeros:
      t.zero_();
      break;
    case Initializer::Kind::kConstant:
      t.fill_(init.value);
      break;
    case Initializer::Kind::kTruncatedNormal:
      t.copy_(TruncatedNormal(t.sizes(), init.value));
      break;
    case Initializer::Kind::kXavierUniform: {
      double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
      t.uniform_(-limit, limit);
      break;
    }
    case Initializer::Kind::kVarianceScaling: {
      // tf_slim's correction for truncation (not Keras' 0.8796).
      t.copy_(TruncatedNormal(
          t.sizes(),
          std::sqrt(1.3 * init.value / static_cast<double>(fan_in))));
      break;
    }
  }
}

std::array<int64_t, 4> SamePadding(int64_t in_h, int64_t in_w, int64_t kh,
                                   int64_t kw, int64_t stride) {
  auto total = [stride](int64_t in, int64_t k) {
    int64_t out = (in + stride - 1) / stride;
    return std::max<int64_t>((out - 1) * stride + k - in, 0);
  };
  int64_t th = total(in_h, kh);
  int64_t tw = total(in_w, kw);
  return {th / 2, th - th / 2, tw / 2, tw - tw / 2};
}

Conv2dImpl::Conv2dImpl(const Conv2dOptions& options_) : options(options_) {
  reset();
}

void Conv2dImpl::reset() {
  const auto& o = options;
  SLIM_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && o.kernel_h() > 0 &&
                 o.kernel_w() > 0 && o.stride() > 0,
             "Conv2d: channels, kernel and stride must be positive");
  SLIM_CHECK(!o.depthwise() || o.out_channels() == o.in_channels(),
             "Conv2d: a depthwise conv (multiplier 1) keeps its ",
             o.in_channels(), " channels, not ", o.out_channels());
  weights =
      o.depthwise()
          ? register_parameter(
                "depthwise_weights",
                torch::empty({o.in_channels(), 1, o.kernel_h(), o.kernel_w()}))
          : register_parameter("weights",
                               torch::empty({o.out_channels(), o.in_channels(),
                                             o.kernel_h(), o.kernel_w()}));
  int64_t area = o.kernel_h() * o.kernel_w();
  Initialize(weights, o.weights_init(), area * o.in_channels(),
             area * o.out_channels());
  if (o.batch_norm()) {
    batch_norm = register_module("BatchNorm", BatchNorm(*o.batch_norm()));
  }
  if (o.use_bias() && !o.batch_norm()) {
    biases = register_parameter("biases", torch::empty({o.out_channels()}));
    Initialize(biases, o.biases_init(), o.out_channels(), o.out_channels());
  } else {
    biases = torch::Tensor();
  }
}

namespace {

torch::Tensor ConvPaddedImpl(const torch::Tensor& x, const torch::Tensor& w,
                             const torch::Tensor& b, int64_t stride,
                             Padding padding, int64_t groups);

// {top, left, bottom, right} of a kh x kw window with TensorFlow's
// padding modes.
std::array<int64_t, 4> WindowPads(const torch::Tensor& x, int64_t kh,
                                  int64_t kw, int64_t stride, Padding padding) {
  if (padding == Padding::kFixed) {
    return {(kh - 1) / 2, (kw - 1) / 2, kh - 1 - (kh - 1) / 2,
            kw - 1 - (kw - 1) / 2};
  }
  if (padding == Padding::kSame) {
    const auto p = SamePadding(x.size(2), x.size(3), kh, kw, stride);
    return {p[0], p[2], p[1], p[3]};
  }
  return {0, 0, 0, 0};
}

// A convolution with TensorFlow's padding modes; w is [out, in / groups,
// kh, kw]. Recorded as `layer`'s node (+ `suffix`).
torch::Tensor ConvPadded(const torch::Tensor& x, const torch::Tensor& w,
                         const torch::Tensor& b, int64_t stride,
                         Padding padding, int64_t groups,
                         const torch::nn::Module* layer,
                         const std::string& suffix) {
  const torch::Tensor y = ConvPaddedImpl(x, w, b, stride, padding, groups);
  if (TracingOps()) {
    TracedOp op(OpKind::kConv, layer, suffix, {x}, y);
    op.kernel_h = w.size(2);
    op.kernel_w = w.size(3);
    op.stride = stride;
    op.pads = WindowPads(x, w.size(2), w.size(3), stride, padding);
    op.weights = w.detach();
    if (b.defined()) op.bias = b.detach();
    TraceOp(op);
  }
  return y;
}

// Whether t is dense channels-last (and not also dense NCHW: then NCHW).
bool DenseChannelsLast(const torch::Tensor& t) {
  return !t.is_contiguous() &&
         t.is_contiguous(torch::MemoryFormat::ChannelsLast);
}

// x [N, C, h, w] or w [O, C, h, w] as rows of C * h * w values in the order
// `channels_last` says (h, w, C) or (C, h, w): views where the tensor lies
// in that order already.
torch::Tensor Rows(const torch::Tensor& t, bool channels_last) {
  return (channels_last ? t.permute({0, 2, 3, 1}) : t).reshape({t.size(0), -1});
}

// The convolution when its kernel covers the whole unpadded input, so the
// output is 1 x 1 (the fully-connected layers of VGG, AlexNet and OverFeat
// written as convolutions, and 1 x 1 convolutions of 1 x 1 inputs): one
// matrix product. LibTorch 1.13's oneDNN path runs these with weight-sized
// reorder copies (VGG-16's fc6 holds 103M weights). Undefined where it does
// not apply.
torch::Tensor ConvAsMatmul(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& b, Padding padding,
                           int64_t groups) {
  const int64_t kh = w.size(2), kw = w.size(3);
  const bool whole = x.size(2) == kh && x.size(3) == kw &&
                     (padding == Padding::kValid || (kh == 1 && kw == 1));
  if (groups != 1 || !whole || !x.is_cpu() || x.size(1) != w.size(1)) {
    return {};
  }
  const bool channels_last = DenseChannelsLast(x);
  return torch::linear(Rows(x, channels_last), Rows(w, channels_last), b)
      .view({x.size(0), w.size(0), 1, 1});
}

// ---- 3 x 3 stride-1 convolutions through oneDNN's Winograd kernels. ----

// Whether they may run: SetDnnlWinograd, or SLIMTORCH_WINOGRAD=0 for a
// whole process (core/kernel_switches.h); max pooling through oneDNN
// likewise with SetDnnlPooling, SLIMTORCH_DNNL_POOLING=0.
// Where the Winograd kernels win, batch 8, 2 threads (docs/performance.md): outputs of
// 8 x 8 and more (448 -> 384 channels at 8 x 8: 14 against 20 ms forward +
// backward; 7 x 7 pads to 8 x 8 tiles and gains ~10%, which the reorders to
// their layout take back), inputs of 16 channels or more (3 RGB channels at
// 224 x 224: 22 against 8 ms forward).
constexpr int64_t kWinogradMinOutputPixels = 8 * 8;
constexpr int64_t kWinogradMinInputChannels = 16;

bool CpuAutocastEnabled() {
#if TORCH_VERSION_MAJOR >= 2
  return at::autocast::is_autocast_enabled(at::kCPU);
#else
  return at::autocast::is_cpu_enabled();
#endif
}

internal::WinogradShape WinogradShapeOf(const torch::Tensor& x,
                                        const torch::Tensor& w, bool bias,
                                        int64_t pad_h, int64_t pad_w) {
  internal::WinogradShape s;
  s.n = x.size(0);
  s.in_channels = x.size(1);
  s.height = x.size(2);
  s.width = x.size(3);
  s.out_channels = w.size(0);
  s.pad_h = pad_h;
  s.pad_w = pad_w;
  s.channels_last = DenseChannelsLast(x);
  s.weights_channels_last = DenseChannelsLast(w);
  s.bias = bias;
  return s;
}

torch::MemoryFormat ActivationFormat(const internal::WinogradShape& s) {
  return s.channels_last ? torch::MemoryFormat::ChannelsLast
                         : torch::MemoryFormat::Contiguous;
}

// conv2d(x, w, b, stride 1, padding {pad_h, pad_w}) by oneDNN's Winograd
// kernels, forward and backward; b may be empty (no bias).
class WinogradConvFunction
    : public torch::autograd::Function<WinogradConvFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b, int64_t pad_h,
                               int64_t pad_w) {
    const internal::WinogradShape s =
        WinogradShapeOf(x, w, b.numel() > 0, pad_h, pad_w);
    torch::Tensor y =
        torch::empty({s.n, s.out_channels, s.out_height(), s.out_width()},
                     x.options().memory_format(ActivationFormat(s)));
    internal::DnnlWinogradForward(s, x.data_ptr<float>(), w.data_ptr<float>(),
                                  FloatsOrNull(b), y.data_ptr<float>());
    ctx->save_for_backward({x, w});
    ctx->saved_data["pad_h"] = pad_h;
    ctx->saved_data["pad_w"] = pad_w;
    ctx->saved_data["bias"] = s.bias;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const internal::WinogradShape s = WinogradShapeOf(
        x, w, ctx->saved_data["bias"].toBool(),
        ctx->saved_data["pad_h"].toInt(), ctx->saved_data["pad_w"].toInt());
    const torch::Tensor g = grad_outputs[0].contiguous(ActivationFormat(s));
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = torch::empty_like(x, ActivationFormat(s));
    }
    if (ctx->needs_input_grad(1)) dw = torch::empty_like(w);
    if (s.bias && ctx->needs_input_grad(2)) {
      db = torch::empty({s.out_channels}, torch::kFloat32);
    }
    internal::DnnlWinogradBackward(
        s, x.data_ptr<float>(), w.data_ptr<float>(), g.data_ptr<float>(),
        dx.defined() ? dx.data_ptr<float>() : nullptr,
        dw.defined() ? dw.data_ptr<float>() : nullptr,
        db.defined() ? db.data_ptr<float>() : nullptr);
    return {dx, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

// The convolution by WinogradConvFunction where it applies (a CPU float32
// 3 x 3 stride-1 convolution, not under autocast, padding 0 or 1 on each
// side, dense inputs, the sizes above, a shape oneDNN's Winograd kernels
// take); else undefined.
torch::Tensor WinogradConv(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& b, int64_t stride,
                           const std::vector<int64_t>& pad, int64_t groups) {
  if (!KernelSwitchOn(KernelSwitch::kWinograd) ||
      !internal::DnnlWinogradBuilt() || groups != 1 ||
      stride != 1 || x.dim() != 4 || w.size(2) != 3 || w.size(3) != 3 ||
      !x.is_cpu() || x.scalar_type() != torch::kFloat32 ||
      w.scalar_type() != torch::kFloat32 ||
      (b.defined() && b.scalar_type() != torch::kFloat32) ||
      x.size(1) != w.size(1) || CpuAutocastEnabled()) {
    return {};
  }
  const int64_t oh = x.size(2) + 2 * pad[0] - 2;
  const int64_t ow = x.size(3) + 2 * pad[1] - 2;
  const auto dense = [](const torch::Tensor& t) {
    return t.is_contiguous() ||
           t.is_contiguous(torch::MemoryFormat::ChannelsLast);
  };
  if (oh * ow < kWinogradMinOutputPixels ||
      x.size(1) < kWinogradMinInputChannels || !dense(x) || !dense(w) ||
      (b.defined() && !b.is_contiguous())) {
    return {};
  }
  if (!internal::DnnlWinogradApplies(
          WinogradShapeOf(x, w, b.defined(), pad[0], pad[1]))) {
    return {};
  }
  return WinogradConvFunction::apply(x, w, b.defined() ? b : torch::empty({0}),
                                     pad[0], pad[1]);
}

torch::Tensor ConvPaddedImpl(const torch::Tensor& x, const torch::Tensor& w,
                             const torch::Tensor& b, int64_t stride,
                             Padding padding, int64_t groups) {
  if (torch::Tensor y = ConvAsMatmul(x, w, b, padding, groups); y.defined()) {
    return y;
  }
  const int64_t kh = w.size(2), kw = w.size(3);
  torch::Tensor in = x;
  std::vector<int64_t> pad = {0, 0};
  if (padding == Padding::kFixed) {
    const int64_t bh = (kh - 1) / 2, eh = kh - 1 - bh;
    const int64_t bw = (kw - 1) / 2, ew = kw - 1 - bw;
    if (bh == eh && bw == ew) {
      pad = {bh, bw};
    } else {
      in = torch::constant_pad_nd(x, {bw, ew, bh, eh}, 0.0);
    }
  } else if (padding == Padding::kSame) {
    auto p = SamePadding(x.size(2), x.size(3), kh, kw, stride);
    if (p[0] == p[1] && p[2] == p[3]) {
      pad = {p[0], p[2]};
    } else {
      in = torch::constant_pad_nd(x, {p[2], p[3], p[0], p[1]}, 0.0);
    }
  }
  if (groups == 1 && UseCudaKernels()) {
    // A first layer's few input channels (RGB) padded with zeros to 8 on a
    // GPU in 16 bits: cuDNN then runs its tensor-core kernels instead of a
    // generic one (CIFAR-10 tutorial's conv1: see docs/kernels.md).
    std::pair<torch::Tensor, torch::Tensor> padded =
        internal::PadInputChannelsCuda(in, w);
    if (padded.first.defined()) {
      return torch::conv2d(padded.first, padded.second, b, {stride, stride},
                           pad, /*dilation=*/{1, 1}, groups);
    }
  }
  if (torch::Tensor y = WinogradConv(in, w, b, stride, pad, groups);
      y.defined()) {
    return y;
  }
  return torch::conv2d(in, w, b, {stride, stride}, pad, /*dilation=*/{1, 1},
                       groups);
}

}  // namespace

torch::Tensor Conv2dImpl::forward(const torch::Tensor& x) {
  const auto& o = options;
  // On a GPU the bias joins the activation's kernel (BiasActCuda).
  const bool bias_on_gpu =
      !batch_norm && biases.defined() && x.is_cuda() && UseCudaKernels();
  torch::Tensor y =
      ConvPadded(x, weights, bias_on_gpu ? torch::Tensor() : biases, o.stride(),
                 o.padding(), o.depthwise() ? o.in_channels() : 1, this,
                 o.depthwise() ? "/depthwise" : "/Conv2D");
  if (TracingCosts()) {
    // Per output pixel, every weight once (a depthwise filter only sees its
    // own channel, and its [C, 1, kh, kw] weights say so).
    TraceCost(weights.numel() + Numel(biases),
              y.size(2) * y.size(3) * weights.numel());
  }
  if (batch_norm) return batch_norm->ForwardActivated(y, o.activation(), this);
  if (bias_on_gpu) {
    torch::Tensor z =
        internal::BiasActCuda(y, biases, ToBnActivation(o.activation()));
    if (z.defined()) return z;
    // (in place, as LibTorch's convolution adds its bias: the product is
    // not saved for its backward)
    y.add_(biases.to(y.scalar_type()).view({1, -1, 1, 1}));
  }
  return Activate(y, o.activation(), this);
}

SeparableConv2dImpl::SeparableConv2dImpl(const SeparableConv2dOptions& options_)
    : options(options_) {
  reset();
}

void SeparableConv2dImpl::reset() {
  const auto& o = options;
  SLIM_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && o.kernel() > 0 &&
                 o.depth_multiplier() > 0 && o.stride() > 0,
             "SeparableConv2d: channels, kernel, multiplier and stride must be "
             "positive");
  const int64_t mid = o.in_channels() * o.depth_multiplier();
  const int64_t area = o.kernel() * o.kernel();
  depthwise_weights = register_parameter(
      "depthwise_weights", torch::empty({mid, 1, o.kernel(), o.kernel()}));
  Initialize(depthwise_weights, o.weights_init(), area * o.in_channels(),
             area * mid);
  pointwise_weights = register_parameter(
      "pointwise_weights", torch::empty({o.out_channels(), mid, 1, 1}));
  Initialize(pointwise_weights, o.weights_init(), mid, o.out_channels());
  biases = register_parameter("biases", torch::zeros({o.out_channels()}));
}

torch::Tensor SeparableConv2dImpl::forward(const torch::Tensor& x) {
  const auto& o = options;
  torch::Tensor y =
      ConvPadded(x, depthwise_weights, torch::Tensor(), o.stride(), o.padding(),
                 o.in_channels(), this, "/depthwise");
  y = ConvPadded(y, pointwise_weights, biases, 1, Padding::kValid, 1, this,
                 "/pointwise");
  if (TracingCosts()) {
    TraceCost(
        depthwise_weights.numel() + pointwise_weights.numel() + Numel(biases),
        y.size(2) * y.size(3) *
            (depthwise_weights.numel() + pointwise_weights.numel()));
  }
  return Activate(y, o.activation(), this);
}

std::vector<std::pair<torch::Tensor, double>> SeparableConv2dImpl::L2Variables()
    const {
  if (options.weight_decay() == 0.0) return {};
  return {{depthwise_weights, options.weight_decay()},
          {pointwise_weights, options.weight_decay()}};
}

BatchNormImpl::BatchNormImpl(const BatchNormOptions& options_)
    : options(options_) {
  reset();
}

void BatchNormImpl::reset() {
  const int64_t c = options.channels();
  SLIM_CHECK(c > 0, "BatchNorm: channels must be positive, got ", c);
  // TensorFlow creates gamma before beta; the same order keeps the
  // trainable variables in TF-Slim's order.
  gamma = options.scale() ? register_parameter("gamma", torch::ones({c}))
                          : torch::Tensor();
  beta = options.center() ? register_parameter("beta", torch::zeros({c}))
                          : torch::Tensor();
  moving_mean = register_buffer("moving_mean", torch::zeros({c}));
  moving_variance = register_buffer("moving_variance", torch::ones({c}));
}

torch::Tensor BatchNormImpl::forward(const torch::Tensor& x) {
  return ForwardActivated(x, Activation::kNone, this);
}

torch::Tensor BatchNormImpl::ForwardActivated(const torch::Tensor& x,
                                              Activation activation,
                                              const torch::nn::Module* layer) {
  if (TracingCosts()) TraceCost(Numel(gamma) + Numel(beta), 0);
  torch::Tensor fused = Fused(x, activation);
  if (fused.defined()) return fused;
  return Activate(Unfused(x), activation, layer);
}

namespace {

// TensorFlow's fused batch norm (what slim uses on 4-D inputs) raises
// epsilon to 1.001e-5; both of our paths do the same.
double EffectiveEpsilon(const BatchNormOptions& options) {
  return std::max(options.epsilon(), 1.001e-5);
}
}  // namespace

void SetFusedBatchNorm(bool enabled) {
  SetKernelSwitch(KernelSwitch::kFusedKernels, enabled);
}

bool SetDnnlBatchNorm(bool enabled) {
  SetKernelSwitch(KernelSwitch::kDnnlBatchNorm, enabled);
  return internal::DnnlBatchNormBuilt();
}

bool SetDnnlWinograd(bool enabled) {
  SetKernelSwitch(KernelSwitch::kWinograd, enabled);
  return internal::DnnlWinogradBuilt();
}

bool SetDnnlPooling(bool enabled) {
  SetKernelSwitch(KernelSwitch::kDnnlPooling, enabled);
  return internal::DnnlPoolBuilt();
}

namespace {

// TensorFlow's fused batch norm's moving averages from the batch's mean and
// biased variance ([C] each, float or double): m * decay + v * (1 - decay),
// the variance Bessel-corrected; the buffers' versions bumped as an
// in-place op's would be.
template <typename T>
void UpdateMoving(torch::Tensor& moving_mean, torch::Tensor& moving_variance,
                  double decay, const T* mean, const T* variance,
                  const BnLayout& l) {
  float* m = moving_mean.data_ptr<float>();
  float* v = moving_variance.data_ptr<float>();
  const double count = static_cast<double>(l.n * l.spatial);
  const double bessel = count > 1 ? count / (count - 1) : 1.0;
  for (int64_t c = 0; c < l.channels; ++c) {
    m[c] = static_cast<float>(m[c] * decay +
                              static_cast<float>(mean[c]) * (1.0 - decay));
    v[c] = static_cast<float>(v[c] * decay +
                              static_cast<float>(variance[c] * bessel) *
                                  (1.0 - decay));
  }
  moving_mean.unsafeGetTensorImpl()->bump_version();
  moving_variance.unsafeGetTensorImpl()->bump_version();
}

}  // namespace

torch::Tensor BatchNormImpl::Fused(const torch::Tensor& x,
                                   Activation activation) {
  if (!fused_kernels || !FusedBatchNormOn() || TracingOps()) {
    return {};
  }
  if (x.is_cuda()) {
    return internal::BatchNormActCuda(
        x, gamma, beta, moving_mean, moving_variance, is_training(),
        options.decay(), EffectiveEpsilon(options), ToBnActivation(activation));
  }
  const c10::optional<BnLayout> l = DnnlBnLayout(x);
  if (!l || l->channels != options.channels()) return {};
  for (const torch::Tensor* v :
       {&gamma, &beta, &moving_mean, &moving_variance}) {
    if (v->defined() && (v->scalar_type() != torch::kFloat32 || !v->is_cpu() ||
                         !v->is_contiguous())) {
      return {};
    }
  }
  // (named in profiles: the fused kernels are no LibTorch op)
  RECORD_FUNCTION("slimtorch::batch_norm_act", std::vector<c10::IValue>());
  const double epsilon = EffectiveEpsilon(options);
  const int64_t C = l->channels;
  const float* g = gamma.defined() ? gamma.data_ptr<float>() : nullptr;
  const float* b = beta.defined() ? beta.data_ptr<float>() : nullptr;
  // Rows of `stats`: mean, invstd.
  torch::Tensor stats = torch::empty({2, C}, torch::kFloat64);
  double* mean = stats.data_ptr<double>();
  double* invstd = mean + C;
  float* moving_m = moving_mean.data_ptr<float>();
  float* moving_v = moving_variance.data_ptr<float>();
  if (is_training() && UseDnnlBatchNorm(ToBnActivation(activation), *l)) {
    RECORD_FUNCTION("slimtorch::batch_norm_dnnl", std::vector<c10::IValue>());
    const torch::Tensor none = torch::empty({0});
    torch::Tensor batch = torch::empty({2, C}, torch::kFloat32);
    torch::Tensor y = BatchNormDnnlFunction::apply(
        x, gamma.defined() ? gamma : none, beta.defined() ? beta : none, batch,
        epsilon, activation == Activation::kRelu);
    const float* bm = batch.data_ptr<float>();
    UpdateMoving(moving_mean, moving_variance, options.decay(), bm, bm + C, *l);
    return y;
  }
  if (l->bfloat16) return {};  // the own kernels take float32
  if (is_training()) {
    // (the buffers' versions are bumped as an in-place op's would be)
    internal::BnStatsCpu(x.data_ptr<float>(), *l, mean, invstd);
    // (invstd holds the variance until the loop below)
    UpdateMoving(moving_mean, moving_variance, options.decay(), mean, invstd,
                 *l);
    for (int64_t c = 0; c < C; ++c) {
      invstd[c] = 1.0 / std::sqrt(invstd[c] + epsilon);
    }
    // (custom autograd functions take no undefined tensors: an absent gamma
    // or beta goes in as an empty one)
    const torch::Tensor none = torch::empty({0});
    return BatchNormActFunction::apply(
        x, gamma.defined() ? gamma : none, beta.defined() ? beta : none, stats,
        KernelCoefficients(mean, invstd, g, b, C),
        static_cast<int64_t>(ToBnActivation(activation)));
  }
  if (torch::GradMode::is_enabled() &&
      (x.requires_grad() || (gamma.defined() && gamma.requires_grad()) ||
       (beta.defined() && beta.requires_grad()))) {
    return {};  // inference statistics, differentiated: LibTorch's path
  }
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = moving_m[c];
    invstd[c] = 1.0 / std::sqrt(static_cast<double>(moving_v[c]) + epsilon);
  }
  const torch::Tensor coef = KernelCoefficients(mean, invstd, g, b, C);
  const float* scale = coef.data_ptr<float>() + C;
  torch::Tensor y = torch::empty_like(x, FormatOf(*l));
  internal::BnApplyCpu(x.data_ptr<float>(), *l, scale, scale + C,
                       ToBnActivation(activation), y.data_ptr<float>());
  return y;
}

torch::Tensor BatchNormRelu(BatchNormImpl& bn, const torch::Tensor& x) {
  if (TracingOps()) return Relu(bn.forward(x));
  return bn.ForwardActivated(x, Activation::kRelu, &bn);
}

torch::Tensor BatchNormImpl::Unfused(const torch::Tensor& x) {
  const double epsilon = EffectiveEpsilon(options);
  torch::Tensor y =
      torch::batch_norm(x, gamma, beta, moving_mean, moving_variance,
                        is_training(), 1.0 - options.decay(), epsilon,
                        /*cudnn_enabled=*/true);
  if (TracingOps()) {
    TracedOp op(OpKind::kBatchNorm, this, "", {x}, y);
    op.batch_statistics = is_training();
    const int64_t c = options.channels();
    op.scale = gamma.defined() ? gamma.detach() : torch::ones({c});
    op.offset = beta.defined() ? beta.detach() : torch::zeros({c});
    op.mean = moving_mean.detach();
    op.variance = moving_variance.detach();
    op.epsilon = epsilon;
    TraceOp(op);
  }
  return y;
}

namespace {
// (weights, wd) and (biases, bd) where the coefficient is not 0.
std::vector<std::pair<torch::Tensor, double>> WeightsAndBiases(
    const torch::Tensor& weights, double weight_decay,
    const torch::Tensor& biases, double bias_decay) {
  std::vector<std::pair<torch::Tensor, double>> out;
  if (weight_decay != 0.0) out.emplace_back(weights, weight_decay);
  if (bias_decay != 0.0 && biases.defined())
    out.emplace_back(biases, bias_decay);
  return out;
}
}  // namespace

torch::Tensor Regularized::RegularizationLoss() const {
  torch::Tensor loss;
  for (const auto& [v, c] : L2Variables()) {
    torch::Tensor term = v.pow(2).sum().mul(0.5 * c);
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

std::vector<std::pair<torch::Tensor, double>> Conv2dImpl::L2Variables() const {
  return WeightsAndBiases(weights, options.weight_decay(), biases,
                          options.bias_decay());
}

FullyConnectedImpl::FullyConnectedImpl(const FullyConnectedOptions& options_)
    : options(options_) {
  reset();
}

void FullyConnectedImpl::reset() {
  const auto& o = options;
  SLIM_CHECK(o.in_features() > 0 && o.out_features() > 0,
             "FullyConnected: feature counts must be positive");
  weights = register_parameter(
      "weights", torch::empty({o.out_features(), o.in_features()}));
  Initialize(weights, o.weights_init(), o.in_features(), o.out_features());
  if (o.use_bias()) {
    biases = register_parameter("biases", torch::empty({o.out_features()}));
    Initialize(biases, o.biases_init(), o.out_features(), o.out_features());
  } else {
    biases = torch::Tensor();
  }
}

torch::Tensor FullyConnectedImpl::forward(const torch::Tensor& x) {
  if (TracingCosts()) {
    TraceCost(weights.numel() + Numel(biases), weights.numel());
  }
  if (biases.defined() && x.is_cuda() && UseCudaKernels()) {
    // The product, then bias + activation in one kernel (backward: one pass
    // for the input's gradient and the bias's).
    torch::Tensor y = torch::linear(x, weights);
    torch::Tensor z =
        internal::BiasActCuda(y, biases, ToBnActivation(options.activation()));
    if (z.defined()) return z;
    return Activate(y + biases.to(y.scalar_type()), options.activation(), this);
  }
  torch::Tensor y = torch::linear(x, weights, biases);
  if (TracingOps()) {
    TracedOp op(OpKind::kFullyConnected, this, "/MatMul", {x}, y);
    op.weights = weights.detach();
    if (biases.defined()) op.bias = biases.detach();
    TraceOp(op);
  }
  return Activate(y, options.activation(), this);
}

std::vector<std::pair<torch::Tensor, double>> FullyConnectedImpl::L2Variables()
    const {
  return WeightsAndBiases(weights, options.weight_decay(), biases,
                          options.bias_decay());
}

namespace {

// Every stride-th pixel of x, in x's memory order. Its gradient is made in
// x's memory order too (autograd's slice backward makes a contiguous
// tensor, which the gradient from x's other consumer, channels-last, then
// meets in a slow mixed-order sum: ~0.9 ms a call on ResNet-50's
// 256x256x56x56 in bf16 on an H100).
class StridedPickFunction
    : public torch::autograd::Function<StridedPickFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, int64_t stride) {
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["channels_last"] =
        x.suggest_memory_format() == torch::MemoryFormat::ChannelsLast;
    return Pick(x, stride).contiguous(x.suggest_memory_format());
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const auto format = ctx->saved_data["channels_last"].toBool()
                            ? torch::MemoryFormat::ChannelsLast
                            : torch::MemoryFormat::Contiguous;
    // (zeros() takes no memory format)
    torch::Tensor dx =
        torch::empty(ctx->saved_data["sizes"].toIntVector(),
                     grad_outputs[0].options().memory_format(format))
            .zero_();
    Pick(dx, stride).copy_(grad_outputs[0]);
    return {dx, torch::Tensor()};
  }

 private:
  static torch::Tensor Pick(const torch::Tensor& x, int64_t stride) {
    return x.slice(2, 0, x.size(2), stride).slice(3, 0, x.size(3), stride);
  }
};

torch::Tensor MaxPool2dImpl(const torch::Tensor& x, int64_t kernel,
                            int64_t stride, Padding padding);
torch::Tensor AvgPool2dImpl(const torch::Tensor& x, int64_t kernel,
                            int64_t stride, Padding padding);

torch::Tensor TracePool(OpKind kind, const torch::Tensor& x,
                        const torch::Tensor& y, int64_t kernel, int64_t stride,
                        Padding padding) {
  if (TracingOps()) {
    TracedOp op(kind, nullptr, "", {x}, y);
    op.kernel_h = op.kernel_w = kernel;
    op.stride = stride;
    op.pads = WindowPads(x, kernel, kernel, stride, padding);
    TraceOp(op);
  }
  return y;
}

}  // namespace

torch::Tensor MaxPool2d(const torch::Tensor& x, int64_t kernel, int64_t stride,
                        Padding padding) {
  return TracePool(OpKind::kMaxPool, x,
                   MaxPool2dImpl(x, kernel, stride, padding), kernel, stride,
                   padding);
}

torch::Tensor AvgPool2d(const torch::Tensor& x, int64_t kernel, int64_t stride,
                        Padding padding) {
  return TracePool(OpKind::kAvgPool, x,
                   AvgPool2dImpl(x, kernel, stride, padding), kernel, stride,
                   padding);
}

namespace {

// PyTorch's max_pool2d output size for `in` with padding `pad` on both
// sides, in ceil mode (a window may run past the end, not start there).
int64_t CeilPoolSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  int64_t out = (in + 2 * pad - kernel + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad) --out;
  return out;
}

// Max pooling by the fused CPU kernel (pool_kernel.h): x a CPU float32
// NCHW-contiguous [N, C, H, W]; first-order gradients.
class MaxPoolFunction : public torch::autograd::Function<MaxPoolFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, int64_t kernel,
                               int64_t stride, int64_t pad_top,
                               int64_t pad_left, int64_t out_h, int64_t out_w) {
    const internal::PoolShape s{x.size(0) * x.size(1),
                                x.size(2),
                                x.size(3),
                                out_h,
                                out_w,
                                kernel,
                                stride,
                                pad_top,
                                pad_left};
    const std::vector<int64_t> out_sizes = {x.size(0), x.size(1), out_h, out_w};
    torch::Tensor y = torch::empty(out_sizes, x.options());
    torch::Tensor argmax =
        torch::empty(out_sizes, x.options().dtype(torch::kInt32));
    internal::MaxPoolForwardCpu(x.data_ptr<float>(), y.data_ptr<float>(),
                                argmax.data_ptr<int32_t>(), s);
    ctx->save_for_backward({argmax});
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["window"] =
        std::vector<int64_t>{kernel, stride, pad_top, pad_left};
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor argmax = ctx->get_saved_variables()[0];
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const std::vector<int64_t> w = ctx->saved_data["window"].toIntVector();
    const torch::Tensor g = grad_outputs[0].contiguous();
    const internal::PoolShape s{sizes[0] * sizes[1],
                                sizes[2],
                                sizes[3],
                                argmax.size(2),
                                argmax.size(3),
                                w[0],
                                w[1],
                                w[2],
                                w[3]};
    torch::Tensor dx = torch::empty(sizes, g.options());
    internal::MaxPoolBackwardCpu(g.data_ptr<float>(),
                                 argmax.data_ptr<int32_t>(),
                                 dx.data_ptr<float>(), s);
    torch::autograd::variable_list out(7);
    out[0] = dx;
    return out;
  }
};

// Max pooling of channels-last CPU bfloat16 through oneDNN's pooling
// (pool_dnnl.h; switch dnnl_pooling): LibTorch's channels-last bfloat16
// kernels zero-fill dx and scatter into it through float (inception_v1
// under --precision=bf16: ~29 ms of a 290 ms step; 269 ms with oneDNN's).
internal::DnnlPoolShape DnnlPoolShapeOf(torch::IntArrayRef sizes, bool bf16,
                                        const std::vector<int64_t>& window) {
  internal::DnnlPoolShape s;
  s.n = sizes[0];
  s.channels = sizes[1];
  s.height = sizes[2];
  s.width = sizes[3];
  s.kernel = window[0];
  s.stride = window[1];
  s.pad_top = window[2];
  s.pad_bottom = window[3];
  s.pad_left = window[4];
  s.pad_right = window[5];
  s.out_height = window[6];
  s.out_width = window[7];
  s.bfloat16 = bf16;
  return s;
}

class DnnlMaxPoolFunction
    : public torch::autograd::Function<DnnlMaxPoolFunction> {
 public:
  // window: kernel, stride, pads top / bottom / left / right, out h / w.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               std::vector<int64_t> window) {
    const bool bf16 = x.scalar_type() == torch::kBFloat16;
    const internal::DnnlPoolShape s = DnnlPoolShapeOf(x.sizes(), bf16, window);
    torch::Tensor y = torch::empty(
        {s.n, s.channels, s.out_height, s.out_width},
        x.options().memory_format(torch::MemoryFormat::ChannelsLast));
    torch::Tensor workspace = torch::empty(
        {static_cast<int64_t>(internal::DnnlMaxPoolWorkspaceBytes(s))},
        x.options().dtype(torch::kUInt8));
    internal::DnnlMaxPoolForward(s, x.data_ptr(), y.data_ptr(),
                                 workspace.data_ptr());
    ctx->save_for_backward({workspace});
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["window"] = window;
    ctx->saved_data["bf16"] = bf16;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor workspace = ctx->get_saved_variables()[0];
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    const internal::DnnlPoolShape s =
        DnnlPoolShapeOf(sizes, bf16, ctx->saved_data["window"].toIntVector());
    const torch::Tensor g = grad_outputs[0]
                                .to(bf16 ? torch::kBFloat16 : torch::kFloat32)
                                .contiguous(torch::MemoryFormat::ChannelsLast);
    torch::Tensor dx = torch::empty(
        sizes, g.options().memory_format(torch::MemoryFormat::ChannelsLast));
    internal::DnnlMaxPoolBackward(s, g.data_ptr(), workspace.data_ptr(),
                                  dx.data_ptr());
    return {dx, torch::Tensor()};
  }
};

// Max pooling of x through oneDNN where it applies (a channels-last CPU
// bfloat16 x, oneDNN accepting the shape); undefined otherwise. pads: top,
// bottom, left, right. Float32 keeps LibTorch's kernel (as fast in a float32
// inception_v1 step) and with it NaN propagation: oneDNN's max ignores a NaN
// in a window, and a window of NaNs gives -inf (still not finite), as
// TensorFlow's oneDNN pooling does.
torch::Tensor DnnlMaxPool(const torch::Tensor& x, int64_t kernel,
                          int64_t stride, const std::array<int64_t, 4>& pads,
                          int64_t out_h, int64_t out_w) {
  if (!KernelSwitchOn(KernelSwitch::kDnnlPooling) ||
      !internal::DnnlPoolBuilt() || x.dim() != 4 ||
      !x.is_cpu() || x.numel() == 0 || x.scalar_type() != torch::kBFloat16 ||
      !x.is_contiguous(torch::MemoryFormat::ChannelsLast) ||
      x.is_contiguous() || TracingOps()) {
    return {};
  }
  const std::vector<int64_t> window = {kernel,  stride,  pads[0], pads[1],
                                       pads[2], pads[3], out_h,   out_w};
  const internal::DnnlPoolShape s =
      DnnlPoolShapeOf(x.sizes(), x.scalar_type() == torch::kBFloat16, window);
  if (!internal::DnnlMaxPoolApplies(s)) return {};
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) {
    torch::Tensor y = torch::empty(
        {s.n, s.channels, out_h, out_w},
        x.options().memory_format(torch::MemoryFormat::ChannelsLast));
    internal::DnnlMaxPoolForward(s, x.data_ptr(), y.data_ptr(), nullptr);
    return y;
  }
  return DnnlMaxPoolFunction::apply(x, window);
}

// Whether the fused CPU max pool takes x (NCHW float32 on the CPU; in
// channels-last LibTorch's kernel, vectorised over the channels, measured
// faster in an inception_v1 step).
bool FusedMaxPoolApplies(const torch::Tensor& x) {
  return x.dim() == 4 && x.is_cpu() && x.scalar_type() == torch::kFloat32 &&
         x.is_contiguous() && x.size(2) * x.size(3) < (int64_t{1} << 31) &&
         x.numel() > 0;
}

// Where a max pool's windows lie on a 4-D x: the pads (top, bottom, left,
// right; TensorFlow's for SAME, none for VALID) and the output size; nothing
// for a VALID window larger than x.
struct PoolPlacement {
  std::array<int64_t, 4> pads;
  int64_t out_h, out_w;
};

c10::optional<PoolPlacement> PlacePool(const torch::Tensor& x, int64_t kernel,
                                       int64_t stride, Padding padding) {
  if (padding == Padding::kSame) {
    const auto p = SamePadding(x.size(2), x.size(3), kernel, kernel, stride);
    return PoolPlacement{{p[0], p[1], p[2], p[3]},
                         (x.size(2) + stride - 1) / stride,
                         (x.size(3) + stride - 1) / stride};
  }
  if (x.size(2) < kernel || x.size(3) < kernel) return c10::nullopt;
  return PoolPlacement{{0, 0, 0, 0},
                       (x.size(2) - kernel) / stride + 1,
                       (x.size(3) - kernel) / stride + 1};
}

torch::Tensor MaxPool2dImpl(const torch::Tensor& x, int64_t kernel,
                            int64_t stride, Padding padding) {
  if (kernel > 1 && x.dim() == 4) {
    const c10::optional<PoolPlacement> at =
        PlacePool(x, kernel, stride, padding);
    if (at && x.is_cuda() && UseCudaKernels()) {
      // The CUDA kernel: one pass forward, one gather backward (LibTorch's
      // NCHW backward scatters with atomics after zeroing, ~38 us a call on
      // the CIFAR-10 tutorial's 128x64x24x24).
      torch::Tensor y = internal::MaxPoolCuda(
          x, kernel, stride, at->pads[0], at->pads[2], at->out_h, at->out_w);
      if (y.defined()) return y;
    }
    if (at) {
      torch::Tensor y =
          DnnlMaxPool(x, kernel, stride, at->pads, at->out_h, at->out_w);
      if (y.defined()) return y;
    }
    if (FusedMaxPoolApplies(x)) {
      // LibTorch's CPU kernel scans NCHW windows one output at a time with a
      // branch per element (~30 ms a call on the CIFAR-10 tutorial's
      // 128x64x24x24, a fifth of its step, 1 thread); this one takes rows as
      // vectors, without branches on the data (~5.5 ms).
      SLIM_CHECK(at.has_value(), "MaxPool2d: a VALID ", kernel, "x", kernel,
                 " window on ", x.sizes());
      return MaxPoolFunction::apply(x, kernel, stride, at->pads[0], at->pads[2],
                                    at->out_h, at->out_w);
    }
  }
  if (kernel == 1) {
    // A 1x1 window (resnet_utils.subsample) picks every stride-th pixel:
    // 'SAME' and 'VALID' alike give ceil(size / stride) of them, and the
    // gradient goes back to the pixel picked. A strided copy in the input's
    // memory order; LibTorch's max_pool2d scans windows for it (NCHW: ~6 ms
    // a call on ResNet-50's 8x256x56x56).
    return StridedPickFunction::apply(x, stride);
  }
  if (padding == Padding::kSame) {
    auto p = SamePadding(x.size(2), x.size(3), kernel, kernel, stride);
    // TensorFlow's SAME max pool ignores the padded positions, as PyTorch's
    // own padding does; the extra row / column TF adds at the end is ceil
    // mode's window past the end. So no padded copy when PyTorch's windows
    // are TF's: same begin padding on both axes, at most one more at the
    // end, and the same output size.
    const int64_t out_h = (x.size(2) + stride - 1) / stride;
    const int64_t out_w = (x.size(3) + stride - 1) / stride;
    if (p[0] == p[2] && p[1] - p[0] <= 1 && p[3] - p[2] <= 1 &&
        2 * p[0] <= kernel &&
        CeilPoolSize(x.size(2), kernel, stride, p[0]) == out_h &&
        CeilPoolSize(x.size(3), kernel, stride, p[2]) == out_w) {
      return torch::max_pool2d(x, {kernel, kernel}, {stride, stride},
                               {p[0], p[2]}, /*dilation=*/{1, 1},
                               /*ceil_mode=*/p[1] > p[0] || p[3] > p[2]);
    }
    if (p[0] + p[1] + p[2] + p[3] > 0) {
      torch::Tensor padded =
          torch::constant_pad_nd(x, {p[2], p[3], p[0], p[1]},
                                 -std::numeric_limits<double>::infinity());
      return torch::max_pool2d(padded, {kernel, kernel}, {stride, stride});
    }
  }
  return torch::max_pool2d(x, {kernel, kernel}, {stride, stride});
}

torch::Tensor AvgPool2dImpl(const torch::Tensor& x, int64_t kernel,
                            int64_t stride, Padding padding) {
  if (padding == Padding::kSame) {
    auto p = SamePadding(x.size(2), x.size(3), kernel, kernel, stride);
    if (p[0] == p[1] && p[2] == p[3]) {
      return torch::avg_pool2d(x, {kernel, kernel}, {stride, stride},
                               {p[0], p[2]}, /*ceil_mode=*/false,
                               /*count_include_pad=*/false);
    }
    // Uneven padding: window sums over the zero-padded image, divided by
    // the number of image pixels in each window.
    const std::vector<int64_t> pad = {p[2], p[3], p[0], p[1]};
    const double area = static_cast<double>(kernel * kernel);
    torch::Tensor sums = torch::avg_pool2d(torch::constant_pad_nd(x, pad, 0.0),
                                           {kernel, kernel}, {stride, stride}) *
                         area;
    torch::Tensor ones = torch::ones({1, 1, x.size(2), x.size(3)}, x.options());
    torch::Tensor counts =
        torch::avg_pool2d(torch::constant_pad_nd(ones, pad, 0.0),
                          {kernel, kernel}, {stride, stride}) *
        area;
    return sums / counts;
  }
  return torch::avg_pool2d(x, {kernel, kernel}, {stride, stride});
}

}  // namespace

torch::Tensor FlattenNhwc(const torch::Tensor& x) {
  torch::Tensor y = x.permute({0, 2, 3, 1}).reshape({x.size(0), -1});
  if (TracingOps()) TraceOp({OpKind::kFlatten, nullptr, "", {x}, y});
  return y;
}

namespace {

// alpha times the band matrix B[i][j] = (|i - j| <= r) of C channels, in
// x's dtype on x's device, made once per thread and kept.
torch::Tensor LrnBand(const torch::Tensor& x, int64_t r, double alpha) {
  using Key = std::tuple<int64_t, int64_t, double, int, int, int>;
  thread_local std::map<Key, torch::Tensor> bands;
  const int64_t c = x.size(1);
  const Key key{c,
                r,
                alpha,
                static_cast<int>(x.scalar_type()),
                static_cast<int>(x.device().type()),
                x.device().index()};
  auto it = bands.find(key);
  if (it != bands.end()) return it->second;
  torch::NoGradGuard no_grad;
  const torch::Tensor i = torch::arange(c, torch::kInt64);
  torch::Tensor band =
      ((i.unsqueeze(0) - i.unsqueeze(1)).abs() <= r).to(torch::kFloat64) *
      alpha;
  band = band.to(x.device(), x.scalar_type());
  bands.emplace(key, band);
  return band;
}

}  // namespace

torch::Tensor LocalResponseNormComposite(const torch::Tensor& x,
                                         int64_t depth_radius, double bias,
                                         double alpha, double beta) {
  CheckLrnArgs(x, depth_radius, bias, alpha, beta);
  // alpha * sqr_sum as one matrix product of the squares with the band
  // matrix over channels (a GEMM: a handful of kernels forward and
  // backward on a GPU, where a windowed pooling over channels is slow), in
  // either memory order without a copy.
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const torch::Tensor band = LrnBand(x, depth_radius, alpha);
  const torch::Tensor sq = x.square();
  torch::Tensor sum;
  if (!x.is_contiguous() &&
      x.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    // [N, HW, C] x B (symmetric), viewed back as channels-last NCHW.
    sum = torch::matmul(sq.permute({0, 2, 3, 1}).reshape({n, h * w, c}), band)
              .view({n, h, w, c})
              .permute({0, 3, 1, 2});
  } else {
    sum = torch::matmul(band, sq.reshape({n, c, h * w})).view({n, c, h, w});
  }
  // bias + alpha * sum in float32 when the product is in a 16-bit type
  // (autocast): bias 1 and a sum near 1e-3 would round to 1 in bfloat16.
  if (sum.scalar_type() == torch::kBFloat16 ||
      sum.scalar_type() == torch::kHalf) {
    sum = sum.to(torch::kFloat32);
  }
  return x * sum.add(bias).pow(-beta);
}

torch::Tensor LocalResponseNormFused(const torch::Tensor& x,
                                     int64_t depth_radius, double bias,
                                     double alpha, double beta) {
  CheckLrnArgs(x, depth_radius, bias, alpha, beta);
  SLIM_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat,
             "LocalResponseNormFused needs a CPU float32 tensor, got ",
             x.device(), " ", x.scalar_type());
  return LrnFunction::apply(x.contiguous(), depth_radius, bias, alpha, beta);
}

namespace {

// A GPU's LRN: the CUDA kernels where they apply, else the composite.
torch::Tensor LocalResponseNormOnDevice(const torch::Tensor& x,
                                        int64_t depth_radius, double bias,
                                        double alpha, double beta) {
  if (x.is_cuda() && UseCudaKernels()) {
    CheckLrnArgs(x, depth_radius, bias, alpha, beta);
    torch::Tensor y =
        internal::LocalResponseNormCuda(x, depth_radius, bias, alpha, beta);
    if (y.defined()) return y;
  }
  return LocalResponseNormComposite(x, depth_radius, bias, alpha, beta);
}

}  // namespace

torch::Tensor LocalResponseNorm(const torch::Tensor& x, int64_t depth_radius,
                                double bias, double alpha, double beta) {
  const torch::Tensor y =
      // (channels-last input too: the fused kernel on an NCHW copy beats
      // the composite)
      x.device().is_cpu() && x.scalar_type() == torch::kFloat
          ? LocalResponseNormFused(x, depth_radius, bias, alpha, beta)
          : LocalResponseNormOnDevice(x, depth_radius, bias, alpha, beta);
  if (TracingOps()) {
    TracedOp op(OpKind::kLrn, nullptr, "", {x}, y);
    op.depth_radius = depth_radius;
    op.lrn_bias = bias;
    op.lrn_alpha = alpha;
    op.lrn_beta = beta;
    TraceOp(op);
  }
  return y;
}

torch::Tensor Concat(const std::vector<torch::Tensor>& xs) {
  torch::Tensor y = torch::cat(xs, 1);
  if (TracingOps()) TraceOp({OpKind::kConcat, nullptr, "", xs, y});
  return y;
}

torch::Tensor Add(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor y = a + b;
  if (TracingOps()) TraceOp({OpKind::kAdd, nullptr, "", {a, b}, y});
  return y;
}

namespace {

// max(a + b, 0) for CPU float32 tensors of one shape and dense memory
// order; the gradient, g where the output is positive, goes to both.
class AddReluCpuFunction
    : public torch::autograd::Function<AddReluCpuFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& a, const torch::Tensor& b) {
    torch::Tensor y = torch::empty_like(a);
    internal::AddReluCpu(a.data_ptr<float>(), b.data_ptr<float>(), a.numel(),
                         y.data_ptr<float>());
    ctx->save_for_backward({y});
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor y = ctx->get_saved_variables()[0];
    torch::Tensor g = torch::threshold_backward(grad_outputs[0], y, 0);
    return {g, g};
  }
};

// Whether a and b are CPU float32 tensors of one shape laid out alike.
bool AddReluCpuApplies(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined() || !b.defined() || !a.is_cpu() || !b.is_cpu() ||
      a.scalar_type() != torch::kFloat32 ||
      b.scalar_type() != torch::kFloat32 || a.sizes() != b.sizes() ||
      a.numel() == 0) {
    return false;
  }
  if (a.is_contiguous() && b.is_contiguous()) return true;
  return a.dim() == 4 && a.is_contiguous(torch::MemoryFormat::ChannelsLast) &&
         b.is_contiguous(torch::MemoryFormat::ChannelsLast);
}

}  // namespace

torch::Tensor AddRelu(const torch::Tensor& a, const torch::Tensor& b) {
  if (UseCudaKernels()) {
    torch::Tensor y = internal::AddReluCuda(a, b);
    if (y.defined()) return y;
    if (AddReluCpuApplies(a, b)) return AddReluCpuFunction::apply(a, b);
  }
  return ReluInPlace(Add(a, b));
}

torch::Tensor Scale(const torch::Tensor& x, double factor) {
  torch::Tensor y = x * factor;
  if (TracingOps()) {
    TracedOp op(OpKind::kScale, nullptr, "", {x}, y);
    op.factor = factor;
    TraceOp(op);
  }
  return y;
}

torch::Tensor Relu(const torch::Tensor& x) {
  torch::Tensor y = torch::relu(x);
  if (TracingOps()) TraceOp({OpKind::kRelu, nullptr, "", {x}, y});
  return y;
}

torch::Tensor ScaleInPlace(torch::Tensor x, double factor) {
  if (TracingOps()) return Scale(x, factor);
  return x.mul_(factor);
}

torch::Tensor ReluInPlace(torch::Tensor x) {
  if (TracingOps()) return Relu(x);
  return x.relu_();
}

torch::Tensor SpatialMean(const torch::Tensor& x) {
  torch::Tensor y = x.mean({2, 3}, /*keepdim=*/true);
  if (TracingOps()) TraceOp({OpKind::kMean, nullptr, "", {x}, y});
  return y;
}

torch::Tensor SqueezeHw(const torch::Tensor& x) {
  SLIM_CHECK(x.dim() == 4 && x.size(2) == 1 && x.size(3) == 1,
             "SqueezeHw needs [N, C, 1, 1], got ", x.sizes());
  torch::Tensor y = x.reshape({x.size(0), x.size(1)});
  if (TracingOps()) TraceOp({OpKind::kSqueeze, nullptr, "", {x}, y});
  return y;
}

}  // namespace nets
}  // namespace slimtorch
