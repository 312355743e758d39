// The fused batch norm's inner loops (batch_norm_rows.h), compiled once per
// instruction set: SLIMTORCH_ISA names the table's entry point (Baseline,
// Avx2, Avx512), SLIMTORCH_ISA_WIDTH the floats of one vector register (4,
// 8, 16) and SLIMTORCH_ISA_COLS how many vectors per channel a
// channels-last reduction keeps in registers (what the set's registers
// hold). The loops are written on GCC's vector extension at that width.
// Channels-last sums go channel by channel in row order whatever the
// width, so every variant gives the same bits there; an NCHW run's sums
// are split across the lanes, so those round differently per variant.
//
// Everything but the entry point has internal linkage: nothing compiled
// for a wider instruction set may be shared with (and picked by the linker
// for) another variant, so no template or inline function from a header
// is used here.

#include "batch_norm_rows.h"

#include <cstring>

#ifndef SLIMTORCH_ISA
#error "SLIMTORCH_ISA names the instruction set (Baseline, Avx2, Avx512)"
#endif
#ifndef SLIMTORCH_ISA_WIDTH
#define SLIMTORCH_ISA_WIDTH 4
#endif
#ifndef SLIMTORCH_ISA_COLS
#define SLIMTORCH_ISA_COLS 2
#endif
#define SLIMTORCH_CONCAT_(a, b) a##b
#define SLIMTORCH_CONCAT(a, b) SLIMTORCH_CONCAT_(a, b)

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

constexpr int kW = SLIMTORCH_ISA_WIDTH;  // floats per vector
constexpr int64_t kRows = 32;  // rows per float partial sum (channels-last)
constexpr int64_t kRun = 256;  // values per float partial sum (NCHW)
constexpr int kCols = SLIMTORCH_ISA_COLS;
constexpr int64_t kGroup = 8;  // rows summed in registers (channels-last)

typedef float V __attribute__((vector_size(SLIMTORCH_ISA_WIDTH * 4)));

inline V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void Store(float* p, V v) { std::memcpy(p, &v, sizeof v); }

inline V Splat(float f) {
  V v;
  for (int j = 0; j < kW; ++j) v[j] = f;
  return v;
}

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// Lane j of s into t[j] (one channel per lane).
inline void AddLanes(V s, double* t) {
  for (int j = 0; j < kW; ++j) t[j] += s[j];
}

// The lanes' sum in double, pairwise in a fixed order.
inline double SumLanes(V s) {
  double h[kW];
  for (int j = 0; j < kW; ++j) h[j] = s[j];
  for (int w = kW / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) h[j] += h[j + w];
  }
  return h[0];
}

// act(v); (v < 0 ? 0 : v) keeps NaN, as LibTorch's relu and clamp do.
template <BnActivation A>
inline float Act(float v) {
  if constexpr (A != BnActivation::kNone) {
    v = v < 0.0f ? 0.0f : v;
    if constexpr (A == BnActivation::kRelu6) v = v > 6.0f ? 6.0f : v;
  }
  return v;
}

template <BnActivation A>
inline V Act(V v) {
  if constexpr (A != BnActivation::kNone) {
    const V zero = Splat(0.0f);
    v = v < zero ? zero : v;
    if constexpr (A == BnActivation::kRelu6) {
      const V six = Splat(6.0f);
      v = v > six ? six : v;
    }
  }
  return v;
}

// g where the activation passed v = x * scale + shift (the forward pass's
// float operations, so the same decision), else 0; a select, not a branch.
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

template <BnActivation A>
inline V Masked(V x, V scale, V shift, V g) {
  if constexpr (A == BnActivation::kNone) {
    return g;
  } else {
    const V v = x * scale + shift;
    const V zero = Splat(0.0f);
    if constexpr (A == BnActivation::kRelu) {
      return v > zero ? g : zero;
    } else {
      return (v > zero) & (v < Splat(6.0f)) ? g : zero;
    }
  }
}

template <BnActivation A>
struct ActTag {
  static constexpr BnActivation value = A;
};

// f(ActTag<act>()): the activation as a compile-time constant.
template <typename F>
void WithAct(BnActivation act, const F& f) {
  switch (act) {
    case BnActivation::kNone:
      return f(ActTag<BnActivation::kNone>());
    case BnActivation::kRelu:
      return f(ActTag<BnActivation::kRelu>());
    case BnActivation::kRelu6:
      return f(ActTag<BnActivation::kRelu6>());
  }
}

// ---- Channels-last: rows of C floats. A reduction goes through blocks of
// kRows rows; a block, through groups of kGroup rows; a group, through
// column chunks of kCols vectors (then single vectors, then single
// channels), each summed over the group's rows in registers and then added
// to the block's float partials (`scratch`: 2 * C floats, L1-resident),
// which go into the double totals. So memory is read as kGroup streams in
// order (a column walk down all of a block's rows, kilobytes apart, ran
// into the L1 cache's sets and the prefetchers), and the partials are
// stored once per group (a store per row let the loads of the next rows
// wait on them: 4K aliasing). Each channel's sum has the same shape in
// every variant: block partial = sum of group sums, each in row order.

