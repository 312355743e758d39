#include "slimtorch/nets/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/cpu/batch_norm_kernel.h"
#include "kernels/cuda/cuda_fused.h"
#include "kernels/dnnl/batch_norm_dnnl.h"
#include "layer_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/layer_trace.h"
#include "sync_batch_norm.h"

namespace slimtorch {
namespace nets {
namespace {

// ---- Batch normalization with its activation: the fused CPU path. ----

using internal::BnActivation;
using internal::BnLayout;

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

// TensorFlow's fused batch norm (what slim uses on 4-D inputs) raises
// epsilon to 1.001e-5; both of our paths do the same.
double EffectiveEpsilon(const BatchNormOptions& options) {
  return std::max(options.epsilon(), 1.001e-5);
}

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

// The fused kernels' layout of x for `bn`, or nothing where they do not
// apply (see DnnlBnLayout; the variables float32, contiguous, on the CPU).
c10::optional<BnLayout> FusedLayoutFor(const BatchNormImpl& bn,
                                       const torch::Tensor& x) {
  const c10::optional<BnLayout> l = DnnlBnLayout(x);
  if (!l || l->channels != bn.options.channels()) return c10::nullopt;
  for (const torch::Tensor* v :
       {&bn.gamma, &bn.beta, &bn.moving_mean, &bn.moving_variance}) {
    if (v->defined() && (v->scalar_type() != torch::kFloat32 || !v->is_cpu() ||
                         !v->is_contiguous())) {
      return c10::nullopt;
    }
  }
  return l;
}

// (custom autograd functions take no undefined tensors: an absent gamma or
// beta goes in as an empty one)
torch::Tensor OrEmpty(const torch::Tensor& t) {
  return t.defined() ? t : torch::empty({0});
}

// A training step through oneDNN's kernels (UseDnnlBatchNorm), the moving
// statistics updated from the batch's.
torch::Tensor TrainThroughDnnl(BatchNormImpl& bn, const torch::Tensor& x,
                               const BnLayout& l, Activation activation,
                               double epsilon) {
  RECORD_FUNCTION("slimtorch::batch_norm_dnnl", std::vector<c10::IValue>());
  const int64_t C = l.channels;
  torch::Tensor batch = torch::empty({2, C}, torch::kFloat32);
  torch::Tensor y = BatchNormDnnlFunction::apply(
      x, OrEmpty(bn.gamma), OrEmpty(bn.beta), batch, epsilon,
      activation == Activation::kRelu);
  const float* bm = batch.data_ptr<float>();
  UpdateMoving(bn.moving_mean, bn.moving_variance, bn.options.decay(), bm,
               bm + C, l);
  return y;
}

// A training step through the own kernels (float32): the batch's
// statistics, the moving ones updated from them, then BatchNormActFunction.
torch::Tensor TrainThroughOwnKernels(BatchNormImpl& bn, const torch::Tensor& x,
                                     const BnLayout& l, Activation activation,
                                     double epsilon) {
  const int64_t C = l.channels;
  // Rows of `stats`: mean, invstd.
  torch::Tensor stats = torch::empty({2, C}, torch::kFloat64);
  double* mean = stats.data_ptr<double>();
  double* invstd = mean + C;
  // (the buffers' versions are bumped as an in-place op's would be)
  internal::BnStatsCpu(x.data_ptr<float>(), l, mean, invstd);
  // (invstd holds the variance until the loop below)
  UpdateMoving(bn.moving_mean, bn.moving_variance, bn.options.decay(), mean,
               invstd, l);
  for (int64_t c = 0; c < C; ++c) {
    invstd[c] = 1.0 / std::sqrt(invstd[c] + epsilon);
  }
  return BatchNormActFunction::apply(
      x, OrEmpty(bn.gamma), OrEmpty(bn.beta), stats,
      KernelCoefficients(mean, invstd, FloatsOrNull(bn.gamma),
                         FloatsOrNull(bn.beta), C),
      static_cast<int64_t>(ToBnActivation(activation)));
}

// Inference with the moving statistics through the own kernels (float32),
// not differentiated.
torch::Tensor InferThroughOwnKernels(const BatchNormImpl& bn,
                                     const torch::Tensor& x, const BnLayout& l,
                                     Activation activation, double epsilon) {
  const int64_t C = l.channels;
  std::vector<double> stats(2 * C);
  double* mean = stats.data();
  double* invstd = mean + C;
  const float* moving_m = bn.moving_mean.data_ptr<float>();
  const float* moving_v = bn.moving_variance.data_ptr<float>();
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = moving_m[c];
    invstd[c] = 1.0 / std::sqrt(static_cast<double>(moving_v[c]) + epsilon);
  }
  const torch::Tensor coef = KernelCoefficients(
      mean, invstd, FloatsOrNull(bn.gamma), FloatsOrNull(bn.beta), C);
  const float* scale = coef.data_ptr<float>() + C;
  torch::Tensor y = torch::empty_like(x, FormatOf(l));
  internal::BnApplyCpu(x.data_ptr<float>(), l, scale, scale + C,
                       ToBnActivation(activation), y.data_ptr<float>());
  return y;
}

// Whether the batch norm's inference would be differentiated (then
// LibTorch's path runs).
bool NeedsGradient(const BatchNormImpl& bn, const torch::Tensor& x) {
  return torch::GradMode::is_enabled() &&
         (x.requires_grad() ||
          (bn.gamma.defined() && bn.gamma.requires_grad()) ||
          (bn.beta.defined() && bn.beta.requires_grad()));
}

}  // namespace

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
  if (cross_replica && is_training() && !TracingOps()) {
    return Activate(CrossReplica(x), activation, layer);
  }
  torch::Tensor fused = Fused(x, activation);
  if (fused.defined()) return fused;
  return Activate(Unfused(x), activation, layer);
}

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
  const c10::optional<BnLayout> l = FusedLayoutFor(*this, x);
  if (!l) return {};
  // (named in profiles: the fused kernels are no LibTorch op)
  RECORD_FUNCTION("slimtorch::batch_norm_act", std::vector<c10::IValue>());
  const double epsilon = EffectiveEpsilon(options);
  if (is_training() && UseDnnlBatchNorm(ToBnActivation(activation), *l)) {
    return TrainThroughDnnl(*this, x, *l, activation, epsilon);
  }
  if (l->bfloat16) return {};  // the own kernels take float32
  if (is_training()) {
    return TrainThroughOwnKernels(*this, x, *l, activation, epsilon);
  }
  if (NeedsGradient(*this, x)) {
    return {};  // inference statistics, differentiated: LibTorch's path
  }
  return InferThroughOwnKernels(*this, x, *l, activation, epsilon);
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

