#pragma once
// The fused CPU max pool (private to src/nets): NCHW contiguous float32
// (channels-last stays with LibTorch's kernel, which is vectorised over the
// channels and measured faster in a training step),
// square windows of `kernel` with `stride`, the first window starting
// `pad_top` / `pad_left` pixels before the image and every window clipped to
// it (TensorFlow's SAME: padded positions never win). The argmax is the
// first maximum in row-major window order (TensorFlow's and LibTorch's
// choice, where the gradient goes on ties); NaN propagates. Compiled on its
// own (no errno, no trapping math) so that the loops vectorize.

#include <cstdint>

namespace slimtorch {
namespace nets {
namespace internal {

struct PoolShape {
  int64_t planes;  // N * C
  int64_t height, width;
  int64_t out_height, out_width;
  int64_t kernel, stride;
  int64_t pad_top, pad_left;
};

// y [planes, out_h, out_w]; argmax: the offset h * width + w in its plane.
void MaxPoolForwardCpu(const float* x, float* y, int32_t* argmax,
                       const PoolShape& s);

// dx (zeroed here) from the output gradient g and the argmax.
void MaxPoolBackwardCpu(const float* g, const int32_t* argmax, float* dx,
                        const PoolShape& s);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
