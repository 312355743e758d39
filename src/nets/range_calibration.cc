#include "slimtorch/nets/range_calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

// Mirrors onnxruntime 1.32.0's onnxruntime/quantization/calibrate.py
// (MinMaxCalibrater, HistogramCollector) and the numpy 2.4 routines it calls
// (histogram, linspace, arange, cumsum, searchsorted), including their
// float32 arithmetic: the bin edges are float32 values computed as numpy
// computes them, so the same data gives the same bins and thresholds.

namespace slimtorch {
namespace nets {
namespace {

// A float32 result rounded once: keeps a * b + c two roundings where the
// compiler could fuse them (FMA targets), as numpy computes them.
inline float F32(float v) {
  volatile float rounded = v;
  return rounded;
}
inline double F64(double v) {
  volatile double rounded = v;
  return rounded;
}

// np.linspace(first, last, n + 1, dtype=float32) with float32 endpoints:
// numpy computes it in float32, i * step + first, the last edge set to
// `last`.
std::vector<float> LinspaceEdges(float first, float last, int64_t n) {
  std::vector<float> edges(n + 1);
  const float delta = F32(last - first);
  const float step = F32(delta / static_cast<float>(n));
  for (int64_t i = 0; i <= n; ++i) {
    const float fi = static_cast<float>(i);
    // numpy's denormal branch (step == 0): i / n * delta.
    edges[i] = step == 0.0f
                   ? F32(F32(F32(fi / static_cast<float>(n)) * delta) + first)
                   : F32(F32(fi * step) + first);
  }
  edges[n] = last;
  return edges;
}

// np.histogram(values, n, range=(first, last)) for float32 values and
// float32 range ends, first < last: values outside the range are dropped,
// the last bin includes `last`. The bin is estimated in float32 as numpy
// does and corrected by one against the edges, as numpy does.
std::vector<int64_t> UniformHistogram(c10::ArrayRef<float> values, int64_t n,
                                      float first, float last,
                                      std::vector<float>* edges_out) {
  std::vector<float> edges = LinspaceEdges(first, last, n);
  std::vector<int64_t> counts(n, 0);
  const float denom = F32(last - first);
  const float bins = static_cast<float>(n);
  for (float x : values) {
    if (!(x >= first && x <= last)) continue;
    int64_t i = static_cast<int64_t>(F32(F32(F32(x - first) / denom) * bins));
    if (i == n) --i;
    if (x < edges[i]) --i;
    if (x >= edges[i + 1] && i != n - 1) ++i;
    ++counts[i];
  }
  if (edges_out != nullptr) *edges_out = std::move(edges);
  return counts;
}

// The same with numpy's own handling of a zero-width range (+-0.5).
std::vector<int64_t> UniformHistogramOrUnit(c10::ArrayRef<float> values,
                                            int64_t n, float first, float last,
                                            std::vector<float>* edges_out) {
  if (first == last) {
    first = F32(first - 0.5f);
    last = F32(last + 0.5f);
  }
  return UniformHistogram(values, n, first, last, edges_out);
}

// np.histogram(values, bins=edges) for explicit (float64) edges: bin i
// holds edges[i] <= x < edges[i + 1], the last bin also x == edges.back(),
// values outside [edges.front(), edges.back()] are dropped.
std::vector<int64_t> EdgesHistogram(c10::ArrayRef<float> values,
                                    const std::vector<double>& edges) {
  const int64_t n = static_cast<int64_t>(edges.size()) - 1;
  std::vector<int64_t> counts(n, 0);
  for (float x : values) {
    const double v = x;
    if (!(v >= edges.front() && v <= edges.back())) continue;
    int64_t i =
        std::upper_bound(edges.begin(), edges.end(), v) - edges.begin() - 1;
    if (i == n) --i;
    ++counts[i];
  }
  return counts;
}

// np.arange(start, stop, step) for float32 scalars: numpy returns float64,
// its length ceil((stop - start) / step) computed in float32, its second
// value start + step in float32, then start + i * (second - start) in
// float64.
std::vector<double> ArangeFloat32(float start, float stop, float step) {
  const float length = std::ceil(F32(F32(stop - start) / step));
  std::vector<double> values;
  if (!(length > 0.0f)) return values;
  const double delta =
      static_cast<double>(F32(start + step)) - static_cast<double>(start);
  values.resize(static_cast<size_t>(length));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] =
        static_cast<double>(start) + F64(static_cast<double>(i) * delta);
  }
  return values;
}

// numpy's float32 floor division (npy_divmodf): floor of the exact
// quotient, computed through fmod.
float FloorDivide(float a, float b) {
  const float mod = std::fmod(a, b);
  float div = F32(F32(a - mod) / b);
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div = F32(div - 1.0f);
  if (div == 0.0f) return std::copysign(0.0f, F32(a / b));
  float floordiv = std::floor(div);
  if (F32(div - floordiv) > 0.5f) floordiv = F32(floordiv + 1.0f);
  return floordiv;
}

std::pair<float, float> MinMaxOf(c10::ArrayRef<float> values) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return {*lo, *hi};
}

