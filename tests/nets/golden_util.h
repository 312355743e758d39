#pragma once
// Shared by the net golden tests: the golden table row types (the .inc
// files written by scripts/golden/gen_*_goldens.py are included after this
// header), the generators' deterministic fill, and conversions between our
// layouts (NCHW / NCDHW activations, [out, in, kh, kw] / [out, in, kt, kh,
// kw] / [out, in] variables) and TensorFlow's (NHWC / NDHWC, [kh, kw, in,
// out] / [kt, kh, kw, in, out] / [in, out]).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace golden {

// A TF shape in a golden table: up to 5 dimensions, unused ones 0 (a
// net's tensors have no empty dimension; {} is a scalar). Fixed arrays,
// unlike std::vector, make the tables constant data: the net zoo's tables
// hold thousands of rows, and GCC's dynamic initialisation of that many
// vectors takes minutes and gigabytes.
using GoldenShape = int64_t[5];

inline std::vector<int64_t> Dims(const GoldenShape& shape) {
  std::vector<int64_t> dims;
  for (int64_t d : shape) {
    if (d == 0) break;
    dims.push_back(d);
  }
  return dims;
}

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

// float32 summation order differs between TensorFlow (Eigen) and LibTorch,
// and between OpenBLAS's kernels for different CPUs: CifarNet's fc4 differs
// by 2.8e-5 relative on an Intel Xeon VM. A wrong layout, padding or
// initialiser shows up as O(1) relative errors.
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-6;

inline double Tolerance(double expected) {
  return kAtol + kRtol * std::abs(expected);
}

// The generators' fill over the flat index i of a tensor in TensorFlow's
// layout: lowbias32(i + stream * 0x9E3779B9) → top 24 bits → [-scale,
// scale). Exact in float32 (scale is a power of two), so both sides agree
// bit for bit.
inline torch::Tensor Fill(const std::vector<int64_t>& tf_shape,
                          const GoldenFill& fill) {
  torch::Tensor out = torch::empty(tf_shape, torch::kFloat32);
  float* data = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    uint32_t x = static_cast<uint32_t>(i) + fill.stream * 0x9E3779B9u;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    const double v =
        fill.scale * (static_cast<double>(x >> 8) * std::ldexp(1.0, -23) - 1.0);
    data[i] = static_cast<float>(v);
  }
  return out;
}

// Fill() with the row of `fills` named `tensor`.
template <size_t N>
torch::Tensor Fill(const std::vector<int64_t>& tf_shape,
                   const std::string& tensor, const GoldenFill (&fills)[N]) {
  for (const auto& f : fills) {
    if (tensor == f.tensor) return Fill(tf_shape, f);
  }
  ADD_FAILURE() << "no fill for " << tensor;
  return torch::zeros(tf_shape);
}

// Variable layouts: ours conv [out, in, kh, kw] / conv3d [out, in, kt, kh,
// kw] / fc [out, in]; TensorFlow's conv [kh, kw, in, out] / conv3d [kt, kh,
// kw, in, out] / fc [in, out]; biases are the same.
inline torch::Tensor VariableFromTf(const torch::Tensor& tf) {
  if (tf.dim() == 5) return tf.permute({4, 3, 0, 1, 2}).contiguous();
  if (tf.dim() == 4) return tf.permute({3, 2, 0, 1}).contiguous();
  if (tf.dim() == 2) return tf.t().contiguous();
  return tf;
}

inline torch::Tensor VariableToTf(const torch::Tensor& ours) {
  if (ours.dim() == 5) return ours.permute({2, 3, 4, 1, 0}).contiguous();
  if (ours.dim() == 4) return ours.permute({2, 3, 1, 0}).contiguous();
  if (ours.dim() == 2) return ours.t().contiguous();
  return ours;
}

inline bool IsDepthwiseWeights(const std::string& name) {
  const std::string dw = "depthwise_weights";
  return name.size() >= dw.size() &&
         name.compare(name.size() - dw.size(), dw.size(), dw) == 0;
}

// VariableFromTf, and a depthwise kernel (slim.separable_conv2d's
// `depthwise_weights`, TF [kh, kw, in, mult]) as our grouped conv's
// [in * mult, 1, kh, kw] (output channel i * mult + m, as TensorFlow's).
inline torch::Tensor NamedVariableFromTf(const std::string& name,
                                         const torch::Tensor& tf) {
  if (tf.dim() == 4 && IsDepthwiseWeights(name)) {
    torch::Tensor ours = tf.permute({2, 3, 0, 1});
    return ours.reshape({-1, 1, ours.size(2), ours.size(3)}).contiguous();
  }
  return VariableFromTf(tf);
}

inline std::vector<int64_t> VariableTfShape(const torch::Tensor& ours) {
  return VariableToTf(ours).sizes().vec();
}

