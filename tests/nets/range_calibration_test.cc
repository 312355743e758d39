#include "slimtorch/nets/range_calibration.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace slimtorch {
namespace nets {
namespace {

struct CalibrationGolden {
  const char* case_name;
  const char* label;
  const char* method;
  bool symmetric;
  int64_t num_bins;
  int64_t num_quantized_bins;
  double percentile;
  double lo;
  double hi;
  int64_t histogram_bins;
  int64_t histogram_total;
  double first_edge;
  double last_edge;
};

#include "../golden/calibration_goldens.inc"

// The generator of scripts/golden/gen_calibration_goldens.py: a 32-bit LCG,
// u = (state >> 8) / 2^24 (exact in float32).
class Lcg {
 public:
  explicit Lcg(uint32_t seed) : state_(seed) {}
  std::vector<float> Uniform(int n) {
    std::vector<float> out(n);
    for (float& v : out) {
      state_ = 1664525u * state_ + 1013904223u;
      v = static_cast<float>((state_ >> 8) / 16777216.0);
    }
    return out;
  }

 private:
  uint32_t state_;
};

using Batches = std::vector<std::vector<float>>;

std::vector<float> Signed(std::vector<float> u, float scale) {
  for (float& v : u) {
    const float twice = v * 2.0f;
    v = (twice - 1.0f) * scale;
  }
  return u;
}

// Keep in sync with make_batches() in the generator (float32 operations
// one at a time, as numpy does them).
Batches MakeBatches(const std::string& name) {
  Batches batches;
  if (name == "relu_growing") {
    Lcg g(1);
    for (float scale : {1.0f, 2.5f, 4.0f}) {
      std::vector<float> u = g.Uniform(1000);
      for (float& v : u) v = std::max(v - 0.3f, 0.0f) * scale;
      batches.push_back(u);
    }
  } else if (name == "signed_growing") {
    Lcg g(2);
    for (float scale : {1.0f, 3.0f, 0.5f}) {
      batches.push_back(Signed(g.Uniform(1500), scale));
    }
  } else if (name == "heavy_tail") {
    Lcg g(3);
    for (int b = 0; b < 2; ++b) {
      std::vector<float> a = Signed(g.Uniform(4000), 1.0f);
      const std::vector<float> v = g.Uniform(4000);
      for (size_t i = 0; i < a.size(); ++i) {
        const float denominator = 1.0001f - v[i];
        a[i] = a[i] / denominator;
      }
      batches.push_back(a);
    }
  } else if (name == "constant") {
    batches = {std::vector<float>(64, 0.75f), std::vector<float>(64, 0.75f)};
  } else if (name == "zeros_then_signed") {
    Lcg g(5);
    batches = {std::vector<float>(200, 0.0f), Signed(g.Uniform(500), 2.0f)};
  } else if (name == "positive_offset") {
    Lcg g(6);
    std::vector<float> first = g.Uniform(800);
    for (float& v : first) v = 1.0f + v * 2.0f;
    std::vector<float> second = g.Uniform(800);
    for (float& v : second) v = 0.5f + v * 4.5f;
    batches = {first, second};
  }
  return batches;
}

torch::Tensor ToTensor(const std::vector<float>& values) {
  return torch::tensor(values, torch::kFloat);
}

CalibrationOptions OptionsOf(const CalibrationGolden& golden) {
  CalibrationOptions options;
  options.method(ParseCalibrationMethod(golden.method));
  if (options.method() != CalibrationMethod::kMinMax) {
    options.num_bins(golden.num_bins)
        .num_quantized_bins(golden.num_quantized_bins)
        .percentile(golden.percentile)
        .symmetric_percentile(golden.symmetric);
  }
  return options;
}

// Compared exactly (no tolerance): the ranges are bin edges or observed
// values, and the code computes the edges with numpy's own float32 steps
// (linspace in float32, arange's float32 length and float64 values,
// histogram binning against float32 or float64 edges), so a float64 edge
// computation would already be off by an ulp. The entropy search compares
// float32 KL divergences that can differ in their last bits only (on
// relu_growing / entropy_2048 the best two are 1.9317335 and 1.9317340;
// float64 divergences pick the other one, a bin higher), so it mirrors
// numpy's float32 arithmetic and pairwise sums too; its logf may differ
// from numpy's SIMD log by an ulp per term, far below the sum's rounding.
TEST(RangeCalibrationGolden, MatchesOnnxruntime) {
  int checked = 0;
  for (const CalibrationGolden& golden : kCalibrationGoldens) {
    SCOPED_TRACE(std::string(golden.case_name) + " / " + golden.label);
    const Batches batches = MakeBatches(golden.case_name);
    ASSERT_FALSE(batches.empty());
    RangeObserver observer(OptionsOf(golden));
    const std::string label = golden.label;
    if (label.size() > 4 && label.substr(label.size() - 4) == "_all") {
      // onnxruntime's default quantize_static: every batch in one collect.
      std::vector<torch::Tensor> all;
      for (const auto& batch : batches) all.push_back(ToTensor(batch));
      observer.Observe(torch::cat(all));
    } else {
      for (const auto& batch : batches) observer.Observe(ToTensor(batch));
    }
    const auto range = observer.MethodRange();
    EXPECT_EQ(range.first, static_cast<float>(golden.lo));
    EXPECT_EQ(range.second, static_cast<float>(golden.hi));
    if (golden.histogram_bins > 0) {
      const CalibrationHistogram& h = observer.histogram();
      EXPECT_EQ(static_cast<int64_t>(h.counts.size()), golden.histogram_bins);
      int64_t total = 0;
      for (int64_t c : h.counts) total += c;
      EXPECT_EQ(total, golden.histogram_total);
      EXPECT_EQ(h.edges.front(), static_cast<float>(golden.first_edge));
      EXPECT_EQ(h.edges.back(), static_cast<float>(golden.last_edge));
    }
    ++checked;
  }
  EXPECT_EQ(checked, 51);
}

CalibrationOptions Method(CalibrationMethod method) {
  return CalibrationOptions().method(method);
}

std::pair<float, float> Calibrate(const CalibrationOptions& options,
                                  const Batches& batches) {
  RangeObserver observer(options);
  for (const auto& batch : batches) observer.Observe(ToTensor(batch));
  return observer.MethodRange();
}

TEST(RangeCalibration, ParsesMethodFlag) {
  EXPECT_EQ(ParseCalibrationMethod("minmax"), CalibrationMethod::kMinMax);
  EXPECT_EQ(ParseCalibrationMethod("percentile"),
            CalibrationMethod::kPercentile);
  EXPECT_EQ(ParseCalibrationMethod("entropy"), CalibrationMethod::kEntropy);
  try {
    ParseCalibrationMethod("kl");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'kl'"), std::string::npos) << what;
    EXPECT_NE(what.find("entropy, minmax, percentile"), std::string::npos)
        << what;
  }
}

// Property: minmax contains the percentile and entropy ranges; percentile
// 100 lands within one bin of minmax.
TEST(RangeCalibration, MinMaxContainsTheOtherMethods) {
  for (const char* name :
       {"relu_growing", "signed_growing", "heavy_tail", "positive_offset"}) {
    SCOPED_TRACE(name);
    const Batches batches = MakeBatches(name);
    const auto minmax = Calibrate(Method(CalibrationMethod::kMinMax), batches);
    for (double pct : {90.0, 99.0, 99.999, 100.0}) {
      for (bool symmetric : {true, false}) {
        const auto range = Calibrate(Method(CalibrationMethod::kPercentile)
                                         .percentile(pct)
                                         .symmetric_percentile(symmetric),
                                     batches);
        EXPECT_GE(range.first, minmax.first) << pct;
        EXPECT_LE(range.second, minmax.second) << pct;
      }
    }
    for (int64_t bins : {128, 2048}) {
      const auto range = Calibrate(
          Method(CalibrationMethod::kEntropy).num_bins(bins), batches);
      EXPECT_GE(range.first, minmax.first);
      EXPECT_LE(range.second, minmax.second);
    }
    // onnxruntime's percentile 100 is the edge where the cumulative share
    // reaches 1: the lower edge of the last non-empty bin (or the top edge
    // when rounding keeps the share below 1), clipped to the observed max.
    RangeObserver full(
        Method(CalibrationMethod::kPercentile).percentile(100.0));
    for (const auto& batch : batches) full.Observe(ToTensor(batch));
    const CalibrationHistogram& h = full.histogram();
    const float width = h.edges[1] - h.edges[0];
    EXPECT_LE(full.MethodRange().second, minmax.second);
    EXPECT_GE(full.MethodRange().second, minmax.second - width);
  }
}

TEST(RangeCalibration, MinMaxIsGlobalAndRangeIncludesZero) {
  RangeObserver observer(Method(CalibrationMethod::kMinMax));
  observer.Observe(torch::tensor({1.5f, 2.0f}));
  observer.Observe(torch::tensor({3.0f, 1.25f}).to(torch::kDouble));
  observer.Observe(torch::tensor({2.5f}).to(torch::kHalf));
  EXPECT_EQ(observer.MethodRange(), std::make_pair(1.25f, 3.0f));
  EXPECT_EQ(observer.Range(), std::make_pair(0.0f, 3.0f));
  RangeObserver negative(Method(CalibrationMethod::kMinMax));
  negative.Observe(torch::tensor({-4.0f, -0.5f}));
  EXPECT_EQ(negative.Range(), std::make_pair(-4.0f, 0.0f));
  EXPECT_EQ(negative.batches(), 1);
}

// Observe takes any layout and autograd state: a strided view that requires
// grad gives the histogram of the view's values (not of the storage's
// first elements), half values the histogram of their float32 values.
TEST(RangeCalibration, ObservesViewsAndOtherDtypes) {
  const std::vector<float> values = MakeBatches("signed_growing")[0];
  const torch::Tensor x = ToTensor(values).reshape({30, 50});
  for (CalibrationMethod method :
       {CalibrationMethod::kPercentile, CalibrationMethod::kEntropy}) {
    RangeObserver plain(Method(method).num_bins(512));
    plain.Observe(x.slice(1, 0, 50, 2).contiguous());
    RangeObserver view(Method(method).num_bins(512));
    view.Observe(x.clone().requires_grad_(true).slice(1, 0, 50, 2));
    EXPECT_EQ(view.histogram().counts, plain.histogram().counts);
    EXPECT_EQ(view.MethodRange(), plain.MethodRange());
    RangeObserver half(Method(method).num_bins(512));
    half.Observe(x.to(torch::kHalf));
    RangeObserver rounded(Method(method).num_bins(512));
    rounded.Observe(x.to(torch::kHalf).to(torch::kFloat));
    EXPECT_EQ(half.MethodRange(), rounded.MethodRange());
  }
}

// With onnxruntime's entropy defaults (128 bins, 128 levels) a single batch
// has one candidate, the whole histogram: entropy equals minmax.
TEST(RangeCalibration, EntropyDefaultsOnOneBatchEqualMinMax) {
  const Batches batches = {MakeBatches("heavy_tail")[0]};
  EXPECT_EQ(Calibrate(Method(CalibrationMethod::kEntropy), batches),
            Calibrate(Method(CalibrationMethod::kMinMax), batches));
  const auto clipped =
      Calibrate(Method(CalibrationMethod::kEntropy).num_bins(2048), batches);
  EXPECT_LT(
      clipped.second,
      0.5f * Calibrate(Method(CalibrationMethod::kMinMax), batches).second);
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(RangeCalibration, Errors) {
  for (CalibrationMethod method :
       {CalibrationMethod::kMinMax, CalibrationMethod::kPercentile,
        CalibrationMethod::kEntropy}) {
    SCOPED_TRACE(CalibrationMethodName(method));
    RangeObserver empty(Method(method));
    empty.Observe(torch::zeros({0, 3}));
    EXPECT_NE(ErrorOf([&] {
                empty.Range();
              }).find("no calibration batch was observed"),
              std::string::npos);

    RangeObserver nan(Method(method));
    const std::string nan_error = ErrorOf([&] {
      nan.Observe(torch::tensor({1.0f, std::nanf(""), 2.0f}));
    });
    EXPECT_NE(nan_error.find("1 non-finite"), std::string::npos) << nan_error;
    EXPECT_NE(
        ErrorOf([&] {
          nan.Observe(torch::tensor({std::numeric_limits<float>::infinity()}));
        }).find("non-finite"),
        std::string::npos);

    RangeObserver zeros(Method(method));
    zeros.Observe(torch::zeros({2, 3}));
    zeros.Observe(torch::zeros({4}));
    const std::string zero_error = ErrorOf([&] { zeros.Range(); });
    EXPECT_NE(zero_error.find("collapsed to zero width"), std::string::npos)
        << zero_error;
    EXPECT_NE(zero_error.find("after 2 batches"), std::string::npos)
        << zero_error;
  }
  EXPECT_NE(
      ErrorOf([] {
        RangeObserver(Method(CalibrationMethod::kPercentile).percentile(100.5));
      }).find("not in [0, 100]"),
      std::string::npos);
  EXPECT_NE(ErrorOf([] {
              RangeObserver(Method(CalibrationMethod::kEntropy).num_bins(64));
            }).find("num_quantized_bins"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              RangeObserver(Method(CalibrationMethod::kMinMax))
                  .Observe(torch::ones({2}, torch::kLong));
            }).find("floating"),
            std::string::npos);
}

}  // namespace
}  // namespace nets
}  // namespace slimtorch