void AddInto(const std::vector<int64_t>& from, size_t offset,
             std::vector<int64_t>* to) {
  for (size_t i = 0; i < from.size(); ++i) (*to)[offset + i] += from[i];
}

// Clips a threshold pair to the observed values, as onnxruntime does last.
std::pair<float, float> ClipToObserved(std::pair<float, float> range,
                                       const CalibrationHistogram& h) {
  if (range.first < h.min) range.first = h.min;
  if (range.second > h.max) range.second = h.max;
  return range;
}

// smooth_distribution (quant_utils.py) in float32: zero bins become eps,
// the others lose eps * zeros / nonzeros. Empty when every bin is 0 (or
// when onnxruntime's assertion eps1 < 1 would fail).
std::vector<float> SmoothDistribution(const std::vector<int64_t>& p) {
  constexpr double kEps = 0.0001;
  const int64_t zeros = std::count(p.begin(), p.end(), int64_t{0});
  const int64_t nonzeros = static_cast<int64_t>(p.size()) - zeros;
  if (nonzeros == 0) return {};
  const double eps1 =
      kEps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
  if (eps1 >= 1.0) return {};
  const float eps_f = static_cast<float>(kEps);
  const float minus_eps1 = static_cast<float>(-eps1);
  std::vector<float> smoothed(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    smoothed[i] =
        p[i] == 0 ? eps_f : F32(static_cast<float>(p[i]) + minus_eps1);
  }
  return smoothed;
}

// np.sum of a float32 array as numpy computes it: pairwise, blocks of up to
// 128 values summed with 8 accumulators (numpy's FLOAT_pairwise_sum; the
// same bits as np.sum for the sizes here, up to numpy's 8192-value buffer).
float PairwiseSum(const float* a, int64_t n) {
  if (n < 8) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum = F32(sum + a[i]);
    return sum;
  }
  if (n <= 128) {
    float r[8];
    std::copy(a, a + 8, r);
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] = F32(r[j] + a[i + j]);
    }
    float sum = F32(F32(F32(r[0] + r[1]) + F32(r[2] + r[3])) +
                    F32(F32(r[4] + r[5]) + F32(r[6] + r[7])));
    for (; i < n; ++i) sum = F32(sum + a[i]);
    return sum;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return F32(PairwiseSum(a, half) + PairwiseSum(a + half, n - half));
}

// entropy(p, q) of calibrate.py (scipy's KL divergence) in float32: both
// normalized by their np.sum, sum of p * log(p / q), infinite where p or q
// is not positive. The candidates' divergences can differ in the last
// float32 bits only, so the float32 steps decide which one wins; logf may
// differ from numpy's SIMD log by an ulp per term, far below the sum's
// rounding.
float KlDivergence(const std::vector<float>& p, const std::vector<float>& q) {
  const int64_t n = static_cast<int64_t>(p.size());
  const float p_sum = PairwiseSum(p.data(), n);
  const float q_sum = PairwiseSum(q.data(), n);
  std::vector<float> terms(n);
  for (int64_t i = 0; i < n; ++i) {
    const float pi = F32(p[i] / p_sum);
    const float qi = F32(q[i] / q_sum);
    if (!(pi > 0.0f && qi > 0.0f))
      return std::numeric_limits<float>::infinity();
    terms[i] = F32(pi * std::log(F32(pi / qi)));
  }
  return PairwiseSum(terms.data(), n);
}