// The block / group walk of a channels-last reduction over rows
// [r0, r1): group(q, qend, s1, s2) adds rows [q, qend) to the block's
// float partials s1, s2 (`scratch`), which go into t1, t2 per block.
template <typename Group>
void BlockSums(int64_t C, int64_t r0, int64_t r1, float* scratch, double* t1,
               double* t2, const Group& group) {
  float* s1 = scratch;
  float* s2 = scratch + C;
  for (int64_t r = r0; r < r1; r += kRows) {
    const int64_t end = Min(r1, r + kRows);
    for (int64_t c = 0; c < 2 * C; ++c) scratch[c] = 0.0f;
    for (int64_t q = r; q < end; q += kGroup) {
      group(q, Min(end, q + kGroup), s1, s2);
    }
    for (int64_t c = 0; c < C; ++c) {
      t1[c] += s1[c];
      t2[c] += s2[c];
    }
  }
}

template <int K>
inline void StatsChunk(const float* x, int64_t C, int64_t c, int64_t r,
                       int64_t end, const float* pivot, float* s1, float* s2) {
  V p[K], g1[K], g2[K];
  for (int k = 0; k < K; ++k) {
    p[k] = Load(pivot + c + k * kW);
    g1[k] = g2[k] = Splat(0.0f);
  }
  for (int64_t i = r; i < end; ++i) {
    for (int k = 0; k < K; ++k) {
      const V d = Load(x + i * C + c + k * kW) - p[k];
      g1[k] += d;
      g2[k] += d * d;
    }
  }
  for (int k = 0; k < K; ++k) {
    Store(s1 + c + k * kW, Load(s1 + c + k * kW) + g1[k]);
    Store(s2 + c + k * kW, Load(s2 + c + k * kW) + g2[k]);
  }
}

void StatsRows(const float* x, int64_t C, int64_t r0, int64_t r1,
               const float* pivot, float* scratch, double* t1, double* t2) {
  BlockSums(C, r0, r1, scratch, t1, t2,
            [&](int64_t q, int64_t qend, float* s1, float* s2) {
              int64_t c = 0;
              for (; c + kCols * kW <= C; c += kCols * kW) {
                StatsChunk<kCols>(x, C, c, q, qend, pivot, s1, s2);
              }
              for (; c + kW <= C; c += kW) {
                StatsChunk<1>(x, C, c, q, qend, pivot, s1, s2);
              }
              for (; c < C; ++c) {
                float g1 = 0.0f, g2 = 0.0f;
                for (int64_t i = q; i < qend; ++i) {
                  const float d = x[i * C + c] - pivot[c];
                  g1 += d;
                  g2 += d * d;
                }
                s1[c] += g1;
                s2[c] += g2;
              }
            });
}

template <BnActivation A, int K>
inline void ReduceChunk(const float* g, int64_t gs, const float* x, int64_t C,
                        int64_t c, int64_t r, int64_t end, const float* scale,
                        const float* shift, const float* mean, float* s1,
                        float* s2) {
  V sc[K], sh[K], m[K], g1[K], g2[K];
  for (int k = 0; k < K; ++k) {
    sc[k] = Load(scale + c + k * kW);
    sh[k] = Load(shift + c + k * kW);
    m[k] = Load(mean + c + k * kW);
    g1[k] = g2[k] = Splat(0.0f);
  }
  for (int64_t i = r; i < end; ++i) {
    for (int k = 0; k < K; ++k) {
      const V xv = Load(x + i * C + c + k * kW);
      const V q = Masked<A>(xv, sc[k], sh[k], Load(g + i * gs + c + k * kW));
      g1[k] += q;
      g2[k] += q * (xv - m[k]);
    }
  }
  for (int k = 0; k < K; ++k) {
    Store(s1 + c + k * kW, Load(s1 + c + k * kW) + g1[k]);
    Store(s2 + c + k * kW, Load(s2 + c + k * kW) + g2[k]);
  }
}

