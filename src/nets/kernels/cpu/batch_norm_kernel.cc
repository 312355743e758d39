#include "batch_norm_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "batch_norm_rows.h"
#include "slimtorch/core/cpu_isa.h"

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

// A channels-last pass gives each task at least this many rows.
constexpr int64_t kMinRows = 256;

// The inner loops compiled for the active instruction set.
const BnRowKernels& Rows() {
#ifdef SLIMTORCH_ISA_VARIANTS
  switch (ActiveCpuIsa()) {
    case CpuIsa::kAvx512:
      return BnRowsAvx512();
    case CpuIsa::kAvx2:
      return BnRowsAvx2();
    case CpuIsa::kBaseline:
      break;
  }
#endif
  return BnRowsBaseline();
}

// Splits [0, rows) into `tasks` contiguous ranges and runs f(task, begin,
// end) for each, in parallel. The split depends only on rows and tasks, so
// the sums are the same from run to run.
template <typename F>
void ForRowRanges(int64_t rows, int64_t tasks, const F& f) {
  at::parallel_for(0, tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      f(t, rows * t / tasks, rows * (t + 1) / tasks);
  });
}

int64_t RowTasks(int64_t rows) {
  return std::max<int64_t>(
      1, std::min<int64_t>(at::get_num_threads(), rows / kMinRows));
}

// Totals of per-task partial sums (tasks x C each) into out1, out2.
void SumTasks(const std::vector<double>& p1, const std::vector<double>& p2,
              int64_t tasks, int64_t c_count, double* out1, double* out2) {
  for (int64_t c = 0; c < c_count; ++c) {
    double s1 = 0, s2 = 0;
    for (int64_t t = 0; t < tasks; ++t) {
      s1 += p1[t * c_count + c];
      s2 += p2[t * c_count + c];
    }
    out1[c] = s1;
    out2[c] = s2;
  }
}

}  // namespace

void BnStatsCpu(const float* x, const BnLayout& l, double* mean,
                double* variance) {
  const int64_t C = l.channels;
  const int64_t count = l.n * l.spatial;
  if (count == 0) {
    std::fill(mean, mean + C, 0.0);
    std::fill(variance, variance + C, 0.0);
    return;
  }
  const BnRowKernels& k = Rows();
  std::vector<float> pivot(C);
  std::vector<double> t1(C), t2(C);
  if (l.channels_last) {
    std::copy(x, x + C, pivot.begin());
    const int64_t tasks = RowTasks(count);
    std::vector<double> p1(tasks * C, 0.0), p2(tasks * C, 0.0);
    std::vector<float> scratch(tasks * 2 * C);
    ForRowRanges(count, tasks, [&](int64_t t, int64_t r0, int64_t r1) {
      k.stats_rows(x, C, r0, r1, pivot.data(), &scratch[t * 2 * C], &p1[t * C],
                   &p2[t * C]);
    });
    SumTasks(p1, p2, tasks, C, t1.data(), t2.data());
  } else {
    for (int64_t c = 0; c < C; ++c) pivot[c] = x[c * l.spatial];
    at::parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double s1 = 0, s2 = 0;
        for (int64_t n = 0; n < l.n; ++n) {
          k.stats_run(x + (n * C + c) * l.spatial, l.spatial, pivot[c], &s1,
                      &s2);
        }
        t1[c] = s1;
        t2[c] = s2;
      }
    });
  }
  for (int64_t c = 0; c < C; ++c) {
    const double m = t1[c] / count;  // mean of x - pivot
    mean[c] = pivot[c] + m;
    variance[c] = std::max(0.0, t2[c] / count - m * m);
  }
}

void AddReluCpu(const float* a, const float* b, int64_t n, float* y) {
  const BnRowKernels& k = Rows();
  at::parallel_for(0, n, int64_t{1} << 14, [&](int64_t i0, int64_t i1) {
    k.add_relu(a + i0, b + i0, i1 - i0, y + i0);
  });
}

void BnApplyCpu(const float* x, const BnLayout& l, const float* scale,
                const float* shift, BnActivation act, float* y) {
  const int64_t C = l.channels;
  const BnRowKernels& k = Rows();
  if (l.channels_last) {
    at::parallel_for(0, l.n * l.spatial, 64, [&](int64_t r0, int64_t r1) {
      k.apply_rows(act, x, C, r0, r1, scale, shift, y);
    });
    return;
  }
  at::parallel_for(0, l.n * C, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t c = i % C;
      k.apply_run(act, x + i * l.spatial, l.spatial, scale[c], shift[c],
                  y + i * l.spatial);
    }
  });
}

void BnBackwardReduceCpu(const float* g, int64_t g_row_stride, const float* x,
                         const BnLayout& l, BnActivation act,
                         const float* scale, const float* shift,
                         const float* mean, double* sum_g, double* sum_gx) {
  const int64_t C = l.channels;
  const BnRowKernels& k = Rows();
  if (l.channels_last) {
    const int64_t rows = l.n * l.spatial;
    const int64_t tasks = RowTasks(rows);
    std::vector<double> p1(tasks * C, 0.0), p2(tasks * C, 0.0);
    std::vector<float> scratch(tasks * 2 * C);
    ForRowRanges(rows, tasks, [&](int64_t t, int64_t r0, int64_t r1) {
      k.reduce_rows(act, g, g_row_stride, x, C, r0, r1, scale, shift, mean,
                    &scratch[t * 2 * C], &p1[t * C], &p2[t * C]);
    });
    SumTasks(p1, p2, tasks, C, sum_g, sum_gx);
    return;
  }
  at::parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s1 = 0, s2 = 0;
      for (int64_t n = 0; n < l.n; ++n) {
        const int64_t o = (n * C + c) * l.spatial;
        k.reduce_run(act, g + o, x + o, l.spatial, scale[c], shift[c], mean[c],
                     &s1, &s2);
      }
      sum_g[c] = s1;
      sum_gx[c] = s2;
    }
  });
}

void BnBackwardApplyCpu(const float* g, int64_t g_row_stride, const float* x,
                        const BnLayout& l, BnActivation act, const float* scale,
                        const float* shift, const float* mean, const float* a,
                        const float* b, const float* k, float* dx) {
  const int64_t C = l.channels;
  const BnRowKernels& rows = Rows();
  if (l.channels_last) {
    at::parallel_for(0, l.n * l.spatial, 64, [&](int64_t r0, int64_t r1) {
      rows.backward_rows(act, g, g_row_stride, x, C, r0, r1, scale, shift, mean,
                         a, b, k, dx);
    });
    return;
  }
  at::parallel_for(0, l.n * C, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t c = i % C;
      const int64_t o = i * l.spatial;
      rows.backward_run(act, g + o, x + o, l.spatial, scale[c], shift[c],
                        mean[c], a[c], b[c], k[c], dx + o);
    }
  });
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
