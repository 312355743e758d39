// The seven TF1 optimizers of TF-Slim's _configure_optimizer. Each Update()
// follows the CPU functor of TensorFlow's training_ops.cc (operation order
// included, so float32 results agree to within a few ulps) using in-place
// LibTorch ops on the variable's device and dtype and preallocated scratch.
// Tensor::lerp_ is avoided: LibTorch 1.13's CPU kernel evaluates
// end - (end - self) * (1 - weight), which cancels badly for small weights.

#include <cmath>
#include <memory>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/train/optimizer.h"
#include "slot_optimizer.h"

namespace slimtorch {
namespace train_internal {
namespace {

// 0-dim CPU double tensor; added to a dense tensor it acts as a scalar of
// that tensor's dtype (lets add_out write into preallocated scratch).
torch::Tensor CpuScalar(double value) {
  return torch::scalar_tensor(value, torch::kDouble);
}

// GradientDescentOptimizer (ApplyGradientDescent): var -= lr * g.
class SgdOptimizer : public SlotOptimizer {
 public:
  SgdOptimizer(NamedTensors variables, const OptimizerOptions&)
      : SlotOptimizer("sgd", std::move(variables), {}, 0) {}

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    e.var.add_(g, -lr);
  }
};

// MomentumOptimizer, not Nesterov (ApplyMomentum). Slot "<var>/Momentum"
// (accum, zeros):  accum = accum * momentum + g;  var -= lr * accum.
class MomentumOptimizer : public SlotOptimizer {
 public:
  MomentumOptimizer(NamedTensors variables, const OptimizerOptions& o)
      : SlotOptimizer("momentum", std::move(variables), {{"Momentum", 0.0}},
                      0),
        momentum_(Float32(o.momentum)) {}

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& accum = e.slots[0];
    at::add_out(accum, g, accum, momentum_);
    e.var.add_(accum, -lr);
  }

  double momentum_;
};

// RMSPropOptimizer, not centered (ApplyRMSProp). Slots "<var>/RMSProp" (ms,
// ones) and "<var>/RMSProp_1" (mom, zeros):
//   ms += (g² - ms) * (1 - decay)
//   mom = mom * momentum + g * lr / sqrt(ms + epsilon);  var -= mom
class RmsPropOptimizer : public SlotOptimizer {
 public:
  RmsPropOptimizer(NamedTensors variables, const OptimizerOptions& o)
      : SlotOptimizer("rmsprop", std::move(variables),
                      {{"RMSProp", 1.0}, {"RMSProp_1", 0.0}}, 1),
        decay_(Float32(o.rmsprop_decay)),
        momentum_(Float32(o.rmsprop_momentum)),
        epsilon_(CpuScalar(Float32(o.opt_epsilon))) {}

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& ms = e.slots[0];
    torch::Tensor& mom = e.slots[1];
    torch::Tensor& s = e.scratch[0];
    at::mul_out(s, g, g);
    s.sub_(ms);
    ms.add_(s, InDtype(1.0 - decay_, e.var.scalar_type()));
    at::add_out(s, ms, epsilon_);
    s.sqrt_();
    mom.mul_(momentum_).addcdiv_(g, s, lr);
    e.var.sub_(mom);
  }

  double decay_;
  double momentum_;
  torch::Tensor epsilon_;
};

// AdamOptimizer (ApplyAdam). Slots "<var>/Adam" (m, zeros) and
// "<var>/Adam_1" (v, zeros); non-slot float32 scalars "beta1_power" and
// "beta2_power" (start at beta1, beta2; multiplied by them after each step;
// kept on the CPU so reading them never synchronises a GPU):
//   alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//   m += (g - m) * (1 - beta1);  v += (g² - v) * (1 - beta2)
//   var -= alpha * m / (sqrt(v) + epsilon)
class AdamOptimizer : public SlotOptimizer {
 public:
  AdamOptimizer(NamedTensors variables, const OptimizerOptions& o)
      : SlotOptimizer("adam", std::move(variables),
                      {{"Adam", 0.0}, {"Adam_1", 0.0}}, 1),
        beta1_(Float32(o.adam_beta1)),
        beta2_(Float32(o.adam_beta2)),
        epsilon_(Float32(o.opt_epsilon)),
        beta1_power_(torch::full({}, beta1_, torch::kFloat)),
        beta2_power_(torch::full({}, beta2_, torch::kFloat)) {}

