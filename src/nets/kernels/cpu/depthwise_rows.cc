// The depthwise convolution's inner loops (depthwise_rows.h), compiled once
// per instruction set: SLIMTORCH_ISA names the table's entry point
// (Baseline, Avx2, Avx512), SLIMTORCH_ISA_WIDTH the floats of one vector
// register and SLIMTORCH_ISA_COLS how many vectors of channels a loop
// keeps in registers. Written on GCC's vector extension at that width; a
// channel count that is not a multiple of the width ends with one vector
// over the last channels, which overlaps the block before it and stores
// the same values there again. Fewer channels than one vector run a lane
// at a time. Every value is summed in the same order at every width, and
// the build compiles this file without FMA contraction, so the variants
// give the same bits.
//
// Everything but the entry point has internal linkage (see
// batch_norm_rows.cc: nothing compiled for a wider instruction set may be
// picked by the linker for another variant).

#include "depthwise_rows.h"

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

// The AVX2 and AVX-512 variants multiply-add in one rounding (FMA: every
// CPU with AVX2 has it, see cpu_isa.cc), which halves the arithmetic of
// these loops; the baseline (SSE2) has no FMA and rounds twice.
#if SLIMTORCH_ISA_WIDTH >= 8
#pragma GCC target("fma")
#pragma GCC optimize("fp-contract=fast")
#endif

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

constexpr int kW = SLIMTORCH_ISA_WIDTH;  // floats per vector
constexpr int kCols = SLIMTORCH_ISA_COLS;
constexpr int64_t kMaxK = kDepthwiseMaxKernel;

typedef float V __attribute__((vector_size(SLIMTORCH_ISA_WIDTH * 4)));

// The lane types: V (kW channels) or float (one).
template <typename T>
constexpr int kLanes = sizeof(T) / sizeof(float);

