// Fake quantization and the moving averages of its ranges against
// TensorFlow 2.21 (scripts/golden/gen_fake_quant_goldens.py), bit for bit:
// TensorFlow's kernels are float32 elementwise arithmetic that we repeat
// operation by operation, and the goldens' upstream gradients are
// multiples of 1/16, so that d/dmin and d/dmax (sums) are exact in any
// summation order. Plus properties of the quantizer on random data.

#include "slimtorch/nets/fake_quant.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

struct FakeQuantGolden {
  const char* name;
  int num_bits;
  bool narrow_range;
  bool per_channel;
  std::vector<int64_t> shape;  // TensorFlow's, channels last
  std::vector<float> min, max, x, dy, y, dx, dmin, dmax;
};

struct MovingAverageStep {
  std::vector<float> value;
  std::vector<float> variable;
  std::vector<float> biased;  // zero_debias only
  float local_step;           // zero_debias only
};

struct MovingAverageGolden {
  const char* name;
  double decay;
  bool zero_debias;
  std::vector<float> initial;
  std::vector<MovingAverageStep> steps;
};

#include "golden/fake_quant_goldens.inc"

torch::Tensor FromVector(const std::vector<float>& v,
                         const std::vector<int64_t>& shape,
                         const torch::Device& device) {
  return torch::tensor(v).reshape(shape).to(device);
}

// Same bits (so -0 differs from 0, and a NaN would fail).
void ExpectBitwise(const torch::Tensor& ours, const torch::Tensor& tf,
                   const std::string& what) {
  ASSERT_EQ(ours.sizes(), tf.sizes()) << what;
  const torch::Tensor a = ours.detach().cpu().contiguous();
  const torch::Tensor b = tf.detach().cpu().contiguous();
  const torch::Tensor differ = a.view(torch::kInt32) != b.view(torch::kInt32);
  const int64_t n = differ.sum().item<int64_t>();
  if (n == 0) return;
  const int64_t i = differ.reshape(-1).nonzero()[0][0].item<int64_t>();
  ADD_FAILURE() << what << ": " << n << " of " << a.numel()
                << " values differ, first at flat index " << i << ": ours "
                << a.reshape(-1)[i].item<float>() << ", TensorFlow "
                << b.reshape(-1)[i].item<float>();
}

struct Result {
  torch::Tensor y, dx, dmin, dmax;
};

// Runs one golden case on `device`, the channels moved from the last axis
// of TensorFlow's layout to `axis` (per channel only), and hands the
// results back in TensorFlow's layout. `strided`: x as a non-contiguous
// view (on the CPU, the tensor-op path rather than the fused kernels).
Result Run(const FakeQuantGolden& g, const torch::Device& device,
           int64_t axis, bool strided) {
  const int64_t last = static_cast<int64_t>(g.shape.size()) - 1;
  const std::vector<int64_t> range_shape =
      g.per_channel ? std::vector<int64_t>{g.shape.back()}
                    : std::vector<int64_t>{};
  torch::Tensor x = FromVector(g.x, g.shape, device);
  torch::Tensor dy = FromVector(g.dy, g.shape, device);
  torch::Tensor min = FromVector(g.min, range_shape, device).requires_grad_();
  torch::Tensor max = FromVector(g.max, range_shape, device).requires_grad_();
  if (g.per_channel) {
    x = x.movedim(last, axis).contiguous();
    dy = dy.movedim(last, axis).contiguous();
  }
  // A leaf either way: a gradient through stack() would add +0 to -0.
  torch::Tensor input =
      (strided ? torch::stack({x, x}, -1).select(-1, 0).detach() : x)
          .requires_grad_();
  EXPECT_EQ(input.is_contiguous(), !strided);
  torch::Tensor y =
      g.per_channel
          ? nets::FakeQuantPerChannel(input, min, max, axis, g.num_bits,
                                      g.narrow_range)
          : nets::FakeQuant(input, min, max, g.num_bits, g.narrow_range);
  y.backward(dy);
  Result r{y.detach(), input.grad(), min.grad(), max.grad()};
  if (g.per_channel) {
    r.y = r.y.movedim(axis, last);
    r.dx = r.dx.movedim(axis, last);
  }
  return r;
}