 private:
  template <typename T>
  static double Alpha(double lr, float beta1_power, float beta2_power) {
    return static_cast<double>(static_cast<T>(lr) *
                               std::sqrt(T(1) - static_cast<T>(beta2_power)) /
                               (T(1) - static_cast<T>(beta1_power)));
  }

  void Prepare() override {
    beta1_power_value_ = beta1_power_.item<float>();
    beta2_power_value_ = beta2_power_.item<float>();
  }

  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& m = e.slots[0];
    torch::Tensor& v = e.slots[1];
    torch::Tensor& s = e.scratch[0];
    const c10::ScalarType dtype = e.var.scalar_type();
    const double alpha =
        dtype == torch::kDouble
            ? Alpha<double>(lr, beta1_power_value_, beta2_power_value_)
            : Alpha<float>(lr, beta1_power_value_, beta2_power_value_);
    at::sub_out(s, g, m);
    m.add_(s, InDtype(1.0 - beta1_, dtype));
    at::mul_out(s, g, g);
    s.sub_(v);
    v.add_(s, InDtype(1.0 - beta2_, dtype));
    at::sqrt_out(s, v);
    s.add_(epsilon_);
    e.var.addcdiv_(m, s, -alpha);
  }

  void Finish() override {
    beta1_power_.mul_(beta1_);
    beta2_power_.mul_(beta2_);
  }

  NamedTensors NonSlotState() const override {
    return {{"beta1_power", beta1_power_}, {"beta2_power", beta2_power_}};
  }

  double beta1_;
  double beta2_;
  double epsilon_;
  torch::Tensor beta1_power_;
  torch::Tensor beta2_power_;
  float beta1_power_value_ = 0;
  float beta2_power_value_ = 0;
};

// AdagradOptimizer (ApplyAdagrad). Slot "<var>/Adagrad" (accum, starts at
// adagrad_initial_accumulator_value > 0):
//   accum += g²;  var -= lr * g / sqrt(accum)
class AdagradOptimizer : public SlotOptimizer {
 public:
  AdagradOptimizer(NamedTensors variables, const OptimizerOptions& o)
      : SlotOptimizer("adagrad", std::move(variables),
                      {{"Adagrad", Checked(o)}}, 1) {}

 private:
  static double Checked(const OptimizerOptions& o) {
    SLIM_CHECK(o.adagrad_initial_accumulator_value > 0,
               "adagrad: initial_accumulator_value must be positive, got ",
               o.adagrad_initial_accumulator_value);
    return Float32(o.adagrad_initial_accumulator_value);
  }

  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& accum = e.slots[0];
    torch::Tensor& s = e.scratch[0];
    accum.addcmul_(g, g);
    at::rsqrt_out(s, accum);
    e.var.addcmul_(g, s, -lr);
  }
};

// AdadeltaOptimizer (ApplyAdadelta). Slots "<var>/Adadelta" (accum, zeros)
// and "<var>/Adadelta_1" (accum_update, zeros):
//   accum = rho * accum + (1 - rho) * g²
//   u = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * g
//   var -= lr * u;  accum_update = rho * accum_update + (1 - rho) * u²
class AdadeltaOptimizer : public SlotOptimizer {
 public:
  AdadeltaOptimizer(NamedTensors variables, const OptimizerOptions& o)
      : SlotOptimizer("adadelta", std::move(variables),
                      {{"Adadelta", 0.0}, {"Adadelta_1", 0.0}}, 2),
        rho_(Float32(o.adadelta_rho)),
        epsilon_(CpuScalar(Float32(o.opt_epsilon))) {}

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& accum = e.slots[0];
    torch::Tensor& accum_update = e.slots[1];
    torch::Tensor& s = e.scratch[0];
    torch::Tensor& t = e.scratch[1];
    const double one_minus_rho = InDtype(1.0 - rho_, e.var.scalar_type());
    at::mul_out(s, g, g);
    accum.mul_(rho_).add_(s, one_minus_rho);
    at::add_out(t, accum_update, epsilon_);
    t.sqrt_();
    at::add_out(s, accum, epsilon_);
    s.rsqrt_();
    s.mul_(t).mul_(g);
    e.var.sub_(s, lr);
    at::mul_out(t, s, s);
    accum_update.mul_(rho_).add_(t, one_minus_rho);
  }

  double rho_;
  torch::Tensor epsilon_;
};

