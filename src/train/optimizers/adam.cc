// AdamOptimizer (TensorFlow's ApplyAdam). Slots "<var>/Adam" (m, zeros) and
// "<var>/Adam_1" (v, zeros); non-slot float32 scalars "beta1_power" and
// "beta2_power" (start at beta1, beta2; multiplied by them after each step;
// kept on the CPU so reading them never synchronises a GPU):
//   alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//   m += (g - m) * (1 - beta1);  v += (g² - v) * (1 - beta2)
//   var -= alpha * m / (sqrt(v) + epsilon)

#include <cmath>
#include <memory>
#include <utility>

#include "../multi_tensor.h"
#include "../slot_optimizer.h"

namespace slimtorch {
namespace train_internal {
namespace {

struct AdamOptions {
  double beta1 = 0.9;    // --adam_beta1
  double beta2 = 0.999;  // --adam_beta2
  double epsilon = 1.0;  // --opt_epsilon (TF-Slim's unusually large 1.0)
};

class AdamOptimizer : public SlotOptimizer {
 public:
  AdamOptimizer(NamedTensors variables, const AdamOptions& o)
      : SlotOptimizer("adam", std::move(variables),
                      {{"Adam", 0.0}, {"Adam_1", 0.0}}, 1),
        beta1_(Float32(o.beta1)),
        beta2_(Float32(o.beta2)),
        epsilon_(Float32(o.epsilon)),
        beta1_power_(torch::full({}, beta1_, torch::kFloat)),
        beta2_power_(torch::full({}, beta2_, torch::kFloat)) {}

  std::unique_ptr<DeviceOptimizer> MakeDeviceForm(
      torch::Device device) override {
    return std::make_unique<Device>(*this, device);
  }

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

  // The beta powers live on the device between SyncStates; alpha is
  // computed there in float32.
  class Device : public SlotDeviceForm {
   public:
    Device(const AdamOptimizer& o, torch::Device device)
        : SlotDeviceForm(o),
          beta1_(o.beta1_),
          beta2_(o.beta2_),
          one_minus_beta1_(Float32(1.0 - o.beta1_)),
          one_minus_beta2_(Float32(1.0 - o.beta2_)),
          epsilon_(o.epsilon_),
          beta1_power_(o.beta1_power_),
          beta2_power_(o.beta2_power_),
          beta1_power_device_(o.beta1_power_.to(device).clone()),
          beta2_power_device_(o.beta2_power_.to(device).clone()) {}

    void SyncState() override {
      torch::NoGradGuard no_grad;
      beta1_power_.copy_(beta1_power_device_);
      beta2_power_.copy_(beta2_power_device_);
    }

   private:
    void Update(SlotGradients& g, const torch::Tensor& lr,
                const torch::Tensor&) override {
      std::vector<torch::Tensor>& m = g.slots[0];
      std::vector<torch::Tensor>& v = g.slots[1];
      torch::Tensor alpha = lr * (1.0f - beta2_power_device_).sqrt() /
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

    double beta1_, beta2_, one_minus_beta1_, one_minus_beta2_, epsilon_;
    // The optimizer's (CPU) beta powers and their device copies.
    torch::Tensor beta1_power_, beta2_power_;
    torch::Tensor beta1_power_device_, beta2_power_device_;
  };

  double beta1_;
  double beta2_;
  double epsilon_;
  torch::Tensor beta1_power_;
  torch::Tensor beta2_power_;
  float beta1_power_value_ = 0;
  float beta2_power_value_ = 0;
};

SLIM_REGISTER_OPTIMIZER("adam", DescribeOptimizer<AdamOptimizer, AdamOptions>(
                                    {{"adam_beta1", &AdamOptions::beta1},
                                     {"adam_beta2", &AdamOptions::beta2},
                                     {"opt_epsilon", &AdamOptions::epsilon}},
                                    /*has_device_form=*/true));

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