void ExpectMatchesGolden(const FakeQuantGolden& g, const torch::Device& device,
                         int64_t axis, bool strided) {
  const std::string what = std::string(g.name) + " on " + device.str() +
                           (g.per_channel ? ", axis " + std::to_string(axis)
                                          : std::string()) +
                           (strided ? ", strided" : "");
  const Result r = Run(g, device, axis, strided);
  const torch::Device cpu(torch::kCPU);
  const std::vector<int64_t> range_shape =
      g.per_channel ? std::vector<int64_t>{g.shape.back()}
                    : std::vector<int64_t>{};
  ExpectBitwise(r.y, FromVector(g.y, g.shape, cpu), what + ": y");
  ExpectBitwise(r.dx, FromVector(g.dx, g.shape, cpu), what + ": dx");
  // The sums are exact; compared by value (a sum of zeros may carry
  // either sign).
  EXPECT_TRUE(torch::equal(r.dmin.cpu(), FromVector(g.dmin, range_shape, cpu)))
      << what << ": dmin " << r.dmin << " vs " << torch::tensor(g.dmin);
  EXPECT_TRUE(torch::equal(r.dmax.cpu(), FromVector(g.dmax, range_shape, cpu)))
      << what << ": dmax " << r.dmax << " vs " << torch::tensor(g.dmax);
}

void ExpectAllGoldens(const torch::Device& device, bool strided) {
  for (const FakeQuantGolden& g : FakeQuantGoldens()) {
    const int64_t rank = static_cast<int64_t>(g.shape.size());
    if (!g.per_channel) {
      ExpectMatchesGolden(g, device, -1, strided);
      continue;
    }
    // TensorFlow's layout (last axis), weights' (axis 0), NCHW's (axis 1).
    ExpectMatchesGolden(g, device, rank - 1, strided);
    if (rank >= 2) {
      ExpectMatchesGolden(g, device, 0, strided);
      ExpectMatchesGolden(g, device, 1, strided);
    }
  }
}

TEST(FakeQuantTest, GoldensCoverTheEdgeCases) {
  // The table is what the other tests iterate over; make sure it is there.
  int per_tensor = 0, per_channel = 0;
  for (const FakeQuantGolden& g : FakeQuantGoldens()) {
    (g.per_channel ? per_channel : per_tensor)++;
  }
  EXPECT_GE(per_tensor, 20);
  EXPECT_GE(per_channel, 8);
  EXPECT_EQ(MovingAverageGoldens().size(), 4u);
}

TEST(FakeQuantTest, MatchesTensorFlowOnCpu) {
  ExpectAllGoldens(torch::Device(torch::kCPU), /*strided=*/false);
}

TEST(FakeQuantTest, MatchesTensorFlowWithTensorOpsOnCpu) {
  ExpectAllGoldens(torch::Device(torch::kCPU), /*strided=*/true);
}

TEST(FakeQuantTest, MatchesTensorFlowOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ExpectAllGoldens(torch::Device(torch::kCUDA, 0), /*strided=*/false);
  ExpectAllGoldens(torch::Device(torch::kCUDA, 0), /*strided=*/true);
}

void ExpectMovingAverages(const torch::Device& device) {
  for (const MovingAverageGolden& g : MovingAverageGoldens()) {
    const int64_t n = static_cast<int64_t>(g.initial.size());
    torch::Tensor variable = FromVector(g.initial, {n}, device);
    torch::Tensor biased = torch::zeros({n}, variable.options());
    torch::Tensor local_step = torch::zeros({}, variable.options());
    for (size_t s = 0; s < g.steps.size(); ++s) {
      const MovingAverageStep& step = g.steps[s];
      const std::string what = std::string(g.name) + " step " +
                               std::to_string(s + 1) + " on " + device.str();
      const torch::Tensor value = FromVector(step.value, {n}, device);
      if (g.zero_debias) {
        nets::AssignMovingAverageZeroDebias(variable, biased, local_step,
                                            value, g.decay);
        ExpectBitwise(biased, FromVector(step.biased, {n}, torch::kCPU),
                      what + ": biased");
        EXPECT_EQ(local_step.item<float>(), step.local_step) << what;
      } else {
        nets::AssignMovingAverage(variable, value, g.decay);
      }
      ExpectBitwise(variable, FromVector(step.variable, {n}, torch::kCPU),
                    what + ": variable");
    }
  }
}

TEST(FakeQuantTest, MovingAveragesMatchTensorFlow) {
  ExpectMovingAverages(torch::Device(torch::kCPU));
}

