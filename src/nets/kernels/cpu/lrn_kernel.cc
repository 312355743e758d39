#include "lrn_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

// Layout: for one image the C values of a position p lie HW apart, and a
// run of positions [p0, p0 + len) is contiguous in every channel. The
// kernels work on such runs ("segments", at most kSegment positions) with
// per-channel scratch rows that stay in L1/L2. Window sums are summed
// directly (2r + 1 terms, in float like TensorFlow), so nothing drifts, and
// every inner loop is a straight vectorizable pass over a row.
constexpr int64_t kSegment = 64;

enum class Beta { kThreeQuarters, kHalf, kOne, kOther };

Beta ClassifyBeta(double beta) {
  if (beta == 0.75) return Beta::kThreeQuarters;
  if (beta == 0.5) return Beta::kHalf;
  if (beta == 1.0) return Beta::kOne;
  return Beta::kOther;
}

// s^-beta for s > 0; the common betas without pow (as TensorFlow does).
template <Beta B>
inline float NegPow(float s, float beta) {
  if constexpr (B == Beta::kThreeQuarters) {
    const float r = std::sqrt(s);
    return 1.0f / (r * std::sqrt(r));
  } else if constexpr (B == Beta::kHalf) {
    return 1.0f / std::sqrt(s);
  } else if constexpr (B == Beta::kOne) {
    return 1.0f / s;
  } else {
    return std::pow(s, -beta);
  }
}

template <typename F>
void DispatchBeta(double beta, F&& f) {
  switch (ClassifyBeta(beta)) {
    case Beta::kThreeQuarters:
      return f(std::integral_constant<Beta, Beta::kThreeQuarters>());
    case Beta::kHalf:
      return f(std::integral_constant<Beta, Beta::kHalf>());
    case Beta::kOne:
      return f(std::integral_constant<Beta, Beta::kOne>());
    case Beta::kOther:
      return f(std::integral_constant<Beta, Beta::kOther>());
  }
}

// Calls segment(offset, len) for the runs of positions of [begin, end)
// (flat n * hw + p) that stay inside one image; offset is the element
// offset of (n, 0, p).
template <typename Segment>
inline void ForEachSegment(int64_t begin, int64_t end, int64_t channels,
                           int64_t hw, Segment&& segment) {
  int64_t pos = begin;
  while (pos < end) {
    const int64_t n = pos / hw;
    const int64_t p = pos % hw;
    const int64_t len = std::min({end - pos, hw - p, kSegment});
    segment(n * channels * hw + p, len);
    pos += len;
  }
}

// out[i] = sum of rows[c'][i] for c' in [c - r, c + r] ∩ [0, C).
inline void WindowSum(const float* rows, int64_t channels, int64_t c,
                      int64_t radius, int64_t len, float* out) {
  const int64_t lo = std::max<int64_t>(0, c - radius);
  const int64_t hi = std::min<int64_t>(channels - 1, c + radius);
  const float* first = rows + lo * kSegment;
  for (int64_t i = 0; i < len; ++i) out[i] = first[i];
  for (int64_t k = lo + 1; k <= hi; ++k) {
    const float* row = rows + k * kSegment;
    for (int64_t i = 0; i < len; ++i) out[i] += row[i];
  }
}

// y[i] = x[i] * (bias + alpha * sum[i])^-beta.
template <Beta B>
inline void ScaleRow(const float* __restrict__ x, const float* __restrict__ sum,
                     float* __restrict__ y, int64_t len, float bias,
                     float alpha, float beta) {
  for (int64_t i = 0; i < len; ++i) {
    y[i] = x[i] * NegPow<B>(bias + alpha * sum[i], beta);
  }
}

// With s = bias + alpha * pw[i] (pw holds the window sum on entry):
// pw[i] = s^-beta and t[i] = g[i] * x[i] * s^-beta / s.
template <Beta B>
inline void GradientTerms(const float* __restrict__ x,
                          const float* __restrict__ g, float* __restrict__ pw,
                          float* __restrict__ t, int64_t len, float bias,
                          float alpha, float beta) {
  for (int64_t i = 0; i < len; ++i) {
    const float s = bias + alpha * pw[i];
    const float p = NegPow<B>(s, beta);
    pw[i] = p;
    t[i] = g[i] * x[i] * p / s;
  }
}