// Activations: ours NCHW / NCDHW (clips), TensorFlow's NHWC / NDHWC; 2-D
// end points are the same (Flatten is in NHWC order on both sides).
inline torch::Tensor ActivationToTf(const torch::Tensor& ours) {
  if (ours.dim() == 5) return ours.permute({0, 2, 3, 4, 1}).contiguous();
  if (ours.dim() == 4) return ours.permute({0, 2, 3, 1}).contiguous();
  return ours;
}

inline torch::Tensor ActivationFromTf(const torch::Tensor& tf) {
  if (tf.dim() == 5) return tf.permute({0, 4, 1, 2, 3}).contiguous();
  if (tf.dim() == 4) return tf.permute({0, 3, 1, 2}).contiguous();
  return tf;
}

inline float At(const torch::Tensor& tf_layout, const GoldenPoint& p) {
  EXPECT_EQ(tf_layout.dim(), p.rank) << p.tensor;
  torch::Tensor t = tf_layout;
  for (int i = 0; i < p.rank; ++i) t = t.select(0, p.index[i]);
  return t.item<float>();
}

// Expects tf_layout at p's index to be p.value within Tolerance.
inline void ExpectPoint(const torch::Tensor& tf_layout, const GoldenPoint& p) {
  std::string where = p.tensor;
  for (int i = 0; i < p.rank; ++i) where += " " + std::to_string(p.index[i]);
  EXPECT_NEAR(At(tf_layout, p), p.value, Tolerance(p.value)) << where;
}

inline void ExpectSums(const torch::Tensor& tf_layout, const GoldenSums& g) {
  torch::Tensor d = tf_layout.to(torch::kFloat64);
  // Elementwise errors of kRtol relative add up to at most kRtol * sum|x|.
  const double tol = kAtol + kRtol * g.abs_sum;
  EXPECT_NEAR(d.sum().item<double>(), g.sum, tol) << g.tensor << " sum";
  EXPECT_NEAR(d.abs().sum().item<double>(), g.abs_sum, tol)
      << g.tensor << " sum of |.|";
}

// Overwrites every model variable of `net` with its fill (rows named by the
// variables' TF names).
template <size_t N>
void LoadFills(Net& net, const GoldenFill (&fills)[N]) {
  torch::NoGradGuard no_grad;
  for (auto& v : net.ModelVariables()) {
    v.tensor.copy_(
        VariableFromTf(Fill(VariableTfShape(v.tensor), v.name, fills)));
  }
}

// The fill `tensor` of NHWC `shape`, as NCHW images.
template <size_t N>
torch::Tensor FillImages(const int64_t (&shape)[4], const std::string& tensor,
                         const GoldenFill (&fills)[N]) {
  return ActivationFromTf(
      Fill({shape[0], shape[1], shape[2], shape[3]}, tensor, fills));
}

inline torch::Tensor EndPoint(const NetOutput& out, const std::string& name) {
  for (const auto& ep : out.end_points) {
    if (ep.first == name) return ep.second;
  }
  ADD_FAILURE() << "no end point " << name;
  return torch::zeros({1});
}

inline torch::Tensor Variable(Net& net, const std::string& name) {
  for (const auto& v : net.ModelVariables()) {
    if (v.name == name) return v.tensor;
  }
  ADD_FAILURE() << "no variable " << name;
  return torch::zeros({1});
}

inline void ExpectEndPoints(const NetOutput& out,
                            c10::ArrayRef<GoldenPoint> points,
                            c10::ArrayRef<GoldenSums> sums) {
  for (const auto& p : points) {
    ExpectPoint(ActivationToTf(EndPoint(out, p.tensor)), p);
  }
  for (const auto& s : sums) {
    ExpectSums(ActivationToTf(EndPoint(out, s.tensor)), s);
  }
}

// Expects the .grad() of net's variables (after a backward pass).
inline void ExpectGradients(Net& net, c10::ArrayRef<GoldenPoint> points,
                            c10::ArrayRef<GoldenSums> sums) {
  for (const auto& p : points) {
    torch::Tensor grad = Variable(net, p.tensor).grad();
    ASSERT_TRUE(grad.defined()) << p.tensor;
    ExpectPoint(VariableToTf(grad), p);
  }
  for (const auto& s : sums) {
    torch::Tensor grad = Variable(net, s.tensor).grad();
    ASSERT_TRUE(grad.defined()) << s.tensor;
    ExpectSums(VariableToTf(grad), s);
  }
}

// Expects the [N, K] logits, flat, to be `expected` within Tolerance.
inline void ExpectLogits(const torch::Tensor& logits,
                         c10::ArrayRef<float> expected) {
  ASSERT_EQ(logits.numel(), static_cast<int64_t>(expected.size()));
  torch::Tensor flat = logits.reshape({-1});
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(flat[i].item<float>(), expected[i], Tolerance(expected[i]))
        << "logits[" << i / logits.size(1) << ", " << i % logits.size(1) << "]";
  }
}

}  // namespace golden
}  // namespace slimtorch
