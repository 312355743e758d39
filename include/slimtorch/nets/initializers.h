#pragma once
// TensorFlow's weight initializers for the slim layers.

#include <torch/torch.h>

#include <cstdint>

namespace slimtorch {
namespace nets {

// Weight initializers, as TensorFlow's.
struct Initializer {
  enum class Kind {
    kZeros,
    kConstant,         // value
    kTruncatedNormal,  // stddev; resampled beyond 2 stddev
    kXavierUniform,    // slim's xavier_initializer() (glorot uniform)
    // slim.variance_scaling_initializer(factor, 'FAN_IN', uniform=False):
    // truncated normal with stddev sqrt(1.3 * factor / fan_in).
    kVarianceScaling,
    // The same with mode='FAN_OUT' (NASNet / PNASNet arg scopes): stddev
    // sqrt(1.3 * factor / fan_out).
    kVarianceScalingFanOut,
  } kind = Kind::kZeros;
  double value = 0.0;

  static Initializer Zeros() { return {Kind::kZeros, 0.0}; }
  static Initializer Constant(double v) { return {Kind::kConstant, v}; }
  static Initializer TruncatedNormal(double stddev) {
    return {Kind::kTruncatedNormal, stddev};
  }
  static Initializer XavierUniform() { return {Kind::kXavierUniform, 0.0}; }
  static Initializer VarianceScaling(double factor = 2.0) {
    return {Kind::kVarianceScaling, factor};
  }
  static Initializer VarianceScalingFanOut(double factor = 2.0) {
    return {Kind::kVarianceScalingFanOut, factor};
  }
};

// Fills `t` in place. fan_in/fan_out follow TensorFlow's convention
// (conv: kh*kw*in and kh*kw*out). Uses torch's default generator.
void Initialize(torch::Tensor& t, const Initializer& init, int64_t fan_in,
                int64_t fan_out);

// Samples TensorFlow's truncated normal (values beyond 2 stddev redrawn).
torch::Tensor TruncatedNormal(torch::IntArrayRef shape, double stddev);

}  // namespace nets
}  // namespace slimtorch