void ReduceRows(BnActivation act, const float* g, int64_t gs, const float* x,
                int64_t C, int64_t r0, int64_t r1, const float* scale,
                const float* shift, const float* mean, float* scratch,
                double* t1, double* t2) {
  WithAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    BlockSums(C, r0, r1, scratch, t1, t2,
              [&](int64_t q, int64_t qend, float* s1, float* s2) {
                int64_t c = 0;
                for (; c + kCols * kW <= C; c += kCols * kW) {
                  ReduceChunk<A, kCols>(g, gs, x, C, c, q, qend, scale, shift,
                                        mean, s1, s2);
                }
                for (; c + kW <= C; c += kW) {
                  ReduceChunk<A, 1>(g, gs, x, C, c, q, qend, scale, shift, mean,
                                    s1, s2);
                }
                for (; c < C; ++c) {
                  float g1 = 0.0f, g2 = 0.0f;
                  for (int64_t i = q; i < qend; ++i) {
                    const float xv = x[i * C + c];
                    const float v =
                        Masked<A>(xv, scale[c], shift[c], g[i * gs + c]);
                    g1 += v;
                    g2 += v * (xv - mean[c]);
                  }
                  s1[c] += g1;
                  s2[c] += g2;
                }
              });
  });
}

void ApplyRows(BnActivation act, const float* x, int64_t C, int64_t r0,
               int64_t r1, const float* scale, const float* shift, float* y) {
  WithAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    for (int64_t i = r0; i < r1; ++i) {
      const float* xr = x + i * C;
      float* yr = y + i * C;
      int64_t c = 0;
      for (; c + kW <= C; c += kW) {
        Store(yr + c, Act<A>(Load(xr + c) * Load(scale + c) + Load(shift + c)));
      }
      for (; c < C; ++c) yr[c] = Act<A>(xr[c] * scale[c] + shift[c]);
    }
  });
}

// The input gradient over groups of kGroup rows, column chunk by column
// chunk: the six per-channel coefficients are loaded once per group, not
// once per row (which made this pass twice the reduction's time).
template <BnActivation A, int K>
inline void BackwardChunk(const float* g, int64_t gs, const float* x, int64_t C,
                          int64_t c, int64_t r, int64_t end, const float* scale,
                          const float* shift, const float* mean, const float* a,
                          const float* b, const float* k_, float* dx) {
  V sc[K], sh[K], m[K], va[K], vb[K], vk[K];
  for (int k = 0; k < K; ++k) {
    sc[k] = Load(scale + c + k * kW);
    sh[k] = Load(shift + c + k * kW);
    m[k] = Load(mean + c + k * kW);
    va[k] = Load(a + c + k * kW);
    vb[k] = Load(b + c + k * kW);
    vk[k] = Load(k_ + c + k * kW);
  }
  for (int64_t i = r; i < end; ++i) {
    for (int k = 0; k < K; ++k) {
      const int64_t o = i * C + c + k * kW;
      const V xv = Load(x + o);
      const V q = Masked<A>(xv, sc[k], sh[k], Load(g + i * gs + c + k * kW));
      Store(dx + o, va[k] * q + vb[k] * (xv - m[k]) + vk[k]);
    }
  }
}

void BackwardRows(BnActivation act, const float* g, int64_t gs, const float* x,
                  int64_t C, int64_t r0, int64_t r1, const float* scale,
                  const float* shift, const float* mean, const float* a,
                  const float* b, const float* k, float* dx) {
  // Six coefficients per vector: at most two vectors per chunk fit the
  // registers beside the data.
  constexpr int kBack = kCols < 2 ? kCols : 2;
  WithAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    if (C * kGroup > 512) {
      // Rows of more than 64 channels: row by row, so that each tensor is
      // read as one stream (a group's rows as separate streams lost twice
      // over where the tensors come from memory rather than the cache).
      for (int64_t i = r0; i < r1; ++i) {
        const float* xr = x + i * C;
        const float* gr = g + i * gs;
        float* dr = dx + i * C;
        int64_t c = 0;
        for (; c + kW <= C; c += kW) {
          const V xv = Load(xr + c);
          const V v =
              Masked<A>(xv, Load(scale + c), Load(shift + c), Load(gr + c));
          Store(dr + c, Load(a + c) * v + Load(b + c) * (xv - Load(mean + c)) +
                            Load(k + c));
        }
        for (; c < C; ++c) {
          const float v = Masked<A>(xr[c], scale[c], shift[c], gr[c]);
          dr[c] = a[c] * v + b[c] * (xr[c] - mean[c]) + k[c];
        }
      }
      return;
    }
    for (int64_t q = r0; q < r1; q += kGroup) {
      const int64_t qend = Min(r1, q + kGroup);
      int64_t c = 0;
      for (; c + kBack * kW <= C; c += kBack * kW) {
        BackwardChunk<A, kBack>(g, gs, x, C, c, q, qend, scale, shift, mean, a,
                                b, k, dx);
      }
      for (; c + kW <= C; c += kW) {
        BackwardChunk<A, 1>(g, gs, x, C, c, q, qend, scale, shift, mean, a, b,
                            k, dx);
      }
      for (; c < C; ++c) {
        for (int64_t i = q; i < qend; ++i) {
          const float xv = x[i * C + c];
          const float v = Masked<A>(xv, scale[c], shift[c], g[i * gs + c]);
          dx[i * C + c] = a[c] * v + b[c] * (xv - mean[c]) + k[c];
        }
      }
    }
  });
}

