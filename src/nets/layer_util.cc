#include "layer_util.h"

#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {

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

internal::BnActivation ToBnActivation(Activation a) {
  switch (a) {
    case Activation::kNone:
      return internal::BnActivation::kNone;
    case Activation::kRelu:
      return internal::BnActivation::kRelu;
    case Activation::kRelu6:
      return internal::BnActivation::kRelu6;
  }
  return internal::BnActivation::kNone;
}

const float* FloatsOrNull(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.data_ptr<float>() : nullptr;
}

int64_t Numel(const torch::Tensor& t) { return t.defined() ? t.numel() : 0; }

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

}  // namespace nets
}  // namespace slimtorch
