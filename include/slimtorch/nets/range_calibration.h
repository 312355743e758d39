#pragma once
// Activation ranges for post-training quantization, calibrated from a few
// batches of data (export_inference_graph --quantize
// --calibration_method=minmax|percentile|entropy).
//
// The three methods follow onnxruntime 1.32.0's python calibrators
// (onnxruntime/quantization/calibrate.py) as quantize_static runs them with
// extra_options={"CalibStridedMinMax": 1}, i.e. one collect per batch, each
// batch merged into what came before:
//   minmax      MinMaxCalibrater (no moving average): the smallest and
//               largest value over all batches.
//   percentile  PercentileCalibrater, symmetric (quantize_static's default):
//               a histogram of |x| (2048 bins over [min|x|, max|x|] of the
//               first batch, extended by bins of the same width when a later
//               batch goes further); the threshold is the bin edge where the
//               cumulative share first reaches percentile/100 (99.999);
//               range [-t, t] clipped to the observed [min, max].
//   entropy     EntropyCalibrater: a signed histogram over [-t, t]
//               (t = max|x|, 128 bins, widened symmetrically by whole bins
//               when a later batch goes further); the threshold pair
//               (edges symmetric around the zero bin) whose clipped
//               distribution has the least KL divergence to its 128-level
//               quantized version, clipped to the observed [min, max].
// With onnxruntime's own entropy defaults (128 bins, 128 quantized bins)
// the only candidate is the whole histogram, so entropy equals minmax
// unless later batches widened the histogram; num_bins(2048) gives the
// search TensorRT's entropy calibration does.
//
// onnxruntime's default quantize_static (no stride) instead concatenates
// all batches and builds one histogram from them; a single Observe call
// with all batches reproduces that.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace slimtorch {
namespace nets {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };

// "minmax", "percentile" or "entropy"; anything else throws naming the value
// and the valid ones.
CalibrationMethod ParseCalibrationMethod(const std::string& flag);
std::string CalibrationMethodName(CalibrationMethod method);

struct CalibrationOptions {
  TORCH_ARG(CalibrationMethod, method) = CalibrationMethod::kMinMax;
  // percentile: the share of the values (in %) the range covers, in
  // [0, 100]; onnxruntime's default 99.999.
  TORCH_ARG(double, percentile) = 99.999;
  // percentile: true histograms |x| and cuts one tail at `percentile`
  // (onnxruntime's quantize_static default); false histograms x over
  // [-max|x|, max|x|] and cuts (100 - percentile) / 2 % off each tail.
  TORCH_ARG(bool, symmetric_percentile) = true;
  // Histogram bins of the first batch; 0 = the method's onnxruntime default
  // (percentile 2048, entropy 128).
  TORCH_ARG(int64_t, num_bins) = 0;
  // entropy: the levels the clipped distribution is quantized to
  // (onnxruntime's default 128); needs num_bins / 2 >= this / 2.
  TORCH_ARG(int64_t, num_quantized_bins) = 128;
};

// The histogram of the percentile and entropy methods: counts per bin and
// the bin edges (float32, as onnxruntime keeps them), plus the observed
// signed min/max the final range is clipped to.
struct CalibrationHistogram {
  std::vector<int64_t> counts;
  std::vector<float> edges;  // counts.size() + 1, increasing
  float min = 0.0f;
  float max = 0.0f;
  float threshold = 0.0f;  // signed histograms: the edges span [-t, t]
};

// Accumulates one activation's values over the calibration batches and
// turns them into its range. Not thread safe; one observer per activation.
class RangeObserver {
 public:
  explicit RangeObserver(const CalibrationOptions& options = {});

  // One batch of the activation: a floating tensor of any shape, dtype
  // (float16/bfloat16/float64 are read as float32) and device. Empty
  // tensors are skipped. Throws on NaN or infinite values, naming the
  // batch.
  void Observe(const torch::Tensor& x);

  // The method's range as onnxruntime's calibrator reports it (the
  // threshold pair), before 0 is included. Throws when nothing was
  // observed.
  std::pair<float, float> MethodRange() const;

  // MethodRange() widened to include 0 ({min(lo, 0), max(hi, 0)}), as
  // TensorFlow's and onnxruntime's quantizers need (0 must be exact).
  // Throws when nothing was observed or when the range has zero width (an
  // activation that was 0 everywhere, or a percentile cut to 0).
  std::pair<float, float> Range() const;

  int64_t batches() const { return batches_; }
  const CalibrationHistogram& histogram() const { return histogram_; }

 private:
  void ObserveHistogram(const torch::Tensor& x);

  CalibrationOptions options_;
  int64_t num_bins_;
  int64_t batches_ = 0;
  float min_ = 0.0f;
  float max_ = 0.0f;
  CalibrationHistogram histogram_;
};

// The steps of the histogram methods, exposed for tests. `values` are one
// batch's float32 values.
// percentile (symmetric): the |x| histogram, built or merged.
void CollectAbsoluteValues(c10::ArrayRef<float> values, int64_t num_bins,
                           CalibrationHistogram* histogram);
// entropy and non-symmetric percentile: the signed [-t, t] histogram.
void CollectSignedValues(c10::ArrayRef<float> values, int64_t num_bins,
                         CalibrationHistogram* histogram);
std::pair<float, float> PercentileRange(const CalibrationHistogram& histogram,
                                        double percentile, bool symmetric);
std::pair<float, float> EntropyRange(const CalibrationHistogram& histogram,
                                     int64_t num_quantized_bins);

}  // namespace nets
}  // namespace slimtorch
