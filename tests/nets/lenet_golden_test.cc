// LeNet against TF-Slim's nets/lenet.py, numerically: the same variables and
// input (a deterministic fill in TensorFlow's layout) must give TensorFlow's
// logits, end points, losses and gradients. Goldens come from
// scripts/golden/gen_lenet_goldens.py (TensorFlow + tf_slim).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "slimtorch/nets/lenet.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/loss.h"

namespace slimtorch {
namespace {

// How the generator fills one tensor (see Fill).
struct GoldenFill {
  const char* tensor;
  uint32_t stream;
  double scale;
};

// One value of an end point or gradient at an index in TensorFlow's layout;
// `rank` entries of `index` are used.
struct GoldenPoint {
  const char* tensor;
  int rank;
  int64_t index[4];
  float value;
};

// float64 sum and sum of |.| of a whole float32 tensor.
struct GoldenSums {
  const char* tensor;
  double sum;
  double abs_sum;
};

#include "golden/lenet_goldens.inc"

// float32 summation order differs between TensorFlow (Eigen) and LibTorch.
constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

// The generator's fill over the flat index i of a tensor in TensorFlow's
// layout: lowbias32(i + stream * 0x9E3779B9) → top 24 bits → [-scale, scale).
// Exact in float32 (scale is a power of two), so both sides agree bit for bit.
torch::Tensor Fill(std::vector<int64_t> tf_shape, const std::string& tensor) {
  const GoldenFill* fill = nullptr;
  for (const auto& f : kGoldenFills) {
    if (tensor == f.tensor) fill = &f;
  }
  if (fill == nullptr) {
    ADD_FAILURE() << "no fill for " << tensor;
    return torch::zeros(tf_shape);
  }
  torch::Tensor out = torch::empty(tf_shape, torch::kFloat32);
  float* data = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    uint32_t x = static_cast<uint32_t>(i) + fill->stream * 0x9E3779B9u;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    const double v = fill->scale *
                     (static_cast<double>(x >> 8) * std::ldexp(1.0, -23) - 1.0);
    data[i] = static_cast<float>(v);
  }
  return out;
}

// Variable layouts: ours conv [out, in, kh, kw] / fc [out, in]; TensorFlow's
// conv [kh, kw, in, out] / fc [in, out]; biases are the same.
torch::Tensor VariableFromTf(const torch::Tensor& tf) {
  if (tf.dim() == 4) return tf.permute({3, 2, 0, 1}).contiguous();
  if (tf.dim() == 2) return tf.t().contiguous();
  return tf;
}

torch::Tensor VariableToTf(const torch::Tensor& ours) {
  if (ours.dim() == 4) return ours.permute({2, 3, 1, 0}).contiguous();
  if (ours.dim() == 2) return ours.t().contiguous();
  return ours;
}

std::vector<int64_t> VariableTfShape(const torch::Tensor& ours) {
  return VariableToTf(ours).sizes().vec();
}

// Activations: ours NCHW, TensorFlow's NHWC; 2-D end points are the same
// (Flatten is in NHWC order on both sides).
torch::Tensor ActivationToTf(const torch::Tensor& ours) {
  if (ours.dim() == 4) return ours.permute({0, 2, 3, 1}).contiguous();
  return ours;
}

double Tolerance(double expected) { return kAtol + kRtol * std::abs(expected); }

float At(const torch::Tensor& tf_layout, const GoldenPoint& p) {
  EXPECT_EQ(tf_layout.dim(), p.rank) << p.tensor;
  std::vector<int64_t> index(p.index, p.index + p.rank);
  torch::Tensor t = tf_layout;
  for (int64_t i : index) t = t.select(0, i);
  return t.item<float>();
}

void ExpectSums(const torch::Tensor& tf_layout, const GoldenSums& g) {
  torch::Tensor d = tf_layout.to(torch::kFloat64);
  // Elementwise errors of kRtol relative add up to at most kRtol * sum|x|.
  const double tol = kAtol + kRtol * g.abs_sum;
  EXPECT_NEAR(d.sum().item<double>(), g.sum, tol) << g.tensor << " sum";
  EXPECT_NEAR(d.abs().sum().item<double>(), g.abs_sum, tol)
      << g.tensor << " sum of |.|";
}

class LeNetGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    net_ = CreateNet("lenet", NetOptions()
                                  .num_classes(10)
                                  .weight_decay(kGoldenWeightDecay)
                                  .input_channels(1));
    net_->module().eval();
    torch::NoGradGuard no_grad;
    for (auto& v : net_->ModelVariables()) {
      v.tensor.copy_(VariableFromTf(Fill(VariableTfShape(v.tensor), v.name)));
    }
    std::vector<int64_t> shape(std::begin(kGoldenImageShape),
                               std::end(kGoldenImageShape));
    images_ = Fill(shape, "images").permute({0, 3, 1, 2}).contiguous();
    labels_ = torch::tensor(std::vector<int64_t>(std::begin(kGoldenLabels),
                                                 std::end(kGoldenLabels)));
  }

  torch::Tensor EndPoint(const NetOutput& out, const std::string& name) {
    for (const auto& ep : out.end_points) {
      if (ep.first == name) return ep.second;
    }
    ADD_FAILURE() << "no end point " << name;
    return torch::zeros({1});
  }

  torch::Tensor Variable(const std::string& name) {
    for (const auto& v : net_->ModelVariables()) {
      if (v.name == name) return v.tensor;
    }
    ADD_FAILURE() << "no variable " << name;
    return torch::zeros({1});
  }

  std::shared_ptr<Net> net_;
  torch::Tensor images_;  // [2, 1, 28, 28]
  torch::Tensor labels_;  // [2] int64
};