TEST(FakeQuantTest, MovingAveragesMatchTensorFlowOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ExpectMovingAverages(torch::Device(torch::kCUDA, 0));
}

TEST(FakeQuantTest, NudgesTheZeroPointHalfAwayFromZero) {
  // [-1.25, 126.25] in 8 bits: scale 0.5, zero point 2.5 from min, which
  // std::round takes to 3 (round half to even would give 2).
  const nets::Nudged n = nets::NudgeRange(torch::tensor(-1.25f),
                                          torch::tensor(126.25f), 8, false);
  EXPECT_EQ(n.scale.item<float>(), 0.5f);
  EXPECT_EQ(n.zero_point.item<float>(), 3.0f);
  EXPECT_EQ(n.min.item<float>(), -1.5f);
  EXPECT_EQ(n.max.item<float>(), 126.0f);
  // narrow_range: qmin 1, [-2.25, 124.75] over 254 steps: 1 + 4.5 -> 6.
  const nets::Nudged narrow = nets::NudgeRange(
      torch::tensor(-2.25f), torch::tensor(124.75f), 8, true);
  EXPECT_EQ(narrow.zero_point.item<float>(), 6.0f);
  EXPECT_EQ(narrow.min.item<float>(), -2.5f);
  // A range above zero moves down to start at 0, one below zero up.
  const nets::Nudged above = nets::NudgeRange(
      torch::tensor({1.0f, -3.0f}), torch::tensor({3.0f, -1.0f}), 4, false);
  EXPECT_EQ(above.min[0].item<float>(), 0.0f);
  EXPECT_EQ(above.zero_point[0].item<float>(), 0.0f);
  EXPECT_EQ(above.max[1].item<float>(), 0.0f);
  EXPECT_EQ(above.zero_point[1].item<float>(), 15.0f);
  // [0, 0] (TensorFlow's zeros): no NaN.
  const nets::Nudged zero =
      nets::NudgeRange(torch::tensor(0.0f), torch::tensor(0.0f), 8, true);
  EXPECT_EQ(zero.scale.item<float>(), 0.0f);
  EXPECT_EQ(zero.zero_point.item<float>(), 1.0f);
  EXPECT_EQ(zero.min.item<float>(), 0.0f);
}

struct Range {
  float min, max;
  int bits;
  bool narrow;
};

const std::vector<Range>& PropertyRanges() {
  static const auto* const kRanges = new std::vector<Range>{
      {-6.0f, 6.0f, 8, false}, {0.0f, 6.0f, 8, false},
      {-0.37f, 1.91f, 8, true}, {0.4f, 2.0f, 8, false},
      {-5.0f, -0.1f, 4, false}, {-1.3f, 0.2f, 2, false},
      {-3.0f, 7.0f, 16, true}, {-2e-5f, 3e-5f, 8, false}};
  return *kRanges;
}

TEST(FakeQuantTest, OutputsLieOnTheNudgedGrid) {
  torch::manual_seed(0);
  for (const Range& r : PropertyRanges()) {
    const torch::Tensor min = torch::tensor(r.min), max = torch::tensor(r.max);
    const nets::Nudged n = nets::NudgeRange(min, max, r.bits, r.narrow);
    const float span = r.max - r.min;
    const torch::Tensor x = torch::rand({4096}) * (2 * span) + (r.min - span / 2);
    const torch::Tensor y = nets::FakeQuant(x, min, max, r.bits, r.narrow);
    EXPECT_TRUE((y >= n.min).all().item<bool>()) << r.min << " " << r.max;
    EXPECT_TRUE((y <= n.max).all().item<bool>()) << r.min << " " << r.max;
    // y = (k - zero_point) * scale for an integer k in [qmin, qmax].
    const torch::Tensor k = y / n.scale + n.zero_point;
    EXPECT_LT((k - k.round()).abs().max().item<float>(), 1e-2f)
        << r.min << " " << r.max;
    EXPECT_GE(k.round().min().item<float>(), r.narrow ? 1.0f : 0.0f);
    EXPECT_LE(k.round().max().item<float>(), (1 << r.bits) - 1.0f);
    // Every input within half a step (outside the range: its nearest end),
    // give or take the rounding of values of its size (a 16-bit step is
    // about 300 ulp).
    const torch::Tensor clamped = torch::max(torch::min(x, n.max), n.min);
    const float ulp = std::max(std::abs(r.min), std::abs(r.max)) * 1.2e-7f;
    EXPECT_LE((y - clamped).abs().max().item<float>(),
              n.scale.item<float>() * 0.5f + 2 * ulp)
        << r.min << " " << r.max;
  }
}