// One candidate of get_entropy_threshold: the bins [start, end) as p (the
// outliers added to its end bins) against their `levels`-bin quantized
// version q, expanded back over p's non-empty bins.
float CandidateDivergence(const std::vector<int64_t>& hist,
                          const std::vector<int64_t>& prefix, int64_t start,
                          int64_t end, int64_t levels) {
  const int64_t size = end - start;
  std::vector<int64_t> p(hist.begin() + start, hist.begin() + end);
  p.front() += prefix[start];
  p.back() += prefix.back() - prefix[end];
  const int64_t merged = size / levels;
  std::vector<int64_t> quantized(levels, 0);
  for (int64_t k = 0; k < levels; ++k) {
    quantized[k] =
        prefix[start + (k + 1) * merged] - prefix[start + k * merged];
  }
  quantized.back() += prefix[end] - prefix[start + levels * merged];
  // q spreads each level over the bins of its group where p is non-empty
  // (onnxruntime truncates the share to an integer and writes it to every
  // bin of the group, empty ones included; bins past levels * merged stay
  // 0).
  std::vector<int64_t> q(size, 0);
  for (int64_t k = 0; k < levels; ++k) {
    const int64_t g0 = k * merged;
    const int64_t nonzero =
        std::count_if(p.begin() + g0, p.begin() + g0 + merged,
                      [](int64_t v) { return v != 0; });
    if (nonzero == 0) continue;
    const auto share = static_cast<int64_t>(static_cast<double>(quantized[k]) /
                                            static_cast<double>(nonzero));
    std::fill(q.begin() + g0, q.begin() + g0 + merged, share);
  }
  const std::vector<float> ps = SmoothDistribution(p);
  const std::vector<float> qs = SmoothDistribution(q);
  if (ps.empty() || qs.empty()) return std::numeric_limits<float>::infinity();
  return KlDivergence(ps, qs);
}

std::string FormatRange(std::pair<float, float> range) {
  std::ostringstream out;
  out << "[" << range.first << ", " << range.second << "]";
  return out.str();
}

}  // namespace

CalibrationMethod ParseCalibrationMethod(const std::string& flag) {
  if (flag == "minmax") return CalibrationMethod::kMinMax;
  if (flag == "percentile") return CalibrationMethod::kPercentile;
  if (flag == "entropy") return CalibrationMethod::kEntropy;
  throw std::invalid_argument("unknown --calibration_method '" + flag +
                              "' (valid: entropy, minmax, percentile)");
}

std::string CalibrationMethodName(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::kMinMax:
      return "minmax";
    case CalibrationMethod::kPercentile:
      return "percentile";
    case CalibrationMethod::kEntropy:
      return "entropy";
  }
  return "unknown";
}

void CollectAbsoluteValues(c10::ArrayRef<float> values, int64_t num_bins,
                           CalibrationHistogram* h) {
  const auto [min_value, max_value] = MinMaxOf(values);
  std::vector<float> magnitudes(values.size());
  std::transform(values.begin(), values.end(), magnitudes.begin(),
                 [](float v) { return std::fabs(v); });
  if (h->counts.empty()) {
    // The first batch: num_bins bins over [min |x|, max |x|] (not from 0).
    const auto [lo, hi] = MinMaxOf(magnitudes);
    h->counts = UniformHistogramOrUnit(magnitudes, num_bins, lo, hi, &h->edges);
    h->min = min_value;
    h->max = max_value;
    return;
  }
  // Later batches: the old edges, extended upwards by bins of the first
  // bin's width when the batch goes past them; counted against the float64
  // edges, kept as float32. Values below the first edge are dropped.
  std::vector<double> edges(h->edges.begin(), h->edges.end());
  const float amax = MinMaxOf(magnitudes).second;
  if (amax > h->edges.back()) {
    const float width = F32(h->edges[1] - h->edges[0]);
    const std::vector<double> more =
        ArangeFloat32(F32(h->edges.back() + width), F32(amax + width), width);
    edges.insert(edges.end(), more.begin(), more.end());
  }
  std::vector<int64_t> counts = EdgesHistogram(magnitudes, edges);
  AddInto(h->counts, 0, &counts);
  h->counts = std::move(counts);
  h->edges.assign(edges.begin(), edges.end());
  h->min = std::min(h->min, min_value);
  h->max = std::max(h->max, max_value);
}

