#include "slimtorch/train/device_update.h"

#include <torch/version.h>

#include <map>

#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/train/moving_average.h"
#include "slot_optimizer.h"
#include "update_kernels.h"

#ifdef SLIMTORCH_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/autograd/variable.h>
#endif

// LibTorch >= 2.1 multiplies a tensor list by a 0-dim device tensor in one
// kernel; older versions (Debian's 1.13) loop.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define SLIMTORCH_FOREACH_TENSOR_SCALAR 1
#endif

namespace slimtorch {
namespace {

using train_internal::Float32;
using train_internal::UpdateKind;

// a[i] op= b[i] (c[i]) through update_kernels.h's fused kernel, when every
// tensor is a dense float32 tensor on the learning rate's GPU with its
// partners' shape and strides; false (nothing done) otherwise. `c` may be
// null.
bool FusedUpdate(UpdateKind kind, const std::vector<torch::Tensor>& a,
                 const std::vector<torch::Tensor>& b,
                 const std::vector<torch::Tensor>* c, const torch::Tensor& lr,
                 double momentum, const torch::Tensor& step, float decay) {
#ifdef SLIMTORCH_WITH_CUDA_KERNELS
  if (!KernelSwitchOn(KernelSwitch::kFusedKernels) || !lr.is_cuda() ||
      a.size() != b.size() || (c != nullptr && c->size() != a.size())) {
    return false;
  }
  auto fits = [&](const torch::Tensor& t, const torch::Tensor& first) {
    return t.device() == lr.device() && t.scalar_type() == torch::kFloat32 &&
           t.sizes() == first.sizes() && t.strides() == first.strides() &&
           t.is_non_overlapping_and_dense();
  };
  std::vector<float*> pa, pc;
  std::vector<const float*> pb;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!fits(a[i], a[i]) || !fits(b[i], a[i]) ||
        (c != nullptr && !fits((*c)[i], a[i]))) {
      return false;
    }
    pa.push_back(a[i].data_ptr<float>());
    pb.push_back(b[i].data_ptr<float>());
    if (c != nullptr) pc.push_back((*c)[i].data_ptr<float>());
    sizes.push_back(a[i].numel());
  }
  train_internal::UpdateScalars s;
  s.kind = kind;
  s.learning_rate = lr.data_ptr<float>();
  s.momentum = static_cast<float>(momentum);
  s.step = step.data_ptr<int64_t>();
  s.decay = decay;
  const char* error = train_internal::MultiTensorUpdateCuda(
      s,
      train_internal::PackUpdateTensors(a.size(), pa.data(), pb.data(),
                                        c != nullptr ? pc.data() : nullptr,
                                        sizes.data()),
      at::cuda::getCurrentCUDAStream(lr.get_device()).stream());
  SLIM_CHECK(error == nullptr, "the fused multi-tensor update kernel: ", error);
  // As the in-place ops would: autograd sees the tensors changed.
  for (const auto& t : a) torch::autograd::impl::bump_version(t);
  if (c != nullptr) {
    for (const auto& t : *c) torch::autograd::impl::bump_version(t);
  }
  return true;
#else
  return false;
#endif
}

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

bool DeviceUpdate::FusedKernelsBuilt() {
#ifdef SLIMTORCH_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool DeviceUpdate::Supports(const std::string& optimizer) {
  return optimizer == "sgd" || optimizer == "momentum" ||
         optimizer == "rmsprop" || optimizer == "adam" ||
         optimizer == "adagrad" || optimizer == "adadelta";
}

