#pragma once
// The backward pass of slimtorch's own depthwise convolution (channel
// multiplier 1) for float32 channels-last CPU tensors: any stride, any pads
// (TensorFlow's asymmetric SAME ones included). Private to src/nets.
// LibTorch 1.13's CPU depthwise backward (oneDNN 2.6 through ATen) runs
// filters above 3 x 3 in a slow generic path: 5 x 5 and 7 x 7 backward
// take 5-10x their forward (docs/kernels.md), and NASNet, PNASNet and
// MobileNet v3 are made of them. The loops are in
// depthwise_rows.h, one variant per instruction set; here the work is
// split across LibTorch's intra-op threads. Every result is the same
// whatever the number of threads: each value is summed in one order by
// one task, and the batch's weight gradient adds the images' in order.

#include <cstdint>

#include "depthwise_rows.h"

namespace slimtorch {
namespace nets {
namespace internal {

// dx [n, in_h, in_w, C] (where not null) and dw [kh, kw, C] (where not
// null) from g [n, out_h, out_w, C], x and w; scratch holds n * kh * kw * C
// floats (the images' own weight gradients) when dw is wanted.
void DepthwiseBackwardCpu(const DepthwiseShape& s, const float* x,
                          const float* w, const float* g, float* dx, float* dw,
                          float* scratch);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