void CollectSignedValues(c10::ArrayRef<float> values, int64_t num_bins,
                         CalibrationHistogram* h) {
  const auto [min_value, max_value] = MinMaxOf(values);
  const float t = std::max(std::fabs(min_value), std::fabs(max_value));
  if (h->counts.empty()) {
    h->counts = UniformHistogramOrUnit(values, num_bins, -t, t, &h->edges);
    h->min = min_value;
    h->max = max_value;
    h->threshold = t;
    return;
  }
  const int64_t old_bins = static_cast<int64_t>(h->counts.size());
  const float old_t = h->threshold;
  std::vector<int64_t> counts;
  if (t <= old_t) {
    // Within the old range: the same bins.
    counts = UniformHistogramOrUnit(values, old_bins, -old_t, old_t, nullptr);
    AddInto(h->counts, 0, &counts);
  } else if (old_t == 0.0f) {
    // Only zeros so far: the old counts move to the same bin numbers.
    counts = UniformHistogramOrUnit(values, old_bins, -t, t, &h->edges);
    AddInto(h->counts, 0, &counts);
    h->threshold = t;
  } else {
    // Wider: whole bins of the old width added on both sides, the old
    // counts kept in the middle.
    const float stride = F32(F32(2.0f * old_t) / static_cast<float>(old_bins));
    const auto half =
        static_cast<int64_t>(F32(FloorDivide(F32(t - old_t), stride) + 1.0f));
    const int64_t new_bins = old_bins + 2 * half;
    const float new_t = F32(F32(static_cast<float>(half) * stride) + old_t);
    counts = UniformHistogramOrUnit(values, new_bins, -new_t, new_t, &h->edges);
    AddInto(h->counts, static_cast<size_t>(half), &counts);
    h->threshold = new_t;
  }
  h->counts = std::move(counts);
  h->min = std::min(h->min, min_value);
  h->max = std::max(h->max, max_value);
}

std::pair<float, float> PercentileRange(const CalibrationHistogram& h,
                                        double percentile, bool symmetric) {
  if (!(percentile >= 0.0 && percentile <= 100.0)) {
    std::ostringstream msg;
    msg << "calibration percentile " << percentile << " is not in [0, 100]";
    throw std::invalid_argument(msg.str());
  }
  // cdf = np.cumsum(hist / total): float64, summed in order.
  const double total = static_cast<double>(
      std::accumulate(h.counts.begin(), h.counts.end(), int64_t{0}));
  std::vector<double> cdf(h.counts.size());
  double running = 0.0;
  for (size_t i = 0; i < cdf.size(); ++i) {
    running += static_cast<double>(h.counts[i]) / total;
    cdf[i] = running;
  }
  // np.searchsorted(cdf, v): the first i with cdf[i] >= v (cdf.size() when
  // none), an index into the edges.
  auto search = [&cdf](double v) {
    return std::lower_bound(cdf.begin(), cdf.end(), v) - cdf.begin();
  };
  std::pair<float, float> range;
  if (symmetric) {
    const float edge = h.edges[search(percentile / 100.0)];
    range = {-edge, edge};
  } else {
    const double cut = (100.0 - percentile) / 200.0;
    range = {h.edges[search(cut)], h.edges[search(1.0 - cut)]};
  }
  return ClipToObserved(range, h);
}

std::pair<float, float> EntropyRange(const CalibrationHistogram& h,
                                     int64_t num_quantized_bins) {
  const int64_t bins = static_cast<int64_t>(h.counts.size());
  const int64_t zero_bin = bins / 2;
  const int64_t half_levels = num_quantized_bins / 2;
  if (num_quantized_bins < 1 || half_levels > zero_bin) {
    std::ostringstream msg;
    msg << "entropy calibration needs num_bins / 2 >= num_quantized_bins / 2"
        << " and num_quantized_bins >= 1 (histogram of " << bins
        << " bins, num_quantized_bins " << num_quantized_bins << ")";
    throw std::invalid_argument(msg.str());
  }
  std::vector<int64_t> prefix(bins + 1, 0);
  std::partial_sum(h.counts.begin(), h.counts.end(), prefix.begin() + 1);
  // Candidates grow symmetrically around the zero bin; the first minimum
  // wins (np.argmin).
  float best = std::numeric_limits<float>::quiet_NaN();
  std::pair<float, float> best_range;
  for (int64_t i = half_levels; i <= zero_bin; ++i) {
    const int64_t start = zero_bin - i;
    const int64_t end = std::min(zero_bin + i + 1, bins);
    const float kl =
        CandidateDivergence(h.counts, prefix, start, end, num_quantized_bins);
    if (std::isnan(best) || kl < best) {
      best = kl;
      best_range = {h.edges[start], h.edges[end]};
    }
  }
  return ClipToObserved(best_range, h);
}