DeviceUpdate::DeviceUpdate(const std::string& optimizer_name,
                           const NamedTensors& trainable,
                           const Optimizer& optimizer,
                           const OptimizerOptions& options,
                           const ExponentialMovingAverage* averages,
                           const NamedTensors& averaged, torch::Device device)
    : trainable_(trainable) {
  const std::vector<std::string> suffixes =
      ReadHyperParameters(optimizer_name, options);
  TakeOptimizerState(optimizer, suffixes, device);
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

std::vector<std::string> DeviceUpdate::ReadHyperParameters(
    const std::string& optimizer_name, const OptimizerOptions& options) {
  if (optimizer_name == "sgd") {
    kind_ = Kind::kSgd;
    return {};
  }
  if (optimizer_name == "momentum") {
    kind_ = Kind::kMomentum;
    momentum_ = Float32(options.momentum);
    return {"Momentum"};
  }
  if (optimizer_name == "rmsprop") {
    kind_ = Kind::kRmsProp;
    momentum_ = Float32(options.rmsprop_momentum);
    // As RmsPropOptimizer: (1 - decay) in float32.
    rms_decay_complement_ = Float32(1.0 - Float32(options.rmsprop_decay));
    epsilon_ = Float32(options.opt_epsilon);
    return {"RMSProp", "RMSProp_1"};
  }
  if (optimizer_name == "adam") {
    // As AdamOptimizer: hyper-parameters and (1 - beta) in float32.
    kind_ = Kind::kAdam;
    beta1_ = Float32(options.adam_beta1);
    beta2_ = Float32(options.adam_beta2);
    one_minus_beta1_ = Float32(1.0 - beta1_);
    one_minus_beta2_ = Float32(1.0 - beta2_);
    epsilon_ = Float32(options.opt_epsilon);
    return {"Adam", "Adam_1"};
  }
  if (optimizer_name == "adagrad") {
    kind_ = Kind::kAdagrad;
    return {"Adagrad"};
  }
  if (optimizer_name == "adadelta") {
    kind_ = Kind::kAdadelta;
    rho_ = Float32(options.adadelta_rho);
    one_minus_rho_ = Float32(1.0 - rho_);
    epsilon_ = Float32(options.opt_epsilon);
    return {"Adadelta", "Adadelta_1"};
  }
  SLIM_FAIL("--optimizer=", optimizer_name,
            " has no multi-tensor device update (every optimizer but ftrl "
            "has)");
}

void DeviceUpdate::TakeOptimizerState(const Optimizer& optimizer,
                                      const std::vector<std::string>& suffixes,
                                      torch::Device device) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& s : optimizer.State()) state[s.name] = s.tensor;
  if (kind_ == Kind::kAdam) {
    SLIM_CHECK(state.count("beta1_power") && state.count("beta2_power"),
               "optimizer ", optimizer.name(), " has no beta powers");
    beta1_power_ = state["beta1_power"];
    beta2_power_ = state["beta2_power"];
    beta1_power_device_ = beta1_power_.to(device).clone();
    beta2_power_device_ = beta2_power_.to(device).clone();
  }
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
}

void DeviceUpdate::SetStep(double learning_rate, int64_t global_step_after) {
  lr_.fill_(static_cast<float>(learning_rate));
  step_.fill_(global_step_after);
}

void DeviceUpdate::SyncState() {
  if (kind_ != Kind::kAdam) return;
  torch::NoGradGuard no_grad;
  beta1_power_.copy_(beta1_power_device_);
  beta2_power_.copy_(beta2_power_device_);
}

DeviceUpdate::Gradients DeviceUpdate::GatherGradients() const {
  Gradients g;
  g.slots.resize(slots_.empty() ? 0 : slots_[0].size());
  for (size_t i = 0; i < trainable_.size(); ++i) {
    const torch::Tensor& grad = trainable_[i].tensor.grad();
    if (!grad.defined()) continue;
    SLIM_CHECK(
        !grad.is_sparse() && grad.sizes() == trainable_[i].tensor.sizes(),
        "gradient of ", trainable_[i].name, " is sparse or of shape ",
        grad.sizes());
    g.vars.push_back(trainable_[i].tensor);
    g.grads.push_back(grad);
    for (size_t k = 0; k < g.slots.size(); ++k) {
      g.slots[k].push_back(slots_[i][k]);
    }
  }
  return g;
}

void DeviceUpdate::ApplyOptimizer() {
  torch::NoGradGuard no_grad;
  Gradients g = GatherGradients();
  if (g.vars.empty()) return;
  switch (kind_) {
    case Kind::kSgd:
      ApplySgd(g);
      break;
    case Kind::kMomentum:
      ApplyMomentum(g);
      break;
    case Kind::kRmsProp:
      ApplyRmsProp(g);
      break;
    case Kind::kAdam:
      ApplyAdam(g);
      break;
    case Kind::kAdagrad:
      ApplyAdagrad(g);
      break;
    case Kind::kAdadelta:
      ApplyAdadelta(g);
      break;
  }
}

// var -= lr * g
void DeviceUpdate::ApplySgd(Gradients& g) {
  if (FusedUpdate(UpdateKind::kSgd, g.vars, g.grads, nullptr, lr_, 0, step_,
                  0)) {
    return;
  }
  at::_foreach_sub_(g.vars, TimesScalarTensor(g.grads, lr_));
}

