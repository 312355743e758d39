#pragma once
// The update half of a training step as multi-tensor kernels whose
// learning rate and step count live in device tensors: the optimizer's
// update (its DeviceOptimizer form, TensorFlow's rules) and the moving averages
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
#include <memory>
#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/optimizer.h"

namespace slimtorch {

class ExponentialMovingAverage;

class DeviceUpdate {
 public:
  // Whether the optimizer registered as `optimizer` has a device form
  // (OptimizerHasDeviceForm): every one but ftrl.
  static bool Supports(const std::string& optimizer);

  // `optimizer`: the live optimizer whose device form (MakeDeviceForm) this
  // runs; `averages` may be null, else it averages `averaged`. Throws for an
  // optimizer without a device form.
  DeviceUpdate(Optimizer& optimizer, const ExponentialMovingAverage* averages,
               const NamedTensors& averaged, torch::Device device);
  ~DeviceUpdate();

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
  // The moving averages' decay at step_ (a float32 scalar on the device).
  torch::Tensor EmaDecay() const;

  std::unique_ptr<DeviceOptimizer> optimizer_;
  torch::Tensor lr_;    // float32, 0-dim
  torch::Tensor step_;  // int64, 0-dim
  float ema_decay_ = 0;
  EmaWarmup ema_warmup_ = EmaWarmup::kTensorFlow;
  std::vector<torch::Tensor> shadows_;
  std::vector<torch::Tensor> averaged_;
};

}  // namespace slimtorch