TEST(FakeQuantTest, IsIdempotentAndKeepsZero) {
  torch::manual_seed(1);
  for (const Range& r : PropertyRanges()) {
    const torch::Tensor min = torch::tensor(r.min), max = torch::tensor(r.max);
    const float span = r.max - r.min;
    const torch::Tensor x = torch::rand({4096}) * (2 * span) + (r.min - span / 2);
    const torch::Tensor y = nets::FakeQuant(x, min, max, r.bits, r.narrow);
    ExpectBitwise(nets::FakeQuant(y, min, max, r.bits, r.narrow), y,
                  "FakeQuant(FakeQuant(x))");
    // Zero (the padding of a convolution) is exactly on the grid, even for
    // ranges that do not contain it.
    const torch::Tensor zero = torch::zeros({3});
    ExpectBitwise(nets::FakeQuant(zero, min, max, r.bits, r.narrow), zero,
                  "FakeQuant(0)");
    const torch::Tensor yc = nets::FakeQuantPerChannel(
        zero, min.expand({3}).contiguous(), max.expand({3}).contiguous(), 0,
        r.bits, r.narrow);
    ExpectBitwise(yc, zero, "FakeQuantPerChannel(0)");
  }
}

TEST(FakeQuantTest, PerChannelEqualsPerTensorOnEachSlice) {
  // Per channel, TensorFlow multiplies by 1 / scale where per tensor it
  // divides by scale; the two differ in the last bit, which only matters
  // for inputs within an ulp of a tie between two grid points (see the
  // golden b8_min_above_zero against pc_*): on random inputs every output
  // agrees, the gradients everywhere.
  torch::manual_seed(2);
  const torch::Tensor min = torch::tensor({-6.0f, 0.0f, -0.37f, 0.4f});
  const torch::Tensor max = torch::tensor({6.0f, 6.0f, 1.91f, 2.0f});
  const torch::Tensor base = torch::randn({3, 4, 5, 6}) * 3;
  const torch::Tensor dy = torch::randn({3, 4, 5, 6});
  torch::Tensor x = base.clone().requires_grad_();
  torch::Tensor cmin = min.clone().requires_grad_();
  torch::Tensor cmax = max.clone().requires_grad_();
  nets::FakeQuantPerChannel(x, cmin, cmax, 1, 8, true).backward(dy);
  for (int64_t c = 0; c < 4; ++c) {
    torch::Tensor xs = base.select(1, c).clone().requires_grad_();
    torch::Tensor tmin = min[c].clone().requires_grad_();
    torch::Tensor tmax = max[c].clone().requires_grad_();
    const torch::Tensor ys = nets::FakeQuant(xs, tmin, tmax, 8, true);
    ys.backward(dy.select(1, c));
    const torch::Tensor yc =
        nets::FakeQuantPerChannel(base, min, max, 1, 8, true).select(1, c);
    const std::string what = "channel " + std::to_string(c);
    ExpectBitwise(yc, ys, what + ": y");
    ExpectBitwise(x.grad().select(1, c), xs.grad(), what + ": dx");
    EXPECT_NEAR(cmin.grad()[c].item<float>(), tmin.grad().item<float>(), 1e-4)
        << what;
    EXPECT_NEAR(cmax.grad()[c].item<float>(), tmax.grad().item<float>(), 1e-4)
        << what;
  }
}

// The fused CPU kernels against the tensor ops (a strided view of the
// same data) on tensors of many rows, split among threads.
void ExpectKernelMatchesOps(const torch::Tensor& data, const torch::Tensor& min,
                            const torch::Tensor& max, int64_t axis, int bits,
                            const std::string& what) {
  torch::manual_seed(3);
  const torch::Tensor dy = torch::randn(data.sizes());
  std::vector<torch::Tensor> y, dx, dmin, dmax;
  for (bool strided : {false, true}) {
    torch::Tensor x =
        (strided ? torch::stack({data, data}, -1).select(-1, 0).detach()
                 : data.clone())
            .requires_grad_();
    torch::Tensor lo = min.clone().requires_grad_();
    torch::Tensor hi = max.clone().requires_grad_();
    const torch::Tensor& input = x;
    torch::Tensor out = axis < 0 ? nets::FakeQuant(input, lo, hi, bits)
                                 : nets::FakeQuantPerChannel(input, lo, hi,
                                                             axis, bits);
    out.backward(dy);
    y.push_back(out.detach());
    dx.push_back(x.grad());
    dmin.push_back(lo.grad());
    dmax.push_back(hi.grad());
  }
  ExpectBitwise(y[0], y[1], what + ": y");
  ExpectBitwise(dx[0], dx[1], what + ": dx");
  // Sums in another order (the kernel's in double).
  EXPECT_TRUE(torch::allclose(dmin[0], dmin[1], 1e-4, 1e-3)) << what;
  EXPECT_TRUE(torch::allclose(dmax[0], dmax[1], 1e-4, 1e-3)) << what;
  EXPECT_GT(dmin[0].abs().sum().item<float>(), 0.0f) << what;
  EXPECT_GT(dmax[0].abs().sum().item<float>(), 0.0f) << what;
}

