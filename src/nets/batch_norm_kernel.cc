#include "batch_norm_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

// Float partial sums cover at most this many values of a channel before
// they are added to the double totals.
constexpr int64_t kBlock = 32;
// A channels-last pass gives each task at least this many rows.
constexpr int64_t kMinRows = 256;

inline float Act(float v, BnActivation act) {
  // (v < 0 ? 0 : v) keeps NaN, as LibTorch's relu and clamp do.
  if (act == BnActivation::kNone) return v;
  v = v < 0.0f ? 0.0f : v;
  if (act == BnActivation::kRelu6) v = v > 6.0f ? 6.0f : v;
  return v;
}

// g where the activation passed its input v = x * scale + shift (the same
// float operations as the forward pass, so the same decision), else 0.
// Every value is loaded unconditionally, so the loops using it vectorize (a
// select, not a branch).
template <BnActivation A>
inline float Masked(float x, float scale, float shift, float g) {
  if constexpr (A == BnActivation::kNone) {
    return g;
  } else {
    const float v = x * scale + shift;
    const bool passed =
        A == BnActivation::kRelu ? v > 0.0f : (v > 0.0f) & (v < 6.0f);
    return passed ? g : 0.0f;
  }
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

// Four floats as one value (GCC's vector extension, one SSE register on
// x86-64's baseline). The runs' sums keep 2 x 4 partial sums, which the
// vectorizer does not do by itself once the activation's mask is in.
typedef float F4 __attribute__((vector_size(16)));

inline F4 Load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline double Sum4(F4 v) {
  return (static_cast<double>(v[0]) + v[1]) +
         (static_cast<double>(v[2]) + v[3]);
}

template <BnActivation A, typename S>
inline F4 Masked4(F4 x, S scale, S shift, F4 g) {
  if constexpr (A == BnActivation::kNone) {
    return g;
  } else {
    const F4 v = x * scale + shift;
    const F4 zero = {0, 0, 0, 0};
    if constexpr (A == BnActivation::kRelu) {
      return v > 0.0f ? g : zero;
    } else {
      return (v > 0.0f) & (v < 6.0f) ? g : zero;
    }
  }
}

// ---- Channels-last: rows of C. ----

// Per-channel sums over rows [r0, r1): row(i, s1, s2) adds row i's terms
// to the float partial sums s1, s2, which go into the double totals t1, t2
// every kBlock rows.
template <typename Row>
void BlockSums(int64_t c_count, int64_t r0, int64_t r1, double* t1, double* t2,
               const Row& row) {
  std::vector<float> p1(c_count), p2(c_count);
  for (int64_t r = r0; r < r1; r += kBlock) {
    const int64_t end = std::min(r1, r + kBlock);
    std::fill(p1.begin(), p1.end(), 0.0f);
    std::fill(p2.begin(), p2.end(), 0.0f);
    for (int64_t i = r; i < end; ++i) row(i, p1.data(), p2.data());
    for (int64_t c = 0; c < c_count; ++c) {
      t1[c] += p1[c];
      t2[c] += p2[c];
    }
  }
}

// Adds sum(d) and sum(d^2), d = x - pivot, of rows [r0, r1) to t1, t2.
void StatsRowsCl(const float* x, int64_t c_count, int64_t r0, int64_t r1,
                 const float* pivot, double* t1, double* t2) {
  BlockSums(c_count, r0, r1, t1, t2,
            [&](int64_t i, float* __restrict s1, float* __restrict s2) {
              const float* __restrict row = x + i * c_count;
              const float* __restrict p = pivot;
              for (int64_t c = 0; c < c_count; ++c) {
                const float d = row[c] - p[c];
                s1[c] += d;
                s2[c] += d * d;
              }
            });
}

// Adds sum(g') and sum(g' * (x - mean)) of rows [r0, r1) to t1, t2.
template <BnActivation A>
void ReduceRowsCl(const float* g, int64_t g_row_stride, const float* x,
                  int64_t c_count, int64_t r0, int64_t r1, const float* scale,
                  const float* shift, const float* mean, double* t1,
                  double* t2) {
  BlockSums(c_count, r0, r1, t1, t2,
            [&](int64_t i, float* __restrict s1, float* __restrict s2) {
              const float* __restrict gr = g + i * g_row_stride;
              const float* __restrict xr = x + i * c_count;
              const float* __restrict sc = scale;
              const float* __restrict sh = shift;
              const float* __restrict m = mean;
              for (int64_t c = 0; c < c_count; ++c) {
                const float q = Masked<A>(xr[c], sc[c], sh[c], gr[c]);
                s1[c] += q;
                s2[c] += q * (xr[c] - m[c]);
              }
            });
}

// ---- NCHW: runs of S values per (image, channel). ----

// Adds sum(d), sum(d^2), d = v - pivot, of one run to t1, t2.
void StatsRun(const float* v, int64_t len, float pivot, double& t1,
              double& t2) {
  for (int64_t i = 0; i < len; i += kBlock * 8) {
    const int64_t end = std::min(len, i + kBlock * 8);
    F4 a1 = {0, 0, 0, 0}, b1 = a1, a2 = a1, b2 = a1;
    int64_t j = i;
    for (; j + 8 <= end; j += 8) {
      const F4 d = Load4(v + j) - pivot;
      const F4 e = Load4(v + j + 4) - pivot;
      a1 += d;
      b1 += e;
      a2 += d * d;
      b2 += e * e;
    }
    double s1 = Sum4(a1 + b1), s2 = Sum4(a2 + b2);
    for (; j < end; ++j) {
      const double d = v[j] - pivot;
      s1 += d;
      s2 += d * d;
    }
    t1 += s1;
    t2 += s2;
  }
}

template <BnActivation A>
void ReduceRun(const float* g, const float* x, int64_t len, float scale,
               float shift, float mean, double& t1, double& t2) {
  for (int64_t i = 0; i < len; i += kBlock * 8) {
    const int64_t end = std::min(len, i + kBlock * 8);
    F4 a1 = {0, 0, 0, 0}, b1 = a1, a2 = a1, b2 = a1;
    int64_t j = i;
    for (; j + 8 <= end; j += 8) {
      const F4 xv = Load4(x + j);
      const F4 xw = Load4(x + j + 4);
      const F4 gp = Masked4<A>(xv, scale, shift, Load4(g + j));
      const F4 gq = Masked4<A>(xw, scale, shift, Load4(g + j + 4));
      a1 += gp;
      b1 += gq;
      a2 += gp * (xv - mean);
      b2 += gq * (xw - mean);
    }
    double s1 = Sum4(a1 + b1), s2 = Sum4(a2 + b2);
    for (; j < end; ++j) {
      const float gp = Masked<A>(x[j], scale, shift, g[j]);
      s1 += gp;
      s2 += static_cast<double>(gp * (x[j] - mean));
    }
    t1 += s1;
    t2 += s2;
  }
}

template <BnActivation A>
void ApplyRowsCl(const float* x, int64_t c_count, int64_t r0, int64_t r1,
                 const float* scale, const float* shift, float* y) {
  for (int64_t i = r0; i < r1; ++i) {
    const float* xr = x + i * c_count;
    float* yr = y + i * c_count;
    for (int64_t c = 0; c < c_count; ++c) {
      yr[c] = Act(xr[c] * scale[c] + shift[c], A);
    }
  }
}

template <BnActivation A>
void ApplyRun(const float* x, int64_t len, float scale, float shift, float* y) {
  for (int64_t j = 0; j < len; ++j) y[j] = Act(x[j] * scale + shift, A);
}

template <BnActivation A>
void BackwardRowsCl(const float* g, int64_t g_row_stride, const float* x,
                    int64_t c_count, int64_t r0, int64_t r1, const float* scale,
                    const float* shift, const float* mean, const float* a,
                    const float* b, const float* k, float* dx) {
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t o = i * c_count;
    const float* gr = g + i * g_row_stride;
    for (int64_t c = 0; c < c_count; ++c) {
      const float gp = Masked<A>(x[o + c], scale[c], shift[c], gr[c]);
      dx[o + c] = a[c] * gp + b[c] * (x[o + c] - mean[c]) + k[c];
    }
  }
}

