#pragma once
// Private base of the TF1 optimizers in src/train/optimizers/: per-variable
// slots, preallocated scratch, TensorFlow's float32 hyper-parameter rounding,
// and the base of their device forms.

#include <torch/torch.h>

#include <string>
#include <vector>

#include "slimtorch/train/optimizer.h"

namespace slimtorch {
namespace train_internal {

// A slot created for every variable: named "<var>/<suffix>", same shape,
// dtype, device and memory format as the variable, filled with `init`.
struct SlotSpec {
  std::string suffix;
  double init;
};

// One variable with its slots (in SlotSpec order) and scratch tensors.
struct SlotEntry {
  std::string name;
  torch::Tensor var;
  std::vector<torch::Tensor> slots;
  // Contiguous tensors of var's shape, dtype and device. Scratch of all
  // variables on one (device, dtype) shares storage sized for the largest of
  // them, so contents do not survive from one variable's update to the next.
  std::vector<torch::Tensor> scratch;
  // 0-dim zero of var's dtype on var's device.
  torch::Tensor zero;
};

// Rounds a Python-float hyper-parameter as TF1 does when it turns it into a
// float32 tensor (learning rates, beta1, epsilon, ...).
// The volatile keeps the rounding: GCC 12.2's SLP vectorizer drops paired
// double -> float -> double round trips (even at -O2).
inline double Float32(double x) {
  volatile float rounded = static_cast<float>(x);
  return rounded;
}

// Rounds `x` to the precision of `dtype`, as TF evaluates scalar expressions
// like (1 - beta1) in the variable's dtype. Double stays double; every other
// floating dtype is approximated by float32.
inline double InDtype(double x, c10::ScalarType dtype) {
  return dtype == torch::kDouble ? x : Float32(x);
}

// 0-dim CPU double tensor; added to a dense tensor it acts as a scalar of
// that tensor's dtype (lets add_out write into preallocated scratch).
inline torch::Tensor CpuScalar(double value) {
  return torch::scalar_tensor(value, torch::kDouble);
}

// Base for optimizers whose state is a fixed set of slots per variable plus
// optional non-slot variables. Variables must be defined floating-point
// tensors with unique names; each Apply() runs Update() for every variable
// with a defined dense grad of the variable's shape, then Finish() if at
// least one was updated (so a step without any gradient changes nothing).
class SlotOptimizer : public Optimizer {
 public:
  void Apply(double lr) final;
  NamedTensors State() const final;
  // The variables with their slots, in the order they were given.
  const std::vector<SlotEntry>& entries() const { return entries_; }

 protected:
  // `slots` in TensorFlow's creation order (it decides the _1 suffixes);
  // `num_scratch` scratch tensors per variable.
  SlotOptimizer(const char* name, NamedTensors variables,
                std::vector<SlotSpec> slots, int num_scratch);

  // Called once per Apply() before any Update().
  virtual void Prepare() {}
  // Updates e.var and e.slots from `grad` (dense, var's shape). `lr` is the
  // float32-rounded learning rate. Runs under NoGradGuard.
  virtual void Update(SlotEntry& e, const torch::Tensor& grad, double lr) = 0;
  // Called after the updates of a step that updated at least one variable.
  virtual void Finish() {}
  // Non-slot variables (e.g. Adam's beta powers), after all slots in State().
  virtual NamedTensors NonSlotState() const { return {}; }

  const char* name() const final { return name_; }

 private:
  const char* name_;
  std::vector<std::string> slot_suffixes_;
  std::vector<SlotEntry> entries_;
};

// The variables of a step that have a gradient, their gradients and, per
// slot, those variables' slots ([slot][variable]).
struct SlotGradients {
  std::vector<torch::Tensor> vars, grads;
  std::vector<std::vector<torch::Tensor>> slots;
};

// Base of a SlotOptimizer's device form: each Apply gathers the variables
// with a gradient (throwing for a sparse one or one of another shape) and,
// if there are any, runs Update on them under NoGradGuard.
class SlotDeviceForm : public DeviceOptimizer {
 public:
  explicit SlotDeviceForm(const SlotOptimizer& optimizer)
      : entries_(optimizer.entries()) {}
  void Apply(const torch::Tensor& learning_rate,
             const torch::Tensor& step_after) final;

 protected:
  virtual void Update(SlotGradients& g, const torch::Tensor& learning_rate,
                      const torch::Tensor& step_after) = 0;

 private:
  const std::vector<SlotEntry>& entries_;
};

}  // namespace train_internal
}  // namespace slimtorch
