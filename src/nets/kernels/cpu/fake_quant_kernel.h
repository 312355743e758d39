#pragma once
// The fused CPU kernels of fake quantization (private to src/nets): one
// pass over contiguous float32 data for the forward pass, one for the
// gradient, with TensorFlow's operations in TensorFlow's order (see
// src/nets/fake_quant.cc) so that they give the tensor-op path's bits.
//
// The data is a sequence of rows of `row_length` values, row r belonging
// to range (channel) r % channels: [outer, C, inner] data per channel has
// rows of `inner`; a per-tensor range cuts the data into blocks (channels
// 1). Each row is handled by one thread, so the sums per row, added in row
// order, are the same for any number of threads.

#include <cstdint>

namespace slimtorch {
namespace nets {
namespace internal {

// One range's grid, float32 as TensorFlow's kernel computes it.
struct FakeQuantGrid {
  float nudged_min;
  float nudged_max;
  float scale;
  float inv_scale;
  float quant_zero;
  bool zero_range;  // min == max == 0: zeros forward, dy backward
};

struct FakeQuantLayout {
  int64_t numel;
  int64_t row_length;
  int64_t channels;
  // The per-channel kernel multiplies by inv_scale, the per-tensor one
  // divides by scale.
  bool per_channel;
};

void FakeQuantForwardCpu(const float* x, float* y, const FakeQuantGrid* grids,
                         const FakeQuantLayout& layout);

// dx, and per channel the sums of dy where x < nudged_min (dmin) and
// where x > nudged_max (dmax); dmin/dmax may be null when not wanted.
void FakeQuantBackwardCpu(const float* x, const float* dy, float* dx,
                          float* dmin, float* dmax,
                          const FakeQuantGrid* grids,
                          const FakeQuantLayout& layout);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
