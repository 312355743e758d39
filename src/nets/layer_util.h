#pragma once
// What the layer families share (private to nets/): the kernel switches as
// the layers ask them, the activation after a layer, TensorFlow's window
// pads, and small tensor helpers.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/batch_norm_layout.h"
#include "slimtorch/nets/layer_common.h"

namespace slimtorch {
namespace nets {

// Whether the fused kernels may run (core/kernel_switches.h).
bool FusedBatchNormOn();
// Whether the GPU kernels of cuda_fused.h may replace LibTorch's ops.
bool UseCudaKernels();

// The layer's activation on x, in place, reported as `layer`'s op.
torch::Tensor Activate(torch::Tensor x, Activation a,
                       const torch::nn::Module* layer);
// The kernels' name for an activation.
internal::BnActivation ToBnActivation(Activation a);

// t's floats, or null for an undefined or empty t.
const float* FloatsOrNull(const torch::Tensor& t);
// t's elements; 0 for an undefined t.
int64_t Numel(const torch::Tensor& t);

// {top, left, bottom, right} of a kh x kw window on NCHW x.
std::array<int64_t, 4> WindowPads(const torch::Tensor& x, int64_t kh,
                                  int64_t kw, int64_t stride, Padding padding);

// A layer's L2 variables: (weights, wd) and (biases, bd) where the
// coefficient is not 0.
std::vector<std::pair<torch::Tensor, double>> WeightsAndBiases(
    const torch::Tensor& weights, double weight_decay,
    const torch::Tensor& biases, double bias_decay);

}  // namespace nets
}  // namespace slimtorch
