#pragma once
// The inner loops of the depthwise convolution kernel (depthwise_kernel.cc),
// compiled once per instruction set like the batch norm's
// (batch_norm_rows.h; slimtorch/core/cpu_isa.h). Everything is
// channels-last float32: an image is rows of width x C floats, the weights
// are [kh, kw, C] (TensorFlow's depthwise layout, multiplier 1). The loops
// run along the channels in vectors, so each output value is summed over
// its taps in one fixed order (kh, then kw; over the output positions in
// row order for the weights' gradient) in every variant: the variants give
// the same bits.

#include <cstdint>

namespace slimtorch {
namespace nets {
namespace internal {

// The largest filter side the kernel takes (bigger ones run LibTorch's).
constexpr int64_t kDepthwiseMaxKernel = 16;

struct DepthwiseShape {
  int64_t n = 0, channels = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride = 1;
  int64_t pad_top = 0, pad_left = 0;  // (bottom / right follow from the sizes)
};

struct DepthwiseRowKernels {
  // Row ih of one image's input gradient: dx_row[iw][c] = sum over the
  // output positions whose taps reached (ih, iw) of g * w.
  void (*backward_data_row)(const DepthwiseShape& s, const float* g_image,
                            const float* w, int64_t ih, float* dx_row);
  // One image's weight gradient: dw[kh][kw][c] = sum over the output
  // positions, in row order, of g * x under that tap (stored, not added).
  void (*backward_weights)(const DepthwiseShape& s, const float* x_image,
                           const float* g_image, float* dw);
};

// One table per compiled instruction set (the x86-64 ones only where the
// build has SLIMTORCH_ISA_VARIANTS).
const DepthwiseRowKernels& DepthwiseRowsBaseline();
const DepthwiseRowKernels& DepthwiseRowsAvx2();
const DepthwiseRowKernels& DepthwiseRowsAvx512();

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
