#include "slimtorch/train/device_update.h"

#include "multi_tensor.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/train/moving_average.h"
#include "update_kernels.h"

#ifdef SLIMTORCH_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/autograd/variable.h>
#endif

namespace slimtorch {

using train_internal::FusedUpdate;
using train_internal::MulByScalarTensor_;
using train_internal::UpdateKind;

bool DeviceUpdate::FusedKernelsBuilt() {
#ifdef SLIMTORCH_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool DeviceUpdate::Supports(const std::string& optimizer) {
  return OptimizerHasDeviceForm(optimizer);
}

DeviceUpdate::DeviceUpdate(Optimizer& optimizer,
                           const ExponentialMovingAverage* averages,
                           const NamedTensors& averaged, torch::Device device)
    : optimizer_(optimizer.MakeDeviceForm(device)) {
  SLIM_CHECK(optimizer_ != nullptr, "--optimizer=", optimizer.name(),
             " has no multi-tensor device update (every optimizer but ftrl "
             "has)");
  lr_ = torch::zeros(
      {}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  step_ = torch::zeros(
      {}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  if (averages != nullptr) {
    ema_decay_ = averages->decay();
    ema_warmup_ = averages->warmup();
    for (const auto& s : averages->shadows()) shadows_.push_back(s.tensor);
    for (const auto& v : averaged) averaged_.push_back(v.tensor);
    SLIM_CHECK(shadows_.size() == averaged_.size(),
               "moving averages: ", shadows_.size(), " shadows for ",
               averaged_.size(), " variables");
  }
}

DeviceUpdate::~DeviceUpdate() = default;

void DeviceUpdate::SetStep(double learning_rate, int64_t global_step_after) {
  lr_.fill_(static_cast<float>(learning_rate));
  step_.fill_(global_step_after);
}

void DeviceUpdate::SyncState() { optimizer_->SyncState(); }

void DeviceUpdate::ApplyOptimizer() { optimizer_->Apply(lr_, step_); }

void DeviceUpdate::RecordLosses(const torch::Tensor& total,
                                const torch::Tensor& ce,
                                const torch::Tensor& reg,
                                torch::Tensor& readout) {
  torch::NoGradGuard no_grad;
  SLIM_CHECK(readout.scalar_type() == torch::kFloat64 && readout.dim() == 1 &&
                 readout.size(0) == 5 && readout.is_contiguous(),
             "loss readout: float64 [5] expected, got ", readout.sizes());
#ifdef SLIMTORCH_WITH_CUDA_KERNELS
  auto scalar = [&](const torch::Tensor& t) {
    return t.numel() == 1 && t.scalar_type() == torch::kFloat32 &&
           t.device() == readout.device();
  };
  if (KernelSwitchOn(KernelSwitch::kFusedKernels) && readout.is_cuda() &&
      scalar(total) && scalar(ce) && scalar(reg) &&
      step_.device() == readout.device()) {
    const char* error = train_internal::RecordStepLossesCuda(
        total.data_ptr<float>(), ce.data_ptr<float>(), reg.data_ptr<float>(),
        step_.data_ptr<int64_t>(), readout.data_ptr<double>(),
        at::cuda::getCurrentCUDAStream(readout.get_device()).stream());
    SLIM_CHECK(error == nullptr, "the loss readout kernel: ", error);
    torch::autograd::impl::bump_version(readout);
    return;
  }
#endif
  const torch::Tensor loss = (total + reg).to(torch::kFloat32).reshape({});
  readout.narrow(0, 0, 3).copy_(
      torch::stack({loss, ce.to(torch::kFloat32).reshape({}),
                    reg.to(torch::kFloat32).reshape({})}));
  // The first non-finite loss is kept (value and step).
  const torch::Tensor first_bad =
      torch::isfinite(loss).logical_not().logical_and(readout[4].eq(0));
  readout[3].copy_(
      torch::where(first_bad, loss.to(torch::kFloat64), readout[3]));
  readout[4].copy_(
      torch::where(first_bad, step_.to(torch::kFloat64), readout[4]));
}

torch::Tensor DeviceUpdate::EmaDecay() const {
  torch::Tensor n = step_.to(torch::kFloat32);
  switch (ema_warmup_) {
    case EmaWarmup::kNone:
      return torch::full_like(n, ema_decay_);
    case EmaWarmup::kTimm: {
      const torch::Tensor s = (n - 1.0f).clamp_min(0.0f);
      const torch::Tensor d =
          (1.0f - (s + 1.0f).pow(-2.0 / 3.0)).clamp_max(ema_decay_);
      return torch::where(s.le(0.0f), torch::zeros_like(d), d);
    }
    case EmaWarmup::kTensorFlow:
      break;
  }
  return ((n + 1.0f) / (n + 10.0f)).clamp_max(ema_decay_);
}

void DeviceUpdate::ApplyAverages() {
  if (shadows_.empty()) return;
  torch::NoGradGuard no_grad;
  if (ema_warmup_ == EmaWarmup::kTensorFlow &&
      FusedUpdate(UpdateKind::kMovingAverage, shadows_, averaged_, nullptr, lr_,
                  0, step_, ema_decay_)) {
    return;
  }
  // As ExponentialMovingAverage::EffectiveDecay, in float32 on the device.
  const torch::Tensor complement = 1.0f - EmaDecay();
  // shadow -= (shadow - var) * (1 - decay)
  std::vector<torch::Tensor> d = at::_foreach_sub(shadows_, averaged_);
  MulByScalarTensor_(d, complement);
  at::_foreach_sub_(shadows_, d);
}

}  // namespace slimtorch
