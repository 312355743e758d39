#pragma once
// The fused CPU kernels of batch normalization with its activation
// (private to src/nets), float32 in either dense layout:
//   channels-last: rows of C values, M = N*H*W rows;
//   NCHW:          N * C runs of S = H*W values.
// Training: one pass for the batch statistics (double sums of the values
// shifted by a per-channel pivot, so nothing cancels), one pass for
//   y = act(x * scale_c + shift_c);
// backward: one pass for sum(g) and sum(g * (x - mean)) over the positions
// the activation let through (decided again from x, so y need not be kept),
// one pass for dx. The loops themselves (batch_norm_rows.h) are compiled
// once per instruction set (slimtorch/core/cpu_isa.h), without FMA
// contraction (forward and backward must round x * scale + shift alike,
// and every variant must give the same bits).

#include <cstdint>

#include "../batch_norm_layout.h"

namespace slimtorch {
namespace nets {
namespace internal {

// Per channel: mean and biased variance of x over N * H * W values.
void BnStatsCpu(const float* x, const BnLayout& l, double* mean,
                double* variance);

// y = act(x * scale[c] + shift[c]); y may be x.
void BnApplyCpu(const float* x, const BnLayout& l, const float* scale,
                const float* shift, BnActivation act, float* y);

// Per channel, over the positions where the activation passed its input
// x * scale[c] + shift[c] (the forward pass's; all when act is kNone):
// sum_g = sum(g), sum_gx = sum(g * (x - mean)).
// g_row_stride: channels-last, the floats from one of g's rows to the next
// (C when dense; more when g is a channel slice of a wider tensor, as the
// gradient of a concatenation's input is); NCHW, g must be dense.
void BnBackwardReduceCpu(const float* g, int64_t g_row_stride, const float* x,
                         const BnLayout& l, BnActivation act,
                         const float* scale, const float* shift,
                         const float* mean, double* sum_g, double* sum_gx);

// dx = a[c] * g' + b[c] * (x - mean[c]) + k[c], g' = g where the activation
// passed its input, else 0. g_row_stride as for BnBackwardReduceCpu.
void BnBackwardApplyCpu(const float* g, int64_t g_row_stride, const float* x,
                        const BnLayout& l, BnActivation act, const float* scale,
                        const float* shift, const float* mean, const float* a,
                        const float* b, const float* k, float* dx);

// y = max(a + b, 0) over n floats (a residual sum and its ReLU in one
// pass; NaN kept); y may be a or b.
void AddReluCpu(const float* a, const float* b, int64_t n, float* y);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
