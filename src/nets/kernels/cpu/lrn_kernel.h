#pragma once
// The fused CPU kernels of local response normalization (private to
// src/nets): NCHW contiguous float32, TensorFlow's formula
//   N_c = bias + alpha * sum_{c' = c - r .. c + r} x_c'^2,  y_c = x_c N_c^-beta
// and its gradient. Compiled on their own (no errno on sqrt) so the loops
// vectorize.

#include <cstdint>

namespace slimtorch {
namespace nets {
namespace internal {

struct LrnParams {
  int64_t radius;
  double bias;
  double alpha;
  double beta;
};

void LrnForwardCpu(const float* x, float* y, int64_t n, int64_t channels,
                   int64_t hw, const LrnParams& params);

// dx from the input x and the output gradient g.
void LrnBackwardCpu(const float* x, const float* g, float* dx, int64_t n,
                    int64_t channels, int64_t hw, const LrnParams& params);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