template <typename T>
inline T Load(const float* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
inline void Store(float* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

inline int64_t Max(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// Runs op.Run<T, cols>(c) over blocks of channels covering [0, C): blocks
// of kCols vectors, then single vectors, then one vector ending at C (it
// overlaps the block before); lane by lane when C < kW.
template <typename Op>
void ForChannelBlocks(int64_t C, const Op& op) {
  int64_t c = 0;
  if (C < kW) {
    for (; c < C; ++c) op.template Run<float, 1>(c);
    return;
  }
  for (; c + kW * kCols <= C; c += kW * kCols) op.template Run<V, kCols>(c);
  for (; c + kW <= C; c += kW) op.template Run<V, 1>(c);
  if (c < C) op.template Run<V, 1>(C - kW);
}

// The taps of one input row or column that an output position reaches:
// for output coordinate o, taps [lo, hi) land inside the input.
struct TapRange {
  int64_t lo, hi;
};

inline TapRange Taps(int64_t o, int64_t stride, int64_t pad, int64_t k,
                     int64_t in) {
  const int64_t i0 = o * stride - pad;
  return {Max(0, -i0), Min(k, in - i0)};
}

// Output positions summed side by side by a loop over Cols vectors of
// channels: enough independent sums to hide the adds' latency (each sum
// is a chain of dependent adds: no FMA contraction, see above).
template <int Cols>
constexpr int kPositions = Cols >= 4 ? 2 : (Cols == 2 ? 4 : 8);

// out[q][c] = sum over the taps (kh in [lo, hi), every kw) of
// in[row(kh)][col(q, kw)] * w[kh][kw], for P adjacent positions q whose
// taps all land inside the row: the same order of adds as one position
// at a time.
template <typename T, int Cols, int P>
inline void SumInteriorPositions(const float* const* in_rows,
                                 const float* const* w_rows, int64_t taps_h,
                                 int64_t KW, int64_t C, const int64_t* col0,
                                 int64_t col_step, float* out, int64_t c) {
  constexpr int L = kLanes<T>;
  T acc[P][Cols] = {};
  for (int64_t r = 0; r < taps_h; ++r) {
    for (int64_t kw = 0; kw < KW; ++kw) {
      T wv[Cols];
      for (int j = 0; j < Cols; ++j) wv[j] = Load<T>(w_rows[r] + kw * C + c + j * L);
      for (int q = 0; q < P; ++q) {
        const float* ip = in_rows[r] + (col0[q] + kw * col_step) * C + c;
        for (int j = 0; j < Cols; ++j) {
          acc[q][j] = acc[q][j] + Load<T>(ip + j * L) * wv[j];
        }
      }
    }
  }
  for (int q = 0; q < P; ++q) {
    for (int j = 0; j < Cols; ++j) Store<T>(out + q * C + c + j * L, acc[q][j]);
  }
}

// The taps (k) and output coordinates (o) that reach input coordinate i,
// in ascending k; returns how many.
inline int64_t ReachingTaps(int64_t i, int64_t stride, int64_t pad,
                            int64_t k, int64_t out, int64_t* taps,
                            int64_t* outs) {
  int64_t count = 0;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t p = i + pad - t;
    if (p < 0 || p % stride != 0 || p / stride >= out) continue;
    taps[count] = t;
    outs[count] = p / stride;
    ++count;
  }
  return count;
}

struct BackwardDataRowOp {
  const DepthwiseShape& s;
  const float* g;
  const float* w;
  int64_t n_rows;  // taps reaching this input row
  const int64_t* row_taps;
  const int64_t* row_outs;
  float* dx;

  template <typename T, int Cols>
  void Run(int64_t c) const {
    constexpr int L = kLanes<T>;
    constexpr int P = kPositions<Cols>;
    const int64_t C = s.channels, KW = s.kernel_w;
    const float* g_rows[kMaxK];
    const float* w_rows[kMaxK];
    for (int64_t r = 0; r < n_rows; ++r) {
      g_rows[r] = g + row_outs[r] * s.out_w * C;
      w_rows[r] = w + row_taps[r] * KW * C;
    }
    int64_t col_taps[kMaxK], col_outs[kMaxK];
    int64_t iw = 0;
    while (iw < s.in_w) {
      // Stride 1: input column iw gets tap kw from output column
      // iw + pad_left - kw; inside the output for every kw and all P
      // columns, the sums run side by side (kw ascending, as below).
      const int64_t o0 = iw + s.pad_left;
      if (s.stride == 1 && iw + P <= s.in_w && o0 - (KW - 1) >= 0 &&
          o0 + P - 1 < s.out_w) {
        int64_t col0[P];
        for (int q = 0; q < P; ++q) col0[q] = o0 + q;
        SumInteriorPositions<T, Cols, P>(g_rows, w_rows, n_rows, KW, C, col0,
                                         -1, dx + iw * C, c);
        iw += P;
        continue;
      }
      const int64_t n_cols = ReachingTaps(iw, s.stride, s.pad_left, KW,
                                          s.out_w, col_taps, col_outs);
      T acc[Cols] = {};
      for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t q = 0; q < n_cols; ++q) {
          const float* gp = g_rows[r] + col_outs[q] * C + c;
          const float* wp = w_rows[r] + col_taps[q] * C + c;
          for (int j = 0; j < Cols; ++j) {
            acc[j] = acc[j] + Load<T>(gp + j * L) * Load<T>(wp + j * L);
          }
        }
      }
      float* dp = dx + iw * C + c;
      for (int j = 0; j < Cols; ++j) Store<T>(dp + j * L, acc[j]);
      ++iw;
    }
  }
};

// The weights' gradient of one channel block, one filter row kh at a time
// with the row's KW sums of VB vectors in registers (KW fixed at compile
// time for the common filters, else kMaxK slots): KW * VB independent
// sums.
template <int KWc>
struct BackwardWeightsOp {
  const DepthwiseShape& s;
  const float* x;
  const float* g;
  float* dw;

