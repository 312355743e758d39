#include "slimtorch/nets/lrn.h"

#include <map>
#include <tuple>

#include "kernels/cpu/lrn_kernel.h"
#include "kernels/cuda/cuda_fused.h"
#include "layer_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {
namespace {

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

}  // namespace nets
}  // namespace slimtorch
