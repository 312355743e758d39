#include "depthwise_kernel.h"

#include <ATen/Parallel.h>

#include "slimtorch/core/cpu_isa.h"

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

// The inner loops compiled for the active instruction set.
const DepthwiseRowKernels& Rows() {
#ifdef SLIMTORCH_ISA_VARIANTS
  switch (ActiveCpuIsa()) {
    case CpuIsa::kAvx512:
      return DepthwiseRowsAvx512();
    case CpuIsa::kAvx2:
      return DepthwiseRowsAvx2();
    case CpuIsa::kBaseline:
      break;
  }
#endif
  return DepthwiseRowsBaseline();
}

// Rows of the whole batch per task: at least a few thousand floats of
// output each, so small maps do not pay a thread hand-off per row.
int64_t RowGrain(int64_t row_floats) {
  constexpr int64_t kMinFloats = 8192;
  return row_floats >= kMinFloats ? 1 : (kMinFloats + row_floats - 1) / row_floats;
}

}  // namespace

void DepthwiseBackwardCpu(const DepthwiseShape& s, const float* x,
                          const float* w, const float* g, float* dx,
                          float* dw, float* scratch) {
  const DepthwiseRowKernels& k = Rows();
  const int64_t C = s.channels;
  const int64_t x_image = s.in_h * s.in_w * C;
  const int64_t g_image = s.out_h * s.out_w * C;
  const int64_t taps = s.kernel_h * s.kernel_w * C;
  // Per image, its weights' gradient; then the batch's, images in order.
  float* per_image = scratch;
  if (dx != nullptr) {
    const int64_t dx_row = s.in_w * C;
    at::parallel_for(0, s.n * s.in_h, RowGrain(dx_row), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / s.in_h, ih = r % s.in_h;
        k.backward_data_row(s, g + n * g_image, w, ih, dx + r * dx_row);
      }
    });
  }
  if (dw == nullptr) return;
  at::parallel_for(0, s.n, 1, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      k.backward_weights(s, x + n * x_image, g + n * g_image,
                         per_image + n * taps);
    }
  });
  at::parallel_for(0, taps, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float sum = per_image[i];
      for (int64_t n = 1; n < s.n; ++n) sum += per_image[n * taps + i];
      dw[i] = sum;
    }
  });
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
