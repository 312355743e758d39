#pragma once
// Depthwise convolutions (channel multiplier 1, no bias) of float32
// channels-last CPU tensors whose backward pass is slimtorch's own kernel
// (kernels/cpu/depthwise_kernel.h); the forward pass is LibTorch's. Private
// to src/nets: convolution.cc routes the depthwise convolutions it can here.

#include <torch/torch.h>

#include <array>
#include <cstdint>

namespace slimtorch {
namespace nets {

// conv2d(x, w, stride, groups = C) with pads {top, left, bottom, right}
// where the own backward pass is the faster one: x [N, C, H, W] dense
// channels-last float32 on the CPU, w [C, 1, kh, kw] float32 with kh and kw
// from 5 to 16, stride 1, symmetric pads, the switch on
// (SLIMTORCH_DEPTHWISE); undefined otherwise. The result is channels-last.
torch::Tensor DepthwiseConvCpu(const torch::Tensor& x, const torch::Tensor& w,
                               int64_t stride,
                               const std::array<int64_t, 4>& pads);

}  // namespace nets
}  // namespace slimtorch
