#pragma once
// tf.nn.lrn: local response normalization across channels.

#include <torch/torch.h>

#include <cstdint>

namespace slimtorch {
namespace nets {

// tf.nn.lrn (local response normalization across channels) with
// TensorFlow's parameterisation, on NCHW input:
//   sqr_sum[n, c, h, w] = sum over c' in [c - depth_radius, c + depth_radius]
//                         (clipped to the channels) of x[n, c', h, w]^2
//   out = x / (bias + alpha * sqr_sum)^beta
// (LibTorch's LocalResponseNorm(size, alpha', beta, k) is the same with
// size = 2 * depth_radius + 1 and alpha' = alpha * size.) Defaults are
// tf.nn.lrn's. Differentiable. CPU float32 contiguous input runs the fused
// kernel (LocalResponseNormFused), anything else the composite of LibTorch
// ops (LocalResponseNormComposite).
torch::Tensor LocalResponseNorm(const torch::Tensor& x,
                                int64_t depth_radius = 5, double bias = 1.0,
                                double alpha = 1.0, double beta = 0.5);

// LocalResponseNorm from LibTorch ops (the window's sum of squares as one
// matrix product with a band matrix): any device, floating dtype and
// memory order, differentiable to any order.
torch::Tensor LocalResponseNormComposite(const torch::Tensor& x,
                                         int64_t depth_radius, double bias,
                                         double alpha, double beta);

// LocalResponseNorm as one hand-written CPU pass forward and one backward
// (TensorFlow's LRN gradient), threaded with at::parallel_for over the
// N*H*W positions. Precondition: x is a CPU float32 tensor [N, C, H, W]
// (made contiguous if it is not). First-order gradients only: the backward
// pass is not itself differentiable (no double backward).
torch::Tensor LocalResponseNormFused(const torch::Tensor& x,
                                     int64_t depth_radius, double bias,
                                     double alpha, double beta);

}  // namespace nets
}  // namespace slimtorch