// accum = accum * momentum + g;  var -= lr * accum
void DeviceUpdate::ApplyMomentum(Gradients& g) {
  std::vector<torch::Tensor>& accum = g.slots[0];
  if (FusedUpdate(UpdateKind::kMomentum, g.vars, g.grads, &accum, lr_,
                  momentum_, step_, 0)) {
    return;
  }
  at::_foreach_mul_(accum, momentum_);
  at::_foreach_add_(accum, g.grads);
  at::_foreach_sub_(g.vars, TimesScalarTensor(accum, lr_));
}

// ms += (g² - ms) * (1 - decay)
// mom = mom * momentum + g * lr / sqrt(ms + epsilon);  var -= mom
void DeviceUpdate::ApplyRmsProp(Gradients& g) {
  std::vector<torch::Tensor>& ms = g.slots[0];
  std::vector<torch::Tensor>& mom = g.slots[1];
  std::vector<torch::Tensor> s = at::_foreach_mul(g.grads, g.grads);
  at::_foreach_sub_(s, ms);
  at::_foreach_add_(ms, s, rms_decay_complement_);
  s = at::_foreach_add(ms, epsilon_);
  at::_foreach_sqrt_(s);
  at::_foreach_mul_(mom, momentum_);
  at::_foreach_addcdiv_(mom, TimesScalarTensor(g.grads, lr_), s);
  at::_foreach_sub_(g.vars, mom);
}

// alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power)  (float32)
// m += (g - m) * (1 - beta1);  v += (g² - v) * (1 - beta2)
// var -= alpha * m / (sqrt(v) + epsilon);  beta powers *= beta
void DeviceUpdate::ApplyAdam(Gradients& g) {
  std::vector<torch::Tensor>& m = g.slots[0];
  std::vector<torch::Tensor>& v = g.slots[1];
  torch::Tensor alpha = lr_ * (1.0f - beta2_power_device_).sqrt() /
                        (1.0f - beta1_power_device_);
  std::vector<torch::Tensor> s = at::_foreach_sub(g.grads, m);
  at::_foreach_add_(m, s, one_minus_beta1_);
  s = at::_foreach_mul(g.grads, g.grads);
  at::_foreach_sub_(s, v);
  at::_foreach_add_(v, s, one_minus_beta2_);
  s = at::_foreach_sqrt(v);
  at::_foreach_add_(s, epsilon_);
  std::vector<torch::Tensor> step = at::_foreach_div(m, s);
  MulByScalarTensor_(step, alpha);
  at::_foreach_sub_(g.vars, step);
  beta1_power_device_.mul_(beta1_);
  beta2_power_device_.mul_(beta2_);
}

// accum += g²;  var -= lr * g / sqrt(accum)
void DeviceUpdate::ApplyAdagrad(Gradients& g) {
  std::vector<torch::Tensor>& accum = g.slots[0];
  at::_foreach_addcmul_(accum, g.grads, g.grads);
  std::vector<torch::Tensor> s = at::_foreach_sqrt(accum);
  at::_foreach_reciprocal_(s);
  at::_foreach_mul_(s, g.grads);
  MulByScalarTensor_(s, lr_);
  at::_foreach_sub_(g.vars, s);
}

// accum = rho * accum + (1 - rho) * g²
// u = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * g
// var -= lr * u;  accum_update = rho * accum_update + (1 - rho) * u²
void DeviceUpdate::ApplyAdadelta(Gradients& g) {
  std::vector<torch::Tensor>& accum = g.slots[0];
  std::vector<torch::Tensor>& accum_update = g.slots[1];
  std::vector<torch::Tensor> s = at::_foreach_mul(g.grads, g.grads);
  at::_foreach_mul_(accum, rho_);
  at::_foreach_add_(accum, s, one_minus_rho_);
  std::vector<torch::Tensor> t = at::_foreach_add(accum_update, epsilon_);
  at::_foreach_sqrt_(t);
  s = at::_foreach_add(accum, epsilon_);
  at::_foreach_sqrt_(s);
  at::_foreach_reciprocal_(s);
  at::_foreach_mul_(s, t);
  at::_foreach_mul_(s, g.grads);
  at::_foreach_sub_(g.vars, TimesScalarTensor(s, lr_));
  t = at::_foreach_mul(s, s);
  at::_foreach_mul_(accum_update, rho_);
  at::_foreach_add_(accum_update, t, one_minus_rho_);
}

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
