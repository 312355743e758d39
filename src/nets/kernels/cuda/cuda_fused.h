#pragma once
// LibTorch ops over the fused CUDA kernels (cuda_kernels.h), private to
// src/nets. Each returns an undefined tensor where its kernels do not apply
// (a CPU tensor, a layout or element type they do not take, or a build
// without the kernels), and the caller takes LibTorch's path.

#include <torch/torch.h>

#include <utility>

#include "../batch_norm_layout.h"

namespace slimtorch {
namespace nets {
namespace internal {

// Whether this build has the CUDA kernels.
bool CudaKernelsBuilt();

// act(batch_norm(x)) for a CUDA x of float32, bfloat16 or float16, 2-D or
// 4-D, dense in channels-last order (or NCHW with H = W = 1), with float32
// gamma / beta (either may be undefined: 1 / 0) and moving statistics on
// x's device. Training: the batch's statistics, the moving averages updated
// in place (decay as TensorFlow's), differentiable in x, gamma and beta.
// Inference: the moving statistics, and only where no gradient is needed.
torch::Tensor BatchNormActCuda(const torch::Tensor& x,
                               const torch::Tensor& gamma,
                               const torch::Tensor& beta,
                               torch::Tensor& moving_mean,
                               torch::Tensor& moving_variance, bool training,
                               double decay, double epsilon, BnActivation act);

// act(x + bias) for a layer's output x on a GPU (float32, bfloat16 or
// float16; [N, C], or [N, C, H, W] dense channels-last or with H = W = 1)
// and its float32 bias [C] on x's device: one pass forward; backward one
// pass for dx and the bias gradient's partial sums, in place of the
// activation's backward and LibTorch's sum over the batch. Differentiable
// in x and bias.
torch::Tensor BiasActCuda(const torch::Tensor& x, const torch::Tensor& bias,
                          BnActivation act);

// x and w with zeros appended to 8 input channels, for a convolution whose
// x ([N, C, H, W] on a GPU, channels-last, C < 8) is computed in 16 bits (x
// bfloat16 / float16, or float32 under CUDA autocast to one of them), where
// cuDNN has tensor-core kernels for 8 channels but not for 3; nothing
// (undefined tensors) otherwise. The convolution's result is the same.
std::pair<torch::Tensor, torch::Tensor> PadInputChannelsCuda(
    const torch::Tensor& x, const torch::Tensor& w);

// max(a + b, 0), differentiable, for CUDA a and b of one shape, element
// type (float32, bfloat16, float16) and dense memory order.
torch::Tensor AddReluCuda(const torch::Tensor& a, const torch::Tensor& b);

// Max pooling of a CUDA [N, C, H, W] (float32, bfloat16, float16; dense
// NCHW or channels-last) over square windows of `kernel` with `stride`, the
// first window starting pad_top / pad_left pixels before the image and every
// window clipped to it; out_h x out_w windows. First-order differentiable.
torch::Tensor MaxPoolCuda(const torch::Tensor& x, int64_t kernel,
                          int64_t stride, int64_t pad_top, int64_t pad_left,
                          int64_t out_h, int64_t out_w);

// TensorFlow's local response normalization of a CUDA [N, C, H, W] (as for
// MaxPoolCuda), in x's element type, computed in float32. Differentiable.
torch::Tensor LocalResponseNormCuda(const torch::Tensor& x,
                                    int64_t depth_radius, double bias,
                                    double alpha, double beta);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
