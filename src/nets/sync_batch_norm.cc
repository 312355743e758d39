#include "sync_batch_norm.h"

#include <cstdint>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Every dimension but the channels'.
std::vector<int64_t> ReduceDims(const torch::Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d != 1) dims.push_back(d);
  }
  return dims;
}

// [C] to x's broadcast shape [1, C, 1, ...].
torch::Tensor PerChannel(const torch::Tensor& v, const torch::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = v.size(0);
  return v.view(shape);
}

// The sum object travels through the autograd context as its address: it
// is owned by the layer, which outlives the step's backward.
class CrossReplicaNormalizeFunction
    : public torch::autograd::Function<CrossReplicaNormalizeFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               double epsilon, int64_t sum_address) {
    auto* sum = reinterpret_cast<CrossReplicaSum*>(sum_address);
    const std::vector<int64_t> dims = ReduceDims(x);
    const int64_t c = x.size(1);
    const torch::Tensor xf = x.to(torch::kFloat32);
    // Two passes, as LibTorch's batch norm: the global mean, then the sum
    // of squared deviations from it (no cancellation where the variance is
    // small against the mean).
    const double local_count = static_cast<double>(x.numel() / c);
    std::vector<torch::Tensor> sums = {torch::cat(
        {xf.sum(dims), torch::full({1}, local_count, xf.options())})};
    sum->Sum(sums);
    const torch::Tensor count = sums[0].narrow(0, c, 1);
    const torch::Tensor mean = sums[0].narrow(0, 0, c) / count;
    const torch::Tensor centred = xf - PerChannel(mean, x);
    std::vector<torch::Tensor> squares = {centred.square().sum(dims)};
    sum->Sum(squares);
    const torch::Tensor variance = squares[0] / count;
    const torch::Tensor invstd = torch::rsqrt(variance + epsilon);
    const torch::Tensor normalized = centred * PerChannel(invstd, x);
    ctx->save_for_backward({normalized, invstd, count});
    ctx->saved_data["sum"] = sum_address;
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->mark_non_differentiable({mean, variance, count});
    return {normalized.to(x.scalar_type()), mean, variance, count};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* sum =
        reinterpret_cast<CrossReplicaSum*>(ctx->saved_data["sum"].toInt());
    const auto dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& normalized = saved[0];
    const torch::Tensor& invstd = saved[1];
    const torch::Tensor& count = saved[2];
    // Every replica takes part in the sums, whatever its gradient.
    const torch::Tensor dy = grads[0].defined() ? grads[0].to(torch::kFloat32)
                                                : torch::zeros_like(normalized);
    const std::vector<int64_t> dims = ReduceDims(normalized);
    const int64_t c = normalized.size(1);
    std::vector<torch::Tensor> sums = {
        torch::cat({dy.sum(dims), (dy * normalized).sum(dims)})};
    sum->Sum(sums);
    const torch::Tensor mean_dy = sums[0].narrow(0, 0, c) / count;
    const torch::Tensor mean_dy_xhat = sums[0].narrow(0, c, c) / count;
    const torch::Tensor dx = (dy - PerChannel(mean_dy, dy) -
                              normalized * PerChannel(mean_dy_xhat, dy)) *
                             PerChannel(invstd, dy);
    return {dx.to(dtype), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

CrossReplicaStatistics CrossReplicaNormalize(const torch::Tensor& x,
                                             double epsilon,
                                             CrossReplicaSum& sum) {
  SLIM_CHECK(x.dim() >= 2, "cross-replica batch norm: input ", x.sizes(),
             " has no channel dimension");
  const variable_list out = CrossReplicaNormalizeFunction::apply(
      x, epsilon, reinterpret_cast<int64_t>(&sum));
  return {out[0], out[1], out[2], out[3]};
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