// FtrlOptimizer, FTRL-Proximal without l2 shrinkage (ApplyFtrl). Slots
// "<var>/Ftrl" (accum, starts at ftrl_initial_accumulator_value > 0) and
// "<var>/Ftrl_1" (linear, zeros); p = -learning_rate_power >= 0:
//   new_accum = accum + g²
//   linear += g - (new_accum^p - accum^p) / lr * var
//   var = |linear| > l1 ? (l1 * sign(linear) - linear)
//                           / (new_accum^p / lr + 2 * l2)
//                       : 0
//   accum = new_accum
// p == 0.5 uses sqrt, as the kernel does.
class FtrlOptimizer : public SlotOptimizer {
 public:
  FtrlOptimizer(NamedTensors variables, const OptimizerOptions& o)
      : SlotOptimizer("ftrl", std::move(variables),
                      {{"Ftrl", Checked(o)}, {"Ftrl_1", 0.0}}, 2),
        power_(-Float32(o.ftrl_learning_rate_power)),
        l1_(Float32(o.ftrl_l1)),
        two_l2_(2.0 * Float32(o.ftrl_l2)) {}

 private:
  static double Checked(const OptimizerOptions& o) {
    SLIM_CHECK(o.ftrl_initial_accumulator_value > 0,
               "ftrl: initial_accumulator_value must be positive, got ",
               o.ftrl_initial_accumulator_value);
    SLIM_CHECK(o.ftrl_learning_rate_power <= 0,
               "ftrl: learning_rate_power must be <= 0, got ",
               o.ftrl_learning_rate_power);
    SLIM_CHECK(o.ftrl_l1 >= 0, "ftrl: l1 must be >= 0, got ", o.ftrl_l1);
    SLIM_CHECK(o.ftrl_l2 >= 0, "ftrl: l2 must be >= 0, got ", o.ftrl_l2);
    return Float32(o.ftrl_initial_accumulator_value);
  }

  // out = x^power_.
  void Power(torch::Tensor& out, const torch::Tensor& x) const {
    if (power_ == 0.5) {
      at::sqrt_out(out, x);
    } else {
      at::pow_out(out, x, power_);
    }
  }

  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& accum = e.slots[0];
    torch::Tensor& linear = e.slots[1];
    torch::Tensor& s = e.scratch[0];
    torch::Tensor& t = e.scratch[1];
    Power(s, accum);
    accum.addcmul_(g, g);
    Power(t, accum);
    at::sub_out(s, t, s);
    s.div_(lr).mul_(e.var);
    at::sub_out(s, g, s);
    linear.add_(s);
    t.div_(lr).add_(two_l2_);
    at::sign_out(s, linear);
    s.mul_(l1_).sub_(linear);
    s.div_(t);
    at::abs_out(t, linear);
    t.gt_(l1_);
    // 0 + pre_shrink * mask: +0 where the kernel selects 0.
    at::addcmul_out(e.var, e.zero, s, t);
  }

  double power_;
  double l1_;
  double two_l2_;
};

template <typename T>
std::unique_ptr<Optimizer> Make(NamedTensors variables,
                                const OptimizerOptions& options) {
  return std::make_unique<T>(std::move(variables), options);
}

SLIM_REGISTER_OPTIMIZER("adadelta", Make<AdadeltaOptimizer>);
SLIM_REGISTER_OPTIMIZER("adagrad", Make<AdagradOptimizer>);
SLIM_REGISTER_OPTIMIZER("adam", Make<AdamOptimizer>);
SLIM_REGISTER_OPTIMIZER("ftrl", Make<FtrlOptimizer>);
SLIM_REGISTER_OPTIMIZER("momentum", Make<MomentumOptimizer>);
SLIM_REGISTER_OPTIMIZER("rmsprop", Make<RmsPropOptimizer>);
SLIM_REGISTER_OPTIMIZER("sgd", Make<SgdOptimizer>);

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
