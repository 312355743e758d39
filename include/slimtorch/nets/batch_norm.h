#pragma once
// slim.batch_norm: the layer, its fused paths' switches, batch norm + ReLU.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "slimtorch/nets/cross_replica_sum.h"
#include "slimtorch/nets/layer_common.h"

namespace slimtorch {
namespace nets {

// slim.batch_norm's settings (an arg scope's batch_norm_params).
struct BatchNormOptions {
  explicit BatchNormOptions(int64_t channels) : channels_(channels) {}
  TORCH_ARG(int64_t, channels);
  // moving = decay * moving + (1 - decay) * batch; slim's default 0.999.
  TORCH_ARG(double, decay) = 0.999;
  // Added to the variance; slim's default 0.001. Values below 1.001e-5 act
  // as 1.001e-5, as in TensorFlow's fused batch norm (which slim uses for
  // 4-D inputs).
  TORCH_ARG(double, epsilon) = 0.001;
  // beta (default true) and gamma (default false, as slim.batch_norm).
  TORCH_ARG(bool, center) = true;
  TORCH_ARG(bool, scale) = false;
};

// slim.batch_norm on NCHW input. Variables (checkpoint keys; do not change):
// "beta" and "gamma" [C] (trainable, when center / scale), "moving_mean" and
// "moving_variance" [C] (buffers). Training mode normalises with the batch
// statistics and updates the moving ones (the variance Bessel-corrected, as
// TF's fused kernel); eval mode uses the moving statistics.
//
// On CPU float32 input in NCHW or channels-last order the normalisation and
// the activation that follows it run as one fused kernel per pass (batch
// statistics, normalise + activate; backward: sums, input gradient), unless
// a layer trace takes the ops (layer_trace.h: a graph being exported);
// elsewhere LibTorch's batch_norm then the activation. Both give the same
// values within float rounding.
class BatchNormImpl : public torch::nn::Cloneable<BatchNormImpl> {
 public:
  explicit BatchNormImpl(const BatchNormOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  // Batch norm then `activation`, recorded (when exporting) as
  // "<layer scope>/Relu" or ".../Relu6" of `layer`.
  torch::Tensor ForwardActivated(const torch::Tensor& x, Activation activation,
                                 const torch::nn::Module* layer);

  BatchNormOptions options;
  torch::Tensor beta;
  torch::Tensor gamma;
  torch::Tensor moving_mean;
  torch::Tensor moving_variance;
  // false: always LibTorch's batch_norm + activation (the reference the
  // fused kernels are tested against).
  bool fused_kernels = true;
  // Set (SetCrossReplicaBatchNorm): training mode normalises with the
  // statistics of every replica's batch together (PyTorch's SyncBatchNorm):
  // the per-channel sums go through it in the forward pass, and the sums
  // of the gradient in the backward pass, so that each replica computes
  // what one replica would on the whole global batch. Not on the fused
  // kernels' path.
  std::shared_ptr<CrossReplicaSum> cross_replica;

 private:
  // The fused path's output, or an undefined tensor where it does not apply.
  torch::Tensor Fused(const torch::Tensor& x, Activation activation);
  torch::Tensor Unfused(const torch::Tensor& x);
  torch::Tensor CrossReplica(const torch::Tensor& x);
};
TORCH_MODULE(BatchNorm);

// Sets `sum` (null: none) as the cross_replica of every BatchNorm layer of
// `net`; returns how many there are.
int SetCrossReplicaBatchNorm(torch::nn::Module& net,
                             const std::shared_ptr<CrossReplicaSum>& sum);

// Whether BatchNorm layers may use the fused kernels, CPU and CUDA (default
// true; each layer's fused_kernels must also be true), and AddRelu its CUDA
// kernel. For benchmarks and checks: false runs LibTorch's batch_norm +
// activation (and add + ReLU) everywhere.
void SetFusedBatchNorm(bool enabled);

// Whether the fused batch norm trains channels-last CPU tensors (ReLU or
// none after it) through oneDNN's kernels when the build has them (default
// true; SLIMTORCH_DNNL_BATCH_NORM=0 for a whole process), else through
// slimtorch's own — float32, and bfloat16 (--precision=bf16's convolution
// outputs), which otherwise takes LibTorch's batch_norm + activation. Returns
// whether the build has them.
bool SetDnnlBatchNorm(bool enabled);

// A batch norm folded into the convolution before it, as TensorFlow's
// contrib.quantize folds it (fold_batch_norms.py): the convolution then
// computes conv(x, weights * multiplier) * correction + bias (multiplier,
// correction and bias [C]; correction undefined where it is 1).
//   eval, or training with frozen statistics: multiplier = gamma /
//     sqrt(moving_variance + eps), bias = beta - moving_mean * multiplier;
//   training: from the batch's mean m and biased variance v of the float
//     convolution `float_output` (differentiated: TensorFlow's batch norm
//     passes gradients through its statistics), multiplier =
//     gamma / sqrt(v + eps) * correction_scale where correction_scale =
//     sqrt(v + eps) / sqrt(moving_variance + eps), correction =
//     1 / correction_scale, bias = beta - m * gamma / sqrt(v + eps); the
//     moving statistics are updated from m and v as the layer's own
//     training pass updates them.
// Gradients reach gamma and beta through the multiplier and the bias.
struct FoldedBatchNorm {
  torch::Tensor multiplier, correction, bias;
};
FoldedBatchNorm FoldBatchNorm(BatchNormImpl& bn, bool batch_statistics,
                              const std::function<torch::Tensor()>& float_output);

// Relu(bn(x)) as graph_ops' Relu names it when exporting; otherwise the
// fused batch norm + ReLU where it applies.
torch::Tensor BatchNormRelu(BatchNormImpl& bn, const torch::Tensor& x);

}  // namespace nets
}  // namespace slimtorch