TEST(FakeQuantTest, CpuKernelsMatchTensorOps) {
  torch::manual_seed(4);
  const torch::Tensor activations = torch::randn({4, 8, 30, 30}) * 2;
  ExpectKernelMatchesOps(activations, torch::tensor(-2.5f),
                         torch::tensor(3.1f), -1, 8, "per tensor");
  ExpectKernelMatchesOps(activations, torch::tensor(0.0f), torch::tensor(6.0f),
                         -1, 4, "per tensor, 4 bits");
  const torch::Tensor min = -torch::rand({8}) * 3 - 0.1;
  const torch::Tensor max = torch::rand({8}) * 3 + 0.1;
  ExpectKernelMatchesOps(activations, min, max, 1, 8, "NCHW, axis 1");
  ExpectKernelMatchesOps(activations.permute({0, 2, 3, 1}).contiguous(), min,
                         max, 3, 8, "NHWC, last axis");
  const torch::Tensor weights = torch::randn({8, 16, 3, 3});
  ExpectKernelMatchesOps(weights, min, max, 0, 8, "weights, axis 0");
}

TEST(FakeQuantTest, KeepsTheInputDtypeAndShapeOfRange) {
  const torch::Tensor x = torch::linspace(-1, 1, 11, torch::kDouble);
  torch::Tensor min = torch::tensor({-0.5f}).requires_grad_();
  torch::Tensor max = torch::tensor({0.5f}).requires_grad_();
  const torch::Tensor y = nets::FakeQuant(x, min, max, 8, false);
  EXPECT_EQ(y.scalar_type(), torch::kDouble);
  y.sum().backward();
  ASSERT_TRUE(min.grad().defined());
  EXPECT_EQ(min.grad().sizes(), min.sizes());
  EXPECT_EQ(min.grad().item<float>(), 3.0f);  // -1, -0.8, -0.6 below
  EXPECT_EQ(max.grad().item<float>(), 3.0f);
}

TEST(FakeQuantTest, RejectsBadRangesAndArguments) {
  const torch::Tensor x = torch::randn({2, 3});
  auto expect_error = [](auto&& call, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "no error, expected one mentioning '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos)
          << e.what();
    }
  };
  expect_error([&] { nets::FakeQuant(x, torch::tensor(2.0f), torch::tensor(1.0f)); },
               "[2, 1]");
  expect_error([&] { nets::FakeQuant(x, torch::tensor(1.0f), torch::tensor(1.0f)); },
               "[1, 1]");
  expect_error([&] { nets::FakeQuant(x, torch::tensor(-1.0f), torch::tensor(1.0f), 1); },
               "num_bits");
  expect_error([&] { nets::FakeQuant(x, torch::tensor(-1.0f), torch::tensor(1.0f), 17); },
               "num_bits");
  expect_error(
      [&] {
        nets::FakeQuantPerChannel(x, torch::tensor({-1.0f, 0.5f, -1.0f}),
                                  torch::tensor({1.0f, 0.5f, 1.0f}), 1);
      },
      "channel 1");
  expect_error(
      [&] {
        nets::FakeQuantPerChannel(x, torch::tensor({-1.0f, -1.0f}),
                                  torch::tensor({1.0f, 1.0f}), 1);
      },
      "must be [3]");
  expect_error(
      [&] {
        nets::FakeQuantPerChannel(x, torch::tensor({-1.0f, -1.0f}),
                                  torch::tensor({1.0f, 1.0f}), 2);
      },
      "axis 2");
}

}  // namespace
}  // namespace slimtorch
