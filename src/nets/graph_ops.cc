#include "slimtorch/nets/graph_ops.h"

#include <vector>

#include "kernels/cpu/batch_norm_kernel.h"
#include "kernels/cuda/cuda_fused.h"
#include "layer_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/nets/layer_trace.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace nets {

torch::Tensor Concat(const std::vector<torch::Tensor>& xs) {
  torch::Tensor y = torch::cat(xs, 1);
  if (TracingOps()) TraceOp({OpKind::kConcat, nullptr, "", xs, y});
  return y;
}

namespace {

torch::Tensor PlainAdd(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor y = a + b;
  if (TracingOps()) TraceOp({OpKind::kAdd, nullptr, "", {a, b}, y});
  return y;
}

}  // namespace

torch::Tensor Add(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor y = PlainAdd(a, b);
  // A quantized net's bypass: its output quantized ("add_quant").
  if (Quantizer* q = ActiveQuantizer()) return q->AddOutput({a, b}, y, false);
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
  if (Quantizer* q = ActiveQuantizer()) {
    // The ReLU after a bypass quantized ("act_quant"), not the sum.
    return q->AddOutput({a, b}, Relu(PlainAdd(a, b)), true);
  }
  if (UseCudaKernels()) {
    torch::Tensor y = internal::AddReluCuda(a, b);
    if (y.defined()) return y;
    if (AddReluCpuApplies(a, b)) return AddReluCpuFunction::apply(a, b);
  }
  return ReluInPlace(PlainAdd(a, b));
}

namespace {

// Reports y = x (op) c, a constant, to the traces taking ops.
void TraceWithConstant(OpKind kind, const torch::Tensor& x,
                       const torch::Tensor& y, double c) {
  if (!TracingOps()) return;
  TracedOp op(kind, nullptr, "", {x}, y);
  op.factor = c;
  TraceOp(op);
}

}  // namespace

torch::Tensor Scale(const torch::Tensor& x, double factor) {
  torch::Tensor y = x * factor;
  TraceWithConstant(OpKind::kScale, x, y, factor);
  if (Quantizer* q = ActiveQuantizer()) return q->OpOutput("Mul", {x}, y);
  return y;
}

torch::Tensor Relu(const torch::Tensor& x) {
  torch::Tensor y = torch::relu(x);
  if (TracingOps()) TraceOp({OpKind::kRelu, nullptr, "", {x}, y});
  return y;
}

torch::Tensor ScaleInPlace(torch::Tensor x, double factor) {
  if (TracingOps() || ActiveQuantizer()) return Scale(x, factor);
  return x.mul_(factor);
}

torch::Tensor ReluInPlace(torch::Tensor x) {
  if (TracingOps() || ActiveQuantizer()) return Relu(x);
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

// ---- Video nets (I3D, S3D-G). ----

torch::Tensor Sigmoid(const torch::Tensor& x) {
  torch::Tensor y = torch::sigmoid(x);
  if (TracingOps()) TraceOp({OpKind::kSigmoid, nullptr, "", {x}, y});
  return y;
}

torch::Tensor Mul(const torch::Tensor& x, const torch::Tensor& y) {
  bool broadcast = y.dim() == x.dim() && y.dim() >= 2 &&
                   y.size(0) == x.size(0) && y.size(1) == x.size(1);
  for (int64_t d = 2; broadcast && d < y.dim(); ++d) {
    broadcast = y.size(d) == 1;
  }
  SLIM_CHECK(x.sizes() == y.sizes() || broadcast, "Mul: ", y.sizes(),
             " neither is ", x.sizes(), " nor broadcasts over its spatial dims");
  torch::Tensor z = x * y;
  if (TracingOps()) TraceOp({OpKind::kMul, nullptr, "", {x, y}, z});
  if (Quantizer* q = ActiveQuantizer()) return q->OpOutput("Mul", {x, y}, z);
  return z;
}

torch::Tensor SpatiotemporalMean(const torch::Tensor& x) {
  SLIM_CHECK(x.dim() == 5, "SpatiotemporalMean needs [N, C, T, H, W], got ",
             x.sizes());
  torch::Tensor y = x.mean({2, 3, 4}, /*keepdim=*/true);
  if (TracingOps()) TraceOp({OpKind::kMean, nullptr, "", {x}, y});
  return y;
}

torch::Tensor SqueezeThw(const torch::Tensor& x) {
  SLIM_CHECK(x.dim() == 5 && x.size(2) == 1 && x.size(3) == 1 && x.size(4) == 1,
             "SqueezeThw needs [N, C, 1, 1, 1], got ", x.sizes());
  torch::Tensor y = x.reshape({x.size(0), x.size(1)});
  if (TracingOps()) TraceOp({OpKind::kSqueeze, nullptr, "", {x}, y});
  return y;
}

// ---- MobileNet v3 / EdgeTPU (Mul above too). ----

torch::Tensor AddConstant(const torch::Tensor& x, double c) {
  torch::Tensor y = x + c;
  TraceWithConstant(OpKind::kAddConstant, x, y, c);
  if (Quantizer* q = ActiveQuantizer()) q->Derive(x, y);
  return y;
}

torch::Tensor Relu6(const torch::Tensor& x) {
  torch::Tensor y = torch::clamp(x, 0.0, 6.0);
  if (TracingOps()) TraceOp({OpKind::kRelu6, nullptr, "", {x}, y});
  if (Quantizer* q = ActiveQuantizer()) return q->OpOutput("Relu6", {x}, y);
  return y;
}

}  // namespace nets
}  // namespace slimtorch
