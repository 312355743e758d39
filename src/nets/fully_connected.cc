#include "slimtorch/nets/fully_connected.h"

#include "kernels/cuda/cuda_fused.h"
#include "layer_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/nets/layer_trace.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace nets {

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
  if (biases.defined() && x.is_cuda() && UseCudaKernels() &&
      !ActiveQuantizer()) {
    // The product, then bias + activation in one kernel (backward: one pass
    // for the input's gradient and the bias's).
    torch::Tensor y = torch::linear(x, weights);
    torch::Tensor z =
        internal::BiasActCuda(y, biases, ToBnActivation(options.activation()));
    if (z.defined()) return z;
    return Activate(y + biases.to(y.scalar_type()), options.activation(), this);
  }
  Quantizer* q = ActiveQuantizer();
  QuantRange range;
  torch::Tensor y = torch::linear(
      x, q ? q->Weights(this, "weights_quant", weights, &range) : weights,
      biases);
  if (TracingOps()) {
    TracedOp op(OpKind::kFullyConnected, this, "/MatMul", {x}, y);
    op.weights = weights.detach();
    if (biases.defined()) op.bias = biases.detach();
    op.weights_quant = range;
    TraceOp(op);
  }
  y = Activate(y, options.activation(), this);
  return q ? q->LayerOutput(this, y) : y;
}

std::vector<std::pair<torch::Tensor, double>> FullyConnectedImpl::L2Variables()
    const {
  return WeightsAndBiases(weights, options.weight_decay(), biases,
                          options.bias_decay());
}

torch::Tensor FlattenNhwc(const torch::Tensor& x) {
  torch::Tensor y = x.permute({0, 2, 3, 1}).reshape({x.size(0), -1});
  if (TracingOps()) TraceOp({OpKind::kFlatten, nullptr, "", {x}, y});
  return y;
}

}  // namespace nets
}  // namespace slimtorch
