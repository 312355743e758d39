#include "pool_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

// Planes per task: about 32K input floats.
int64_t Grain(const PoolShape& s) {
  return std::max<int64_t>(
      1, (int64_t{1} << 15) / std::max<int64_t>(s.height * s.width, 1));
}

// The window [begin, end) of output position o along an axis of `size`
// (rows; the columns' windows start at o * stride in the padded row).
inline void Window(int64_t o, int64_t stride, int64_t pad, int64_t kernel,
                   int64_t size, int64_t* begin, int64_t* end) {
  const int64_t start = o * stride - pad;
  *begin = std::max<int64_t>(start, 0);
  *end = std::min<int64_t>(start + kernel, size);
}

// One output row's working rows, per task: the column maxima over the
// window's rows (with the row each came from), then each window's maximum
// (with its row and column).
struct RowScratch {
  RowScratch(int64_t span, int64_t out_width)
      : col_max(span),
        col_row(span),
        out_max(out_width),
        out_row(out_width),
        out_col(out_width) {}
  std::vector<float> col_max;
  std::vector<int32_t> col_row;
  std::vector<float> out_max;
  std::vector<int32_t> out_row, out_col;
};

// The column maxima over rows [h0, h1) of plane `in`: the image's `cols`
// columns at pad_left, -inf around them (a padded position never wins, and
// its row, INT32_MAX, loses every tie).
inline void ColumnMaxima(const float* in, const PoolShape& s, int64_t cols,
                         int64_t h0, int64_t h1, RowScratch& r) {
  const float lowest = -std::numeric_limits<float>::infinity();
  const int32_t no_row = std::numeric_limits<int32_t>::max();
  std::fill(r.col_max.begin(), r.col_max.end(), lowest);
  std::fill(r.col_row.begin(), r.col_row.end(), no_row);
  float* cm = r.col_max.data() + s.pad_left;
  int32_t* cr = r.col_row.data() + s.pad_left;
  const float* first = in + h0 * s.width;
  const int32_t r0 = static_cast<int32_t>(h0);
  for (int64_t w = 0; w < cols; ++w) {
    cm[w] = first[w];
    cr[w] = r0;
  }
  for (int64_t h = h0 + 1; h < h1; ++h) {
    const float* row = in + h * s.width;
    const int32_t hh = static_cast<int32_t>(h);
    for (int64_t w = 0; w < cols; ++w) {
      const float v = row[w];
      const float m = cm[w];
      // Strictly greater keeps the first row; a NaN wins and stays.
      const bool take = !(v <= m) & (m == m);
      cm[w] = take ? v : m;
      cr[w] = take ? hh : cr[w];
    }
  }
}

// Every window's maximum over the column maxima, all windows of the row at
// once, with the row and the (padded) column it came from.
inline void WindowMaxima(const PoolShape& s, RowScratch& r) {
  const float* all = r.col_max.data();
  const int32_t* all_rows = r.col_row.data();
  float* om = r.out_max.data();
  int32_t* orow = r.out_row.data();
  int32_t* ocol = r.out_col.data();
  const int64_t st = s.stride;
  for (int64_t ow = 0; ow < s.out_width; ++ow) {
    om[ow] = all[ow * st];
    orow[ow] = all_rows[ow * st];
    ocol[ow] = static_cast<int32_t>(ow * st);
  }
  for (int64_t j = 1; j < s.kernel; ++j) {
    for (int64_t ow = 0; ow < s.out_width; ++ow) {
      const float v = all[ow * st + j];
      const int32_t vr = all_rows[ow * st + j];
      const float m = om[ow];
      const int32_t r = orow[ow];
      // Row-major first maximum: a later column wins a tie only from
      // an earlier row.
      const bool take = (v > m) | ((v == m) & (vr < r)) | ((v != v) & (m == m));
      om[ow] = take ? v : m;
      orow[ow] = take ? vr : r;
      ocol[ow] = take ? static_cast<int32_t>(ow * st + j) : ocol[ow];
    }
  }
}

// The row's maxima into `out` and their positions in the plane into `arg`.
inline void StoreRow(const PoolShape& s, const RowScratch& r, float* out,
                     int32_t* arg) {
  const int32_t width = static_cast<int32_t>(s.width);
  const int32_t left = static_cast<int32_t>(s.pad_left);
  for (int64_t ow = 0; ow < s.out_width; ++ow) {
    out[ow] = r.out_max[ow];
    arg[ow] = r.out_row[ow] * width + (r.out_col[ow] - left);
  }
}

}  // namespace

void MaxPoolForwardCpu(const float* x, float* y, int32_t* argmax,
                       const PoolShape& s) {
  const int64_t hw = s.height * s.width;
  const int64_t ohw = s.out_height * s.out_width;
  // Columns covering every window of an output row, the first window
  // starting at 0 (ColumnMaxima places the image's at pad_left).
  const int64_t span = (s.out_width - 1) * s.stride + s.kernel;
  const int64_t cols =
      std::max<int64_t>(0, std::min<int64_t>(s.width, span - s.pad_left));
  at::parallel_for(0, s.planes, Grain(s), [&](int64_t b, int64_t e) {
    // Per output row, without a branch on the data (the winner is a coin
    // toss on real data, and mispredicted branches cost more than the
    // window; selects vectorize): the column maxima over the window's
    // rows and the row each came from, then the maxima over each window's
    // columns, all windows of the row at once.
    RowScratch r(span, s.out_width);
    for (int64_t p = b; p < e; ++p) {
      const float* in = x + p * hw;
      for (int64_t oh = 0; oh < s.out_height; ++oh) {
        int64_t h0, h1;
        Window(oh, s.stride, s.pad_top, s.kernel, s.height, &h0, &h1);
        ColumnMaxima(in, s, cols, h0, h1, r);
        WindowMaxima(s, r);
        StoreRow(s, r, y + p * ohw + oh * s.out_width,
                 argmax + p * ohw + oh * s.out_width);
      }
    }
  });
}

void MaxPoolBackwardCpu(const float* g, const int32_t* argmax, float* dx,
                        const PoolShape& s) {
  const int64_t hw = s.height * s.width;
  const int64_t ohw = s.out_height * s.out_width;
  at::parallel_for(0, s.planes, Grain(s), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      float* d = dx + p * hw;
      std::memset(d, 0, sizeof(float) * hw);
      const float* gp = g + p * ohw;
      const int32_t* ap = argmax + p * ohw;
      for (int64_t i = 0; i < ohw; ++i) d[ap[i]] += gp[i];
    }
  });
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
