#include "fake_quant_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

// About this many values per task.
constexpr int64_t kTaskValues = int64_t{1} << 15;

int64_t RowCount(const FakeQuantLayout& l) {
  return (l.numel + l.row_length - 1) / l.row_length;
}

// floor for the values the kernel takes it of (|v| <= 2^16 + 1, never
// -0): truncation through int32 vectorizes where std::floor does not
// (SSE2 has no rounding instruction). NaN stays NaN.
inline float Floor(float v) {
  const bool nan = v != v;
  const float t = static_cast<float>(static_cast<int32_t>(nan ? 0.0f : v));
  const float f = t > v ? t - 1.0f : t;
  return nan ? v : f;
}

template <bool kPerChannel>
void QuantizeRow(const float* x, float* y, int64_t n, const FakeQuantGrid& g) {
  if (g.zero_range) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  const float lo = g.nudged_min, hi = g.nudged_max, scale = g.scale,
              inv = g.inv_scale, qz = g.quant_zero;
  for (int64_t i = 0; i < n; ++i) {
    // Eigen's cwiseMin(hi) then cwiseMax(lo).
    float v = hi < x[i] ? hi : x[i];
    v = v < lo ? lo : v;
    v -= lo;
    v = kPerChannel ? v * inv : v / scale;
    v -= qz;
    v += 0.5f;
    y[i] = Floor(v) * scale;
  }
}

// dx for one row, and (when `below` is not null) the sums of dy below and
// above the range, in double, into *below and *above. Two loops: the
// first vectorizes, the sums (in order) do not.
void GradientRow(const float* x, const float* dy, float* dx, int64_t n,
                 const FakeQuantGrid& g, double* below, double* above) {
  if (g.zero_range) {
    std::copy(dy, dy + n, dx);
    return;
  }
  const float lo = g.nudged_min, hi = g.nudged_max;
  for (int64_t i = 0; i < n; ++i) {
    // TensorFlow multiplies by 1 or 0 (so -0 for a negative dy outside).
    dx[i] = dy[i] * (x[i] >= lo && x[i] <= hi ? 1.0f : 0.0f);
  }
  if (below == nullptr) return;
  double sum_below = 0.0, sum_above = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] < lo) sum_below += dy[i];
    if (x[i] > hi) sum_above += dy[i];
  }
  *below = sum_below;
  *above = sum_above;
}

int64_t Grain(const FakeQuantLayout& l) {
  return std::max<int64_t>(1, kTaskValues / l.row_length);
}

}  // namespace

void FakeQuantForwardCpu(const float* x, float* y, const FakeQuantGrid* grids,
                         const FakeQuantLayout& l) {
  at::parallel_for(0, RowCount(l), Grain(l), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t begin = r * l.row_length;
      const int64_t n = std::min(l.row_length, l.numel - begin);
      const FakeQuantGrid& g = grids[r % l.channels];
      if (l.per_channel) {
        QuantizeRow<true>(x + begin, y + begin, n, g);
      } else {
        QuantizeRow<false>(x + begin, y + begin, n, g);
      }
    }
  });
}

void FakeQuantBackwardCpu(const float* x, const float* dy, float* dx,
                          float* dmin, float* dmax, const FakeQuantGrid* grids,
                          const FakeQuantLayout& l) {
  const int64_t rows = RowCount(l);
  std::vector<double> below(rows, 0.0), above(rows, 0.0);
  at::parallel_for(0, rows, Grain(l), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t begin = r * l.row_length;
      const int64_t n = std::min(l.row_length, l.numel - begin);
      const bool sums = dmin != nullptr || dmax != nullptr;
      GradientRow(x + begin, dy + begin, dx + begin, n,
                  grids[r % l.channels], sums ? &below[r] : nullptr,
                  &above[r]);
    }
  });
  std::vector<double> sum_below(l.channels, 0.0), sum_above(l.channels, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    sum_below[r % l.channels] += below[r];
    sum_above[r % l.channels] += above[r];
  }
  for (int64_t c = 0; c < l.channels; ++c) {
    if (dmin) dmin[c] = static_cast<float>(sum_below[c]);
    if (dmax) dmax[c] = static_cast<float>(sum_above[c]);
  }
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