// dx[i] = g[i] * pw[i] + coeff * x[i] * sum[i].
inline void CombineRow(const float* __restrict__ x, const float* __restrict__ g,
                       const float* __restrict__ pw,
                       const float* __restrict__ sum, float* __restrict__ dx,
                       int64_t len, float coeff) {
  for (int64_t i = 0; i < len; ++i) dx[i] = g[i] * pw[i] + coeff * x[i] * sum[i];
}

int64_t Grain(int64_t channels) {
  return std::max<int64_t>(kSegment,
                           (int64_t{1} << 15) / std::max<int64_t>(channels, 1));
}

template <Beta B>
void Forward(const float* x, float* y, int64_t n, int64_t channels,
             int64_t hw, const LrnParams& prm) {
  const float bias = static_cast<float>(prm.bias);
  const float alpha = static_cast<float>(prm.alpha);
  const float beta = static_cast<float>(prm.beta);
  at::parallel_for(0, n * hw, Grain(channels), [&](int64_t b, int64_t e) {
    std::vector<float> sq(channels * kSegment);
    float sum[kSegment];
    ForEachSegment(b, e, channels, hw, [&](int64_t off, int64_t len) {
      for (int64_t c = 0; c < channels; ++c) {
        const float* xc = x + off + c * hw;
        float* sc = sq.data() + c * kSegment;
        for (int64_t i = 0; i < len; ++i) sc[i] = xc[i] * xc[i];
      }
      for (int64_t c = 0; c < channels; ++c) {
        WindowSum(sq.data(), channels, c, prm.radius, len, sum);
        ScaleRow<B>(x + off + c * hw, sum, y + off + c * hw, len, bias, alpha,
                    beta);
      }
    });
  });
}

// TensorFlow's LRN gradient. With N_c = bias + alpha * sqr_sum_c:
//   dx_j = g_j * N_j^-beta
//          - 2 * alpha * beta * x_j * sum_{c in window(j)} g_c x_c N_c^-beta / N_c
// (the window is symmetric, so c in window(j) iff j in window(c)).
template <Beta B>
void Backward(const float* x, const float* g, float* dx, int64_t n,
              int64_t channels, int64_t hw, const LrnParams& prm) {
  const float bias = static_cast<float>(prm.bias);
  const float alpha = static_cast<float>(prm.alpha);
  const float beta = static_cast<float>(prm.beta);
  const float coeff = static_cast<float>(-2.0 * prm.alpha * prm.beta);
  at::parallel_for(0, n * hw, Grain(channels), [&](int64_t b, int64_t e) {
    // Per channel: x^2, then N^-beta; and t = g * x * N^-beta / N.
    std::vector<float> pw(channels * kSegment);
    std::vector<float> t(channels * kSegment);
    float sum[kSegment];
    ForEachSegment(b, e, channels, hw, [&](int64_t off, int64_t len) {
      for (int64_t c = 0; c < channels; ++c) {
        const float* xc = x + off + c * hw;
        float* tc = t.data() + c * kSegment;
        for (int64_t i = 0; i < len; ++i) tc[i] = xc[i] * xc[i];
      }
      for (int64_t c = 0; c < channels; ++c) {
        WindowSum(t.data(), channels, c, prm.radius, len,
                  pw.data() + c * kSegment);
      }
      for (int64_t c = 0; c < channels; ++c) {
        GradientTerms<B>(x + off + c * hw, g + off + c * hw,
                         pw.data() + c * kSegment, t.data() + c * kSegment, len,
                         bias, alpha, beta);
      }
      for (int64_t c = 0; c < channels; ++c) {
        WindowSum(t.data(), channels, c, prm.radius, len, sum);
        CombineRow(x + off + c * hw, g + off + c * hw, pw.data() + c * kSegment,
                   sum, dx + off + c * hw, len, coeff);
      }
    });
  });
}

}  // namespace

void LrnForwardCpu(const float* x, float* y, int64_t n, int64_t channels,
                   int64_t hw, const LrnParams& params) {
  DispatchBeta(params.beta, [&](auto kind) {
    Forward<decltype(kind)::value>(x, y, n, channels, hw, params);
  });
}

void LrnBackwardCpu(const float* x, const float* g, float* dx, int64_t n,
                    int64_t channels, int64_t hw, const LrnParams& params) {
  DispatchBeta(params.beta, [&](auto kind) {
    Backward<decltype(kind)::value>(x, g, dx, n, channels, hw, params);
  });
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
