// FtrlOptimizer, FTRL-Proximal without l2 shrinkage (TensorFlow's
// ApplyFtrl). Slots "<var>/Ftrl" (accum, starts at initial_accumulator_value
// > 0) and "<var>/Ftrl_1" (linear, zeros); p = -learning_rate_power >= 0:
//   new_accum = accum + g²
//   linear += g - (new_accum^p - accum^p) / lr * var
//   var = |linear| > l1 ? (l1 * sign(linear) - linear)
//                           / (new_accum^p / lr + 2 * l2)
//                       : 0
//   accum = new_accum
// p == 0.5 uses sqrt, as the kernel does. No device form.

#include <memory>
#include <utility>

#include "../slot_optimizer.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace train_internal {
namespace {

struct FtrlOptions {
  double learning_rate_power = -0.5;       // --ftrl_learning_rate_power
  double initial_accumulator_value = 0.1;  // --ftrl_initial_accumulator_value
  double l1 = 0.0;                         // --ftrl_l1
  double l2 = 0.0;                         // --ftrl_l2
};

class FtrlOptimizer : public SlotOptimizer {
 public:
  FtrlOptimizer(NamedTensors variables, const FtrlOptions& o)
      : SlotOptimizer("ftrl", std::move(variables),
                      {{"Ftrl", Checked(o)}, {"Ftrl_1", 0.0}}, 2),
        power_(-Float32(o.learning_rate_power)),
        l1_(Float32(o.l1)),
        two_l2_(2.0 * Float32(o.l2)) {}

 private:
  static double Checked(const FtrlOptions& o) {
    SLIM_CHECK(o.initial_accumulator_value > 0,
               "ftrl: initial_accumulator_value must be positive, got ",
               o.initial_accumulator_value);
    SLIM_CHECK(o.learning_rate_power <= 0,
               "ftrl: learning_rate_power must be <= 0, got ",
               o.learning_rate_power);
    SLIM_CHECK(o.l1 >= 0, "ftrl: l1 must be >= 0, got ", o.l1);
    SLIM_CHECK(o.l2 >= 0, "ftrl: l2 must be >= 0, got ", o.l2);
    return Float32(o.initial_accumulator_value);
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

SLIM_REGISTER_OPTIMIZER("ftrl", DescribeOptimizer<FtrlOptimizer, FtrlOptions>(
                                    {{"ftrl_learning_rate_power",
                                      &FtrlOptions::learning_rate_power},
                                     {"ftrl_initial_accumulator_value",
                                      &FtrlOptions::initial_accumulator_value},
                                     {"ftrl_l1", &FtrlOptions::l1},
                                     {"ftrl_l2", &FtrlOptions::l2}},
                                    /*has_device_form=*/false));

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
