#include "slimtorch/train/moving_average.h"

#include <algorithm>
#include <cmath>

#include "slimtorch/core/error.h"

namespace slimtorch {

std::string MovingAverageName(const std::string& variable) {
  return variable + "/ExponentialMovingAverage";
}

EmaWarmup ParseEmaWarmup(const std::string& flag) {
  if (flag == "tf") return EmaWarmup::kTensorFlow;
  if (flag == "none") return EmaWarmup::kNone;
  if (flag == "timm") return EmaWarmup::kTimm;
  SLIM_FAIL("--moving_average_warmup=", flag,
            " is not one of tf (TF-Slim's "
            "min(decay, (1 + step) / (10 + step))), none, timm");
}

ExponentialMovingAverage::ExponentialMovingAverage(double decay,
                                                   NamedTensors variables,
                                                   EmaWarmup warmup)
    : decay_(static_cast<float>(decay)),
      warmup_(warmup),
      variables_(std::move(variables)) {
  SLIM_CHECK(decay > 0.0 && decay < 1.0,
             "--moving_average_decay must be in (0, 1), got ", decay);
  torch::NoGradGuard no_grad;
  for (const auto& v : variables_) {
    shadows_.push_back({MovingAverageName(v.name), v.tensor.detach().clone()});
  }
}

float ExponentialMovingAverage::EffectiveDecay(int64_t num_updates) const {
  switch (warmup_) {
    case EmaWarmup::kNone:
      return decay_;
    case EmaWarmup::kTimm: {
      // timm's get_decay(step): in double, used as a float32 factor.
      const int64_t step = std::max<int64_t>(0, num_updates - 1);
      if (step <= 0) return 0.0f;
      const double d =
          1.0 - std::pow(1.0 + static_cast<double>(step), -2.0 / 3.0);
      return static_cast<float>(std::min(d, static_cast<double>(decay_)));
    }
    case EmaWarmup::kTensorFlow:
      break;
  }
  // TF: num_updates cast to float32, then float32 arithmetic.
  const float n = static_cast<float>(num_updates);
  volatile float ratio = (1.0f + n) / (10.0f + n);
  return std::min(decay_, static_cast<float>(ratio));
}

void ExponentialMovingAverage::Apply(int64_t num_updates) {
  torch::NoGradGuard no_grad;
  // TF computes 1 - decay as a float32 tensor.
  volatile float complement = 1.0f - EffectiveDecay(num_updates);
  const float c = complement;
  for (size_t i = 0; i < shadows_.size(); ++i) {
    torch::Tensor& shadow = shadows_[i].tensor;
    shadow.sub_((shadow - variables_[i].tensor).mul_(c));
  }
}

bool ExponentialMovingAverage::Load(const CheckpointData& ckpt,
                                    const std::string& ckpt_path) {
  std::vector<torch::Tensor> found;
  std::string missing;
  for (const auto& s : shadows_) {
    torch::Tensor t = ckpt.Find(s.name);
    if (!t.defined() && missing.empty()) missing = s.name;
    found.push_back(t);
  }
  size_t present = 0;
  for (const auto& t : found) present += t.defined() ? 1 : 0;
  if (present == 0) return false;
  SLIM_CHECK(missing.empty(), "checkpoint '", ckpt_path, "' has ", present,
             " of ", shadows_.size(), " moving averages; '", missing,
             "' is missing");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < shadows_.size(); ++i) {
    SLIM_CHECK(found[i].sizes() == shadows_[i].tensor.sizes(), "checkpoint '",
               ckpt_path, "': ", shadows_[i].name, " has shape ",
               found[i].sizes(), ", the model expects ",
               shadows_[i].tensor.sizes());
    shadows_[i].tensor.copy_(found[i]);
  }
  return true;
}

void RestoreMovingAverages(const NamedTensors& variables,
                           const CheckpointData& ckpt,
                           const std::string& ckpt_path) {
  torch::NoGradGuard no_grad;
  for (const auto& v : variables) {
    const std::string name = MovingAverageName(v.name);
    torch::Tensor t = ckpt.Find(name);
    SLIM_CHECK(t.defined(), "--moving_average_decay is set but checkpoint '",
               ckpt_path, "' has no moving averages (key '", name,
               "' not found); it was trained without --moving_average_decay. "
               "Evaluate it without the flag.");
    SLIM_CHECK(t.sizes() == v.tensor.sizes(), "checkpoint '", ckpt_path,
               "': ", name, " has shape ", t.sizes(), ", the model expects ",
               v.tensor.sizes());
    v.tensor.copy_(t);
  }
}

}  // namespace slimtorch
