#pragma once
// Mixed precision (--precision): the forward pass under LibTorch's autocast
// in bfloat16 or float16 while the variables, optimizer slots, batch norm
// statistics and losses stay float32 (the master weights), and dynamic loss
// scaling for float16 as TensorFlow's LossScaleOptimizer does it.

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "slimtorch/core/named_tensor.h"

namespace slimtorch {

enum class Precision { kFloat32, kBFloat16, kFloat16 };

// "fp32", "bf16" or "fp16"; throws naming the flag on any other value.
Precision ParsePrecision(const std::string& flag);
// Throws for fp16 on a CPU (LibTorch autocasts CPUs to bfloat16 only).
void CheckPrecision(Precision p, const torch::Device& device);
// Both: the flag parsed and checked for `device`.
Precision ParsePrecision(const std::string& flag, const torch::Device& device);
const char* PrecisionName(Precision p);

// While alive, autocasts the ops of this thread on `device` to the
// precision's type (nothing for kFloat32); restores the previous state.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool cpu_ = true;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// TensorFlow's dynamic loss scaling (tf.keras.mixed_precision's
// LossScaleOptimizer defaults): the loss is multiplied by the scale before
// backward (initially 2^15); a step whose gradients are all finite divides
// them by it and counts towards `growth_interval` such steps in a row,
// after which the scale doubles; a step with any non-finite gradient halves
// the scale (not below 1) and is skipped.
class LossScaler {
 public:
  explicit LossScaler(bool enabled, double initial_scale = 32768.0,
                      int64_t growth_interval = 2000);
  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  // loss * scale (the loss itself when disabled).
  torch::Tensor Scale(const torch::Tensor& loss) const;
  // Divides every defined gradient of `vars` by the scale and returns true,
  // or, when any is not finite, updates the scale and returns false (the
  // caller skips the update). Disabled: true, nothing changed.
  bool Unscale(NamedTensors& vars);

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  int64_t good_steps_ = 0;
};

}  // namespace slimtorch