RangeObserver::RangeObserver(const CalibrationOptions& options)
    : options_(options), num_bins_(options.num_bins()) {
  if (num_bins_ == 0) {
    num_bins_ =
        options_.method() == CalibrationMethod::kPercentile ? 2048 : 128;
  }
  if (num_bins_ < 1) {
    throw std::invalid_argument("calibration num_bins must be >= 1, got " +
                                std::to_string(options.num_bins()));
  }
  if (options_.method() == CalibrationMethod::kPercentile &&
      !(options_.percentile() >= 0.0 && options_.percentile() <= 100.0)) {
    throw std::invalid_argument("calibration percentile " +
                                std::to_string(options_.percentile()) +
                                " is not in [0, 100]");
  }
  if (options_.method() == CalibrationMethod::kEntropy &&
      (options_.num_quantized_bins() < 1 ||
       options_.num_quantized_bins() / 2 > num_bins_ / 2)) {
    throw std::invalid_argument(
        "entropy calibration needs 1 <= num_quantized_bins and "
        "num_quantized_bins / 2 <= num_bins / 2 (num_bins " +
        std::to_string(num_bins_) + ", num_quantized_bins " +
        std::to_string(options_.num_quantized_bins()) + ")");
  }
}

void RangeObserver::Observe(const torch::Tensor& x) {
  TORCH_CHECK(x.is_floating_point(),
              "RangeObserver::Observe: a floating tensor is needed, got ",
              x.scalar_type());
  if (x.numel() == 0) return;
  torch::NoGradGuard no_grad;
  const int64_t non_finite =
      torch::logical_not(torch::isfinite(x)).sum().item<int64_t>();
  TORCH_CHECK(non_finite == 0, "calibration batch ", batches_, " has ",
              non_finite, " non-finite (NaN or infinite) values of ", x.numel(),
              "; the activation cannot be calibrated");
  if (options_.method() == CalibrationMethod::kMinMax) {
    // Reduced where the tensor lives; only two numbers cross.
    const float lo = x.min().to(torch::kFloat).item<float>();
    const float hi = x.max().to(torch::kFloat).item<float>();
    min_ = batches_ == 0 ? lo : std::min(min_, lo);
    max_ = batches_ == 0 ? hi : std::max(max_, hi);
  } else {
    ObserveHistogram(x);
  }
  ++batches_;
}

void RangeObserver::ObserveHistogram(const torch::Tensor& x) {
  const torch::Tensor values =
      x.detach().to(torch::kCPU, torch::kFloat).contiguous().reshape({-1});
  const c10::ArrayRef<float> data(values.data_ptr<float>(), values.numel());
  if (options_.method() == CalibrationMethod::kPercentile &&
      options_.symmetric_percentile()) {
    CollectAbsoluteValues(data, num_bins_, &histogram_);
  } else {
    CollectSignedValues(data, num_bins_, &histogram_);
  }
}

std::pair<float, float> RangeObserver::MethodRange() const {
  TORCH_CHECK(batches_ > 0, "no calibration batch was observed (method ",
              CalibrationMethodName(options_.method()),
              "): the activation has no range");
  switch (options_.method()) {
    case CalibrationMethod::kMinMax:
      return {min_, max_};
    case CalibrationMethod::kPercentile:
      return PercentileRange(histogram_, options_.percentile(),
                             options_.symmetric_percentile());
    case CalibrationMethod::kEntropy:
      return EntropyRange(histogram_, options_.num_quantized_bins());
  }
  return {min_, max_};
}

std::pair<float, float> RangeObserver::Range() const {
  const std::pair<float, float> method = MethodRange();
  const std::pair<float, float> range = {std::min(method.first, 0.0f),
                                         std::max(method.second, 0.0f)};
  TORCH_CHECK(range.second > range.first,
              "the calibrated activation range collapsed to zero width (",
              CalibrationMethodName(options_.method()), " range ",
              FormatRange(method), " after ", batches_,
              " batches): the activation was 0 on the calibration data",
              options_.method() == CalibrationMethod::kPercentile
                  ? " (or the percentile cut off everything else)"
                  : "");
  return range;
}

}  // namespace nets
}  // namespace slimtorch