torch::Tensor BatchNormImpl::CrossReplica(const torch::Tensor& x) {
  const internal::CrossReplicaStatistics s = internal::CrossReplicaNormalize(
      x, EffectiveEpsilon(options), *cross_replica);
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = options.channels();
  torch::Tensor y = s.normalized;
  if (gamma.defined()) y = y * gamma.view(shape);
  if (beta.defined()) y = y + beta.view(shape);
  // (the activation runs in place; the normalized values are saved)
  if (!gamma.defined() && !beta.defined()) y = y.clone();
  {
    torch::NoGradGuard no_grad;
    const double decay = options.decay();
    // Bessel-corrected over the global batch, as the local paths do.
    const torch::Tensor bessel = torch::where(
        s.count > 1, s.count / (s.count - 1), torch::ones_like(s.count));
    moving_mean.mul_(decay).add_(s.mean.to(moving_mean.dtype()), 1 - decay);
    moving_variance.mul_(decay).add_(
        (s.variance * bessel).to(moving_variance.dtype()), 1 - decay);
  }
  return y;
}

int SetCrossReplicaBatchNorm(torch::nn::Module& net,
                             const std::shared_ptr<CrossReplicaSum>& sum) {
  int layers = 0;
  for (const auto& m : net.modules(/*include_self=*/true)) {
    if (auto* bn = dynamic_cast<BatchNormImpl*>(m.get())) {
      bn->cross_replica = sum;
      ++layers;
    }
  }
  return layers;
}

FoldedBatchNorm FoldBatchNorm(
    BatchNormImpl& bn, bool batch_statistics,
    const std::function<torch::Tensor()>& float_output) {
  const double epsilon = EffectiveEpsilon(bn.options);
  const int64_t c = bn.options.channels();
  const torch::Tensor gamma =
      bn.gamma.defined() ? bn.gamma : torch::ones({c}, bn.moving_mean.options());
  const torch::Tensor beta = bn.beta.defined()
                                 ? bn.beta
                                 : torch::zeros({c}, bn.moving_mean.options());
  FoldedBatchNorm f;
  const torch::Tensor inv_moving =
      torch::rsqrt(bn.moving_variance.detach() + epsilon);
  if (!batch_statistics) {
    f.multiplier = gamma * inv_moving;
    f.bias = beta - bn.moving_mean.detach() * f.multiplier;
    return f;
  }
  // The batch's statistics carry gradients, as TensorFlow's batch norm op
  // passes them (its gradient for the mean and variance outputs).
  const torch::Tensor y = float_output();
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < y.dim(); ++d) dims.push_back(d);
  torch::Tensor mean, variance;
  std::tie(variance, mean) =
      torch::var_mean(y.to(torch::kFloat32), dims, /*unbiased=*/false);
  {
    torch::NoGradGuard no_grad;
    const double count = static_cast<double>(y.numel() / c);
    const double bessel = count > 1 ? count / (count - 1) : 1.0;
    const double decay = bn.options.decay();
    bn.moving_mean.mul_(decay).add_(mean.detach() * (1.0 - decay));
    bn.moving_variance.mul_(decay).add_(variance.detach() *
                                        (bessel * (1.0 - decay)));
  }
  const torch::Tensor inv_batch = torch::rsqrt(variance + epsilon);
  // (in TensorFlow's order: the batch's multiplier times the correction)
  const torch::Tensor correction_scale = inv_moving / inv_batch;
  f.multiplier = gamma * inv_batch * correction_scale;
  f.correction = torch::reciprocal(correction_scale);
  f.bias = beta - mean * (gamma * inv_batch);
  return f;
}

void SetFusedBatchNorm(bool enabled) {
  SetKernelSwitch(KernelSwitch::kFusedKernels, enabled);
}

bool SetDnnlBatchNorm(bool enabled) {
  SetKernelSwitch(KernelSwitch::kDnnlBatchNorm, enabled);
  return internal::DnnlBatchNormBuilt();
}

}  // namespace nets
}  // namespace slimtorch