TEST_F(LeNetGoldenTest, LogitsMatchTfSlim) {
  torch::NoGradGuard no_grad;
  torch::Tensor logits = net_->Forward(images_).logits;
  ASSERT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 10}));
  for (int64_t i = 0; i < 20; ++i) {
    const double expected = kGoldenLogits[i];
    EXPECT_NEAR(logits.view(-1)[i].item<float>(), expected, Tolerance(expected))
        << "logits[" << i / 10 << ", " << i % 10 << "]";
  }
}

TEST_F(LeNetGoldenTest, EndPointsMatchTfSlim) {
  torch::NoGradGuard no_grad;
  NetOutput out = net_->Forward(images_);
  for (const auto& p : kGoldenEndPoints) {
    torch::Tensor tf = ActivationToTf(EndPoint(out, p.tensor));
    std::string where = p.tensor;
    for (int i = 0; i < p.rank; ++i) where += " " + std::to_string(p.index[i]);
    EXPECT_NEAR(At(tf, p), p.value, Tolerance(p.value)) << where;
  }
  for (const auto& s : kGoldenEndPointSums) {
    ExpectSums(ActivationToTf(EndPoint(out, s.tensor)), s);
  }
}

TEST_F(LeNetGoldenTest, LossesMatchTfSlim) {
  torch::NoGradGuard no_grad;
  torch::Tensor logits = net_->Forward(images_).logits;
  const float loss = SoftmaxCrossEntropy(logits, labels_).item<float>();
  EXPECT_NEAR(loss, kGoldenLoss, Tolerance(kGoldenLoss));
  const float smoothed =
      SoftmaxCrossEntropy(logits, labels_, kGoldenLabelSmoothing).item<float>();
  EXPECT_NEAR(smoothed, kGoldenLossSmoothed, Tolerance(kGoldenLossSmoothed));
  const float reg = net_->RegularizationLoss().item<float>();
  EXPECT_NEAR(reg, kGoldenRegularizationLoss,
              Tolerance(kGoldenRegularizationLoss));
}

TEST_F(LeNetGoldenTest, GradientsMatchTfSlim) {
  // d(cross entropy)/d variable; the regularization term is not included,
  // as in the generator.
  SoftmaxCrossEntropy(net_->Forward(images_).logits, labels_).backward();
  for (const auto& p : kGoldenGradients) {
    torch::Tensor grad = Variable(p.tensor).grad();
    ASSERT_TRUE(grad.defined()) << p.tensor;
    std::string where = p.tensor;
    for (int i = 0; i < p.rank; ++i) where += " " + std::to_string(p.index[i]);
    EXPECT_NEAR(At(VariableToTf(grad), p), p.value, Tolerance(p.value))
        << where;
  }
  for (const auto& s : kGoldenGradientSums) {
    torch::Tensor grad = Variable(s.tensor).grad();
    ASSERT_TRUE(grad.defined()) << s.tensor;
    ExpectSums(VariableToTf(grad), s);
  }
}

}  // namespace
}  // namespace slimtorch
