#pragma once
// The update half of a training step as multi-tensor kernels whose
// learning rate and step count live in device tensors: the optimizer's
// update (TensorFlow's rules, as tf_optimizers.cc) and the moving averages
// (ExponentialMovingAverage) of every variable at once with LibTorch's
// _foreach ops, a handful of kernels per step instead of several per
// variable. Nothing reads the device, so the update can be captured in a
// CUDA graph and replayed with a new learning rate each step
// (SetStep before each replay).
//
// Shares its state with the Optimizer and ExponentialMovingAverage it is
// built from (their slot and shadow tensors are updated in place; Adam's
// beta powers, which the optimizer keeps on the CPU, are held on the device
// here and copied back by SyncState), so steps may alternate between this
// and their own Apply() when SyncState is called before theirs.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/optimizer.h"

namespace slimtorch {

class ExponentialMovingAverage;

class DeviceUpdate {
 public:
  // Whether `optimizer` (a registered name) has a device form: every one
  // but ftrl (sgd, momentum, rmsprop, adam, adagrad, adadelta).
  static bool Supports(const std::string& optimizer);

  // `trainable`: the optimizer's variables, in its order; `optimizer`
  // their live optimizer (its slots are looked up by TensorFlow's names);
  // `averages` may be null. Throws for an unsupported optimizer.
  DeviceUpdate(const std::string& optimizer_name, const NamedTensors& trainable,
               const Optimizer& optimizer, const OptimizerOptions& options,
               const ExponentialMovingAverage* averages,
               const NamedTensors& averaged, torch::Device device);

  // Before each step (outside any graph): the learning rate (rounded to
  // float32 as TF does) and the global step after this step (the moving
  // averages' num_updates).
  void SetStep(double learning_rate, int64_t global_step_after);

  // The optimizer's update of every variable with a gradient (variables
  // without one are left as they are, with their slots).
  void ApplyOptimizer();
  // The moving averages with decay min(decay, (1 + n) / (10 + n)) (or as
  // the averages' EmaWarmup says), n the step count of SetStep, computed on
  // the device in float32.
  void ApplyAverages();

  // A step's losses into `readout` (float64 [5] on the device): the total
  // loss total + reg (float32 sum), the cross entropy ce, reg, and the first
  // time the total loss is not finite, that loss and step() (readout[4] is 0
  // until then). One kernel where this build has them (total, ce, reg
  // float32 scalars on the GPU), else tensor ops; nothing read back.
  void RecordLosses(const torch::Tensor& total, const torch::Tensor& ce,
                    const torch::Tensor& reg, torch::Tensor& readout);

  // Copies the state this holds on the device alone (Adam's beta powers)
  // into the optimizer's own tensors, e.g. before a checkpoint.
  void SyncState();

  // The device's global step after this step (int64, 0-dim).
  const torch::Tensor& step() const { return step_; }

  // Whether this build has the fused multi-tensor kernels
  // (src/train/update_kernels.h; a CUDA LibTorch and nvcc): sgd, momentum
  // and the moving averages of float32 GPU tensors in one launch each, the
  // same bits as the _foreach ops, while
  // KernelSwitchOn(KernelSwitch::kFusedKernels)
  // (slimtorch/core/kernel_switches.h).
  static bool FusedKernelsBuilt();

 private:
  enum class Kind { kSgd, kMomentum, kRmsProp, kAdam, kAdagrad, kAdadelta };
  // The variables with a gradient, their gradients and, per slot of the
  // optimizer, those variables' slots ([slot][variable]).
  struct Gradients {
    std::vector<torch::Tensor> vars, grads;
    std::vector<std::vector<torch::Tensor>> slots;
  };

  // Sets kind_ and the hyper-parameters (rounded as TensorFlow does) of
  // `optimizer_name`; returns the suffixes of its slot names. Throws for an
  // unsupported optimizer.
  std::vector<std::string> ReadHyperParameters(
      const std::string& optimizer_name, const OptimizerOptions& options);
  // Finds the slots (by suffix) and Adam's beta powers in the optimizer.
  void TakeOptimizerState(const Optimizer& optimizer,
                          const std::vector<std::string>& suffixes,
                          torch::Device device);
  Gradients GatherGradients() const;
  // One update each, in TensorFlow's float32 arithmetic.
  void ApplySgd(Gradients& g);
  void ApplyMomentum(Gradients& g);
  void ApplyRmsProp(Gradients& g);
  void ApplyAdam(Gradients& g);
  void ApplyAdagrad(Gradients& g);
  void ApplyAdadelta(Gradients& g);

  Kind kind_;
  NamedTensors trainable_;
  // Per trainable variable, its slots in the optimizer's order.
  std::vector<std::vector<torch::Tensor>> slots_;
  double momentum_ = 0;
  double rms_decay_complement_ = 0;
  double epsilon_ = 0;
  // Adam: beta1, beta2 and their complements; adadelta: rho and 1 - rho.
  double beta1_ = 0, beta2_ = 0, one_minus_beta1_ = 0, one_minus_beta2_ = 0;
  double rho_ = 0, one_minus_rho_ = 0;
  // Adam's beta powers: the optimizer's (CPU) and their device copies.
  torch::Tensor beta1_power_, beta2_power_;
  torch::Tensor beta1_power_device_, beta2_power_device_;
  torch::Tensor lr_;    // float32, 0-dim
  torch::Tensor step_;  // int64, 0-dim
  float ema_decay_ = 0;
  EmaWarmup ema_warmup_ = EmaWarmup::kTensorFlow;
  // The moving averages' decay at step_ (a float32 scalar on the device).
  torch::Tensor EmaDecay() const;
  std::vector<torch::Tensor> shadows_;
  std::vector<torch::Tensor> averaged_;
};

}  // namespace slimtorch