template <BnActivation A>
void BackwardRun(const float* g, const float* x, int64_t len, float scale,
                 float shift, float mean, float a, float b, float k,
                 float* dx) {
  for (int64_t j = 0; j < len; ++j) {
    const float gp = Masked<A>(x[j], scale, shift, g[j]);
    dx[j] = a * gp + b * (x[j] - mean) + k;
  }
}

template <typename F>
void DispatchAct(BnActivation act, const F& f) {
  switch (act) {
    case BnActivation::kNone:
      return f(std::integral_constant<BnActivation, BnActivation::kNone>());
    case BnActivation::kRelu:
      return f(std::integral_constant<BnActivation, BnActivation::kRelu>());
    case BnActivation::kRelu6:
      return f(std::integral_constant<BnActivation, BnActivation::kRelu6>());
  }
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
  std::vector<float> pivot(C);
  std::vector<double> t1(C), t2(C);
  if (l.channels_last) {
    std::copy(x, x + C, pivot.begin());
    const int64_t tasks = RowTasks(count);
    std::vector<double> p1(tasks * C, 0.0), p2(tasks * C, 0.0);
    ForRowRanges(count, tasks, [&](int64_t t, int64_t r0, int64_t r1) {
      StatsRowsCl(x, C, r0, r1, pivot.data(), &p1[t * C], &p2[t * C]);
    });
    SumTasks(p1, p2, tasks, C, t1.data(), t2.data());
  } else {
    for (int64_t c = 0; c < C; ++c) pivot[c] = x[c * l.spatial];
    at::parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double s1 = 0, s2 = 0;
        for (int64_t n = 0; n < l.n; ++n) {
          StatsRun(x + (n * C + c) * l.spatial, l.spatial, pivot[c], s1, s2);
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

void BnApplyCpu(const float* x, const BnLayout& l, const float* scale,
                const float* shift, BnActivation act, float* y) {
  const int64_t C = l.channels;
  DispatchAct(act, [&](auto a) {
    constexpr BnActivation A = decltype(a)::value;
    if (l.channels_last) {
      at::parallel_for(0, l.n * l.spatial, 64, [&](int64_t r0, int64_t r1) {
        ApplyRowsCl<A>(x, C, r0, r1, scale, shift, y);
      });
    } else {
      at::parallel_for(0, l.n * C, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t c = i % C;
          ApplyRun<A>(x + i * l.spatial, l.spatial, scale[c], shift[c],
                      y + i * l.spatial);
        }
      });
    }
  });
}

void BnBackwardReduceCpu(const float* g, int64_t g_row_stride, const float* x,
                         const BnLayout& l, BnActivation act,
                         const float* scale, const float* shift,
                         const double* mean, double* sum_g, double* sum_gx) {
  const int64_t C = l.channels;
  std::vector<float> mean_f(mean, mean + C);
  DispatchAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    if (l.channels_last) {
      const int64_t rows = l.n * l.spatial;
      const int64_t tasks = RowTasks(rows);
      std::vector<double> p1(tasks * C, 0.0), p2(tasks * C, 0.0);
      ForRowRanges(rows, tasks, [&](int64_t t, int64_t r0, int64_t r1) {
        ReduceRowsCl<A>(g, g_row_stride, x, C, r0, r1, scale, shift,
                        mean_f.data(), &p1[t * C], &p2[t * C]);
      });
      SumTasks(p1, p2, tasks, C, sum_g, sum_gx);
      return;
    }
    at::parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double s1 = 0, s2 = 0;
        for (int64_t n = 0; n < l.n; ++n) {
          const int64_t o = (n * C + c) * l.spatial;
          ReduceRun<A>(g + o, x + o, l.spatial, scale[c], shift[c], mean_f[c],
                       s1, s2);
        }
        sum_g[c] = s1;
        sum_gx[c] = s2;
      }
    });
  });
}

void BnBackwardApplyCpu(const float* g, int64_t g_row_stride, const float* x,
                        const BnLayout& l, BnActivation act, const float* scale,
                        const float* shift, const float* mean, const float* a,
                        const float* b, const float* k, float* dx) {
  const int64_t C = l.channels;
  DispatchAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    if (l.channels_last) {
      at::parallel_for(0, l.n * l.spatial, 64, [&](int64_t r0, int64_t r1) {
        BackwardRowsCl<A>(g, g_row_stride, x, C, r0, r1, scale, shift, mean, a,
                          b, k, dx);
      });
    } else {
      at::parallel_for(0, l.n * C, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t c = i % C;
          const int64_t o = i * l.spatial;
          BackwardRun<A>(g + o, x + o, l.spatial, scale[c], shift[c], mean[c],
                         a[c], b[c], k[c], dx + o);
        }
      });
    }
  });
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
