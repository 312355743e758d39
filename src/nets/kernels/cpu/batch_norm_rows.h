#pragma once
// The inner loops of the fused batch norm kernels (batch_norm_kernel.cc),
// compiled once per instruction set (batch_norm_rows.cc under SLIMTORCH_ISA;
// slimtorch/core/cpu_isa.h). Each works on a range of one thread's data;
// the caller splits the work and combines the per-task sums.
//   channels-last: rows [r0, r1) of C floats (g's rows g_stride apart);
//   NCHW: one run of len floats of one channel.
// Sums add to *t1, *t2 (per channel for the rows, one value for a run):
// float partial sums of at most 32 rows (256 values of a run), in a fixed
// order, added to double totals. Channels-last results are the same bits
// in every variant; NCHW sums round differently per vector width.

#include <cstdint>

#include "../batch_norm_layout.h"

namespace slimtorch {
namespace nets {
namespace internal {

struct BnRowKernels {
  // t1 += sum(x - pivot), t2 += sum((x - pivot)^2).
  // scratch: 2 * c floats of the caller's (per task).
  void (*stats_rows)(const float* x, int64_t c, int64_t r0, int64_t r1,
                     const float* pivot, float* scratch, double* t1,
                     double* t2);
  // g' = g where act passed x * scale + shift, else 0:
  // t1 += sum(g'), t2 += sum(g' * (x - mean)).
  void (*reduce_rows)(BnActivation act, const float* g, int64_t g_stride,
                      const float* x, int64_t c, int64_t r0, int64_t r1,
                      const float* scale, const float* shift, const float* mean,
                      float* scratch, double* t1, double* t2);
  // y = act(x * scale + shift).
  void (*apply_rows)(BnActivation act, const float* x, int64_t c, int64_t r0,
                     int64_t r1, const float* scale, const float* shift,
                     float* y);
  // dx = a * g' + b * (x - mean) + k.
  void (*backward_rows)(BnActivation act, const float* g, int64_t g_stride,
                        const float* x, int64_t c, int64_t r0, int64_t r1,
                        const float* scale, const float* shift,
                        const float* mean, const float* a, const float* b,
                        const float* k, float* dx);
  void (*stats_run)(const float* v, int64_t len, float pivot, double* t1,
                    double* t2);
  void (*reduce_run)(BnActivation act, const float* g, const float* x,
                     int64_t len, float scale, float shift, float mean,
                     double* t1, double* t2);
  void (*apply_run)(BnActivation act, const float* x, int64_t len, float scale,
                    float shift, float* y);
  void (*backward_run)(BnActivation act, const float* g, const float* x,
                       int64_t len, float scale, float shift, float mean,
                       float a, float b, float k, float* dx);
  // y = max(a + b, 0) over len floats (NaN kept); y may be a or b.
  void (*add_relu)(const float* a, const float* b, int64_t len, float* y);
};

// One table per compiled instruction set (the x86-64 ones only where the
// build has SLIMTORCH_ISA_VARIANTS).
const BnRowKernels& BnRowsBaseline();
const BnRowKernels& BnRowsAvx2();
const BnRowKernels& BnRowsAvx512();

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
