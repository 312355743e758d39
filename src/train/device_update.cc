#include "slimtorch/train/device_update.h"

#include <torch/version.h>

#include <map>

#include "slimtorch/core/error.h"
#include "slimtorch/train/moving_average.h"
#include "slot_optimizer.h"

// LibTorch >= 2.1 multiplies a tensor list by a 0-dim device tensor in one
// kernel; older versions (Debian's 1.13) loop.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define SLIMTORCH_FOREACH_TENSOR_SCALAR 1
#endif

namespace slimtorch {
namespace {

using train_internal::Float32;

// list[i] * t for a 0-dim tensor t on the list's device.
std::vector<torch::Tensor> TimesScalarTensor(torch::TensorList list,
                                             const torch::Tensor& t) {
#ifdef SLIMTORCH_FOREACH_TENSOR_SCALAR
  return at::_foreach_mul(list, t);
#else
  std::vector<torch::Tensor> out;
  out.reserve(list.size());
  for (const auto& x : list) out.push_back(x * t);
  return out;
#endif
}

void MulByScalarTensor_(torch::TensorList list, const torch::Tensor& t) {
#ifdef SLIMTORCH_FOREACH_TENSOR_SCALAR
  at::_foreach_mul_(list, t);
#else
  for (const auto& x : list) const_cast<torch::Tensor&>(x).mul_(t);
#endif
}

}  // namespace

bool DeviceUpdate::Supports(const std::string& optimizer) {
  return optimizer == "sgd" || optimizer == "momentum" ||
         optimizer == "rmsprop";
}

DeviceUpdate::DeviceUpdate(const std::string& optimizer_name,
                           const NamedTensors& trainable,
                           const Optimizer& optimizer,
                           const OptimizerOptions& options,
                           const ExponentialMovingAverage* averages,
                           const NamedTensors& averaged, torch::Device device)
    : trainable_(trainable) {
  std::vector<std::string> suffixes;
  if (optimizer_name == "sgd") {
    kind_ = Kind::kSgd;
  } else if (optimizer_name == "momentum") {
    kind_ = Kind::kMomentum;
    momentum_ = Float32(options.momentum);
    suffixes = {"Momentum"};
  } else if (optimizer_name == "rmsprop") {
    kind_ = Kind::kRmsProp;
    momentum_ = Float32(options.rmsprop_momentum);
    // As RmsPropOptimizer: (1 - decay) in float32.
    rms_decay_complement_ = Float32(1.0 - Float32(options.rmsprop_decay));
    epsilon_ = Float32(options.opt_epsilon);
    suffixes = {"RMSProp", "RMSProp_1"};
  } else {
    SLIM_FAIL("--optimizer=", optimizer_name,
              " has no multi-tensor device update (sgd, momentum and rmsprop "
              "have)");
  }
  std::map<std::string, torch::Tensor> state;
  for (const auto& s : optimizer.State()) state[s.name] = s.tensor;
  for (const auto& v : trainable_) {
    std::vector<torch::Tensor> slots;
    for (const auto& suffix : suffixes) {
      auto it = state.find(v.name + "/" + suffix);
      SLIM_CHECK(it != state.end(), "optimizer ", optimizer.name(),
                 " has no slot ", v.name, "/", suffix);
      slots.push_back(it->second);
    }
    slots_.push_back(std::move(slots));
  }
  lr_ = torch::zeros(
      {}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  step_ = torch::zeros(
      {}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  if (averages != nullptr) {
    ema_decay_ = averages->decay();
    for (const auto& s : averages->shadows()) shadows_.push_back(s.tensor);
    for (const auto& v : averaged) averaged_.push_back(v.tensor);
    SLIM_CHECK(shadows_.size() == averaged_.size(),
               "moving averages: ", shadows_.size(), " shadows for ",
               averaged_.size(), " variables");
  }
}

void DeviceUpdate::SetStep(double learning_rate, int64_t global_step_after) {
  lr_.fill_(static_cast<float>(learning_rate));
  step_.fill_(global_step_after);
}

void DeviceUpdate::ApplyOptimizer() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> vars, grads;
  std::vector<std::vector<torch::Tensor>> slots(
      slots_.empty() ? 0 : slots_[0].size());
  for (size_t i = 0; i < trainable_.size(); ++i) {
    const torch::Tensor& g = trainable_[i].tensor.grad();
    if (!g.defined()) continue;
    SLIM_CHECK(!g.is_sparse() && g.sizes() == trainable_[i].tensor.sizes(),
               "gradient of ", trainable_[i].name, " is sparse or of shape ",
               g.sizes());
    vars.push_back(trainable_[i].tensor);
    grads.push_back(g);
    for (size_t k = 0; k < slots.size(); ++k) slots[k].push_back(slots_[i][k]);
  }
  if (vars.empty()) return;
  switch (kind_) {
    case Kind::kSgd: {
      // var -= lr * g
      at::_foreach_sub_(vars, TimesScalarTensor(grads, lr_));
      break;
    }
    case Kind::kMomentum: {
      // accum = accum * momentum + g;  var -= lr * accum
      std::vector<torch::Tensor>& accum = slots[0];
      at::_foreach_mul_(accum, momentum_);
      at::_foreach_add_(accum, grads);
      at::_foreach_sub_(vars, TimesScalarTensor(accum, lr_));
      break;
    }
    case Kind::kRmsProp: {
      // ms += (g² - ms) * (1 - decay)
      // mom = mom * momentum + g * lr / sqrt(ms + epsilon);  var -= mom
      std::vector<torch::Tensor>& ms = slots[0];
      std::vector<torch::Tensor>& mom = slots[1];
      std::vector<torch::Tensor> s = at::_foreach_mul(grads, grads);
      at::_foreach_sub_(s, ms);
      at::_foreach_add_(ms, s, rms_decay_complement_);
      s = at::_foreach_add(ms, epsilon_);
      at::_foreach_sqrt_(s);
      at::_foreach_mul_(mom, momentum_);
      at::_foreach_addcdiv_(mom, TimesScalarTensor(grads, lr_), s);
      at::_foreach_sub_(vars, mom);
      break;
    }
  }
}

void DeviceUpdate::ApplyAverages() {
  if (shadows_.empty()) return;
  torch::NoGradGuard no_grad;
  // As ExponentialMovingAverage::EffectiveDecay, in float32 on the device.
  torch::Tensor n = step_.to(torch::kFloat32);
  torch::Tensor ratio = (n + 1.0f) / (n + 10.0f);
  torch::Tensor complement = 1.0f - ratio.clamp_max(ema_decay_);
  // shadow -= (shadow - var) * (1 - decay)
  std::vector<torch::Tensor> d = at::_foreach_sub(shadows_, averaged_);
  MulByScalarTensor_(d, complement);
  at::_foreach_sub_(shadows_, d);
}

}  // namespace slimtorch
