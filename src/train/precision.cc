#include "slimtorch/train/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "slimtorch/core/error.h"

// LibTorch 2.4 replaced the per-device autocast functions by ones taking
// the device type.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define SLIMTORCH_AUTOCAST_BY_DEVICE 1
#else
#define SLIMTORCH_AUTOCAST_BY_DEVICE 0
#endif

namespace slimtorch {
namespace {

bool AutocastEnabled(bool cpu) {
#if SLIMTORCH_AUTOCAST_BY_DEVICE
  return at::autocast::is_autocast_enabled(cpu ? at::kCPU : at::kCUDA);
#else
  return cpu ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

void SetAutocast(bool cpu, bool enabled) {
#if SLIMTORCH_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_enabled(cpu ? at::kCPU : at::kCUDA, enabled);
#else
  if (cpu) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
#endif
}

at::ScalarType AutocastDtype(bool cpu) {
#if SLIMTORCH_AUTOCAST_BY_DEVICE
  return at::autocast::get_autocast_dtype(cpu ? at::kCPU : at::kCUDA);
#else
  return cpu ? at::autocast::get_autocast_cpu_dtype()
             : at::autocast::get_autocast_gpu_dtype();
#endif
}

void SetAutocastDtype(bool cpu, at::ScalarType dtype) {
#if SLIMTORCH_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_dtype(cpu ? at::kCPU : at::kCUDA, dtype);
#else
  if (cpu) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

}  // namespace

Precision ParsePrecision(const std::string& flag) {
  if (flag == "fp32") return Precision::kFloat32;
  if (flag == "bf16") return Precision::kBFloat16;
  SLIM_CHECK(flag == "fp16", "--precision must be fp32, bf16 or fp16, got '",
             flag, "'");
  return Precision::kFloat16;
}

void CheckPrecision(Precision p, const torch::Device& device) {
  SLIM_CHECK(p != Precision::kFloat16 || device.is_cuda(),
             "--precision=fp16 needs a GPU (LibTorch autocasts CPUs to "
             "bfloat16 only); on ",
             device.str(), " use --precision=bf16");
}

Precision ParsePrecision(const std::string& flag, const torch::Device& device) {
  const Precision p = ParsePrecision(flag);
  CheckPrecision(p, device);
  return p;
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFloat32:
      return "fp32";
    case Precision::kBFloat16:
      return "bf16";
    case Precision::kFloat16:
      return "fp16";
  }
  return "?";
}

AutocastScope::AutocastScope(Precision precision, const torch::Device& device) {
  if (precision == Precision::kFloat32) return;
  SLIM_CHECK(device.is_cpu() || device.is_cuda(),
             "mixed precision needs a CPU or CUDA device, not ", device.str());
  active_ = true;
  cpu_ = device.is_cpu();
  was_enabled_ = AutocastEnabled(cpu_);
  was_dtype_ = AutocastDtype(cpu_);
  SetAutocast(cpu_, true);
  SetAutocastDtype(
      cpu_, precision == Precision::kBFloat16 ? at::kBFloat16 : at::kHalf);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cast weights are cached while autocast is on; drop them with it.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetAutocast(cpu_, was_enabled_);
  SetAutocastDtype(cpu_, was_dtype_);
}

LossScaler::LossScaler(bool enabled, double initial_scale,
                       int64_t growth_interval)
    : enabled_(enabled),
      scale_(initial_scale),
      growth_interval_(growth_interval) {
  SLIM_CHECK(initial_scale >= 1 && growth_interval > 0,
             "loss scaling needs a scale >= 1 and a growth interval > 0");
}

torch::Tensor LossScaler::Scale(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

bool LossScaler::Unscale(NamedTensors& vars) {
  if (!enabled_) return true;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> finite;
  for (auto& v : vars) {
    const torch::Tensor& g = v.tensor.grad();
    if (g.defined()) finite.push_back(torch::isfinite(g).all());
  }
  const bool all_finite =
      finite.empty() || torch::stack(finite).all().item<bool>();
  if (!all_finite) {
    scale_ = std::max(1.0, scale_ / 2);
    good_steps_ = 0;
    return false;
  }
  for (auto& v : vars) {
    torch::Tensor& g = v.tensor.mutable_grad();
    if (g.defined()) g.div_(scale_);
  }
  if (++good_steps_ == growth_interval_) {
    scale_ *= 2;
    good_steps_ = 0;
  }
  return true;
}

}  // namespace slimtorch