  // Vectors per pass: about 12 sums in flight, within the registers.
  static constexpr int kGroup = KWc == 0 ? 1 : (KWc <= 3 ? 4 : (KWc <= 5 ? 2 : 1));

  template <typename T, int Cols>
  void Run(int64_t c) const {
    constexpr int VB = Cols < kGroup ? Cols : kGroup;
    static_assert(Cols % VB == 0, "Cols is 1 or a multiple of the group");
    for (int j = 0; j < Cols; j += VB) RunGroup<T, VB>(c + j * kLanes<T>);
  }

  template <typename T, int VB>
  void RunGroup(int64_t c) const {
    constexpr int L = kLanes<T>;
    const int64_t C = s.channels;
    const int64_t KW = KWc > 0 ? KWc : s.kernel_w;
    constexpr int kSlots = KWc > 0 ? KWc : kMaxK;
    // The output columns whose taps all land inside the input.
    int64_t ow_lo = 0;
    while (ow_lo < s.out_w && ow_lo * s.stride - s.pad_left < 0) ++ow_lo;
    int64_t ow_hi = s.out_w;
    while (ow_hi > ow_lo &&
           (ow_hi - 1) * s.stride - s.pad_left + KW > s.in_w) {
      --ow_hi;
    }
    for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
      T acc[kSlots][VB] = {};
      for (int64_t oh = 0; oh < s.out_h; ++oh) {
        const int64_t ih = oh * s.stride - s.pad_top + kh;
        if (ih < 0 || ih >= s.in_h) continue;
        const float* xr = x + ih * s.in_w * C + c;
        const float* gr = g + oh * s.out_w * C + c;
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          T gv[VB];
          for (int j = 0; j < VB; ++j) gv[j] = Load<T>(gr + ow * C + j * L);
          const int64_t iw0 = ow * s.stride - s.pad_left;
          const bool inside = ow >= ow_lo && ow < ow_hi;
          const TapRange cols =
              inside ? TapRange{0, KW}
                     : Taps(ow, s.stride, s.pad_left, KW, s.in_w);
          for (int64_t kw = cols.lo; kw < cols.hi; ++kw) {
            const float* xp = xr + (iw0 + kw) * C;
            for (int j = 0; j < VB; ++j) {
              acc[kw][j] = acc[kw][j] + gv[j] * Load<T>(xp + j * L);
            }
          }
        }
      }
      for (int64_t kw = 0; kw < KW; ++kw) {
        for (int j = 0; j < VB; ++j) {
          Store<T>(dw + (kh * KW + kw) * C + c + j * L, acc[kw][j]);
        }
      }
    }
  }
};

void BackwardDataRow(const DepthwiseShape& s, const float* g, const float* w,
                     int64_t ih, float* dx) {
  int64_t row_taps[kMaxK], row_outs[kMaxK];
  const int64_t n_rows = ReachingTaps(ih, s.stride, s.pad_top, s.kernel_h,
                                      s.out_h, row_taps, row_outs);
  ForChannelBlocks(s.channels,
                   BackwardDataRowOp{s, g, w, n_rows, row_taps, row_outs, dx});
}

void BackwardWeights(const DepthwiseShape& s, const float* x, const float* g,
                     float* dw) {
  switch (s.kernel_w) {
    case 3:
      ForChannelBlocks(s.channels, BackwardWeightsOp<3>{s, x, g, dw});
      break;
    case 5:
      ForChannelBlocks(s.channels, BackwardWeightsOp<5>{s, x, g, dw});
      break;
    case 7:
      ForChannelBlocks(s.channels, BackwardWeightsOp<7>{s, x, g, dw});
      break;
    default:
      ForChannelBlocks(s.channels, BackwardWeightsOp<0>{s, x, g, dw});
  }
}

}  // namespace

const DepthwiseRowKernels& SLIMTORCH_CONCAT(DepthwiseRows, SLIMTORCH_ISA)() {
  static const DepthwiseRowKernels kernels = {BackwardDataRow,
                                              BackwardWeights};
  return kernels;
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