// ---- NCHW runs: blocks of kRun values, two vectors at a time, then one,
// then single values (summed in double).

void StatsRun(const float* v, int64_t len, float pivot, double* t1,
              double* t2) {
  const V p = Splat(pivot);
  for (int64_t i = 0; i < len; i += kRun) {
    const int64_t end = Min(len, i + kRun);
    V a1 = Splat(0.0f), b1 = a1, a2 = a1, b2 = a1;
    int64_t j = i;
    for (; j + 2 * kW <= end; j += 2 * kW) {
      const V d = Load(v + j) - p;
      const V e = Load(v + j + kW) - p;
      a1 += d;
      b1 += e;
      a2 += d * d;
      b2 += e * e;
    }
    for (; j + kW <= end; j += kW) {
      const V d = Load(v + j) - p;
      a1 += d;
      a2 += d * d;
    }
    double s1 = SumLanes(a1 + b1), s2 = SumLanes(a2 + b2);
    for (; j < end; ++j) {
      const double d = v[j] - pivot;
      s1 += d;
      s2 += d * d;
    }
    *t1 += s1;
    *t2 += s2;
  }
}

void ReduceRun(BnActivation act, const float* g, const float* x, int64_t len,
               float scale, float shift, float mean, double* t1, double* t2) {
  WithAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    const V sc = Splat(scale), sh = Splat(shift), m = Splat(mean);
    for (int64_t i = 0; i < len; i += kRun) {
      const int64_t end = Min(len, i + kRun);
      V a1 = Splat(0.0f), b1 = a1, a2 = a1, b2 = a1;
      int64_t j = i;
      for (; j + 2 * kW <= end; j += 2 * kW) {
        const V xv = Load(x + j), xw = Load(x + j + kW);
        const V gp = Masked<A>(xv, sc, sh, Load(g + j));
        const V gq = Masked<A>(xw, sc, sh, Load(g + j + kW));
        a1 += gp;
        b1 += gq;
        a2 += gp * (xv - m);
        b2 += gq * (xw - m);
      }
      for (; j + kW <= end; j += kW) {
        const V xv = Load(x + j);
        const V gp = Masked<A>(xv, sc, sh, Load(g + j));
        a1 += gp;
        a2 += gp * (xv - m);
      }
      double s1 = SumLanes(a1 + b1), s2 = SumLanes(a2 + b2);
      for (; j < end; ++j) {
        const float gp = Masked<A>(x[j], scale, shift, g[j]);
        s1 += gp;
        s2 += static_cast<double>(gp * (x[j] - mean));
      }
      *t1 += s1;
      *t2 += s2;
    }
  });
}

void ApplyRun(BnActivation act, const float* x, int64_t len, float scale,
              float shift, float* y) {
  WithAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    const V sc = Splat(scale), sh = Splat(shift);
    int64_t j = 0;
    for (; j + kW <= len; j += kW) Store(y + j, Act<A>(Load(x + j) * sc + sh));
    for (; j < len; ++j) y[j] = Act<A>(x[j] * scale + shift);
  });
}

void BackwardRun(BnActivation act, const float* g, const float* x, int64_t len,
                 float scale, float shift, float mean, float a, float b,
                 float k, float* dx) {
  WithAct(act, [&](auto tag) {
    constexpr BnActivation A = decltype(tag)::value;
    const V sc = Splat(scale), sh = Splat(shift), m = Splat(mean);
    const V va = Splat(a), vb = Splat(b), vk = Splat(k);
    int64_t j = 0;
    for (; j + kW <= len; j += kW) {
      const V xv = Load(x + j);
      const V q = Masked<A>(xv, sc, sh, Load(g + j));
      Store(dx + j, va * q + vb * (xv - m) + vk);
    }
    for (; j < len; ++j) {
      const float q = Masked<A>(x[j], scale, shift, g[j]);
      dx[j] = a * q + b * (x[j] - mean) + k;
    }
  });
}

void AddRelu(const float* a, const float* b, int64_t len, float* y) {
  constexpr BnActivation A = BnActivation::kRelu;
  int64_t j = 0;
  for (; j + kW <= len; j += kW)
    Store(y + j, Act<A>(Load(a + j) + Load(b + j)));
  for (; j < len; ++j) y[j] = Act<A>(a[j] + b[j]);
}

}  // namespace

const BnRowKernels& SLIMTORCH_CONCAT(BnRows, SLIMTORCH_ISA)() {
  static const BnRowKernels kernels = {StatsRows,    ReduceRows,  ApplyRows,
                                       BackwardRows, StatsRun,    ReduceRun,
                                       ApplyRun,     BackwardRun, AddRelu};
  return kernels;
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
