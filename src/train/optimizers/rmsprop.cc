// RMSPropOptimizer, not centered (TensorFlow's ApplyRMSProp). Slots
// "<var>/RMSProp" (ms, ones) and "<var>/RMSProp_1" (mom, zeros):
//   ms += (g² - ms) * (1 - decay)
//   mom = mom * momentum + g * lr / sqrt(ms + epsilon);  var -= mom

#include <memory>
#include <utility>

#include "../multi_tensor.h"
#include "../slot_optimizer.h"

namespace slimtorch {
namespace train_internal {
namespace {

struct RmsPropOptions {
  double decay = 0.9;     // --rmsprop_decay
  double momentum = 0.9;  // --rmsprop_momentum
  double epsilon = 1.0;   // --opt_epsilon (TF-Slim's unusually large 1.0)
};

class RmsPropOptimizer : public SlotOptimizer {
 public:
  RmsPropOptimizer(NamedTensors variables, const RmsPropOptions& o)
      : SlotOptimizer("rmsprop", std::move(variables),
                      {{"RMSProp", 1.0}, {"RMSProp_1", 0.0}}, 1),
        decay_(Float32(o.decay)),
        momentum_(Float32(o.momentum)),
        epsilon_(Float32(o.epsilon)),
        epsilon_tensor_(CpuScalar(epsilon_)) {}

  std::unique_ptr<DeviceOptimizer> MakeDeviceForm(torch::Device) override {
    return std::make_unique<Device>(*this);
  }

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& ms = e.slots[0];
    torch::Tensor& mom = e.slots[1];
    torch::Tensor& s = e.scratch[0];
    at::mul_out(s, g, g);
    s.sub_(ms);
    ms.add_(s, InDtype(1.0 - decay_, e.var.scalar_type()));
    at::add_out(s, ms, epsilon_tensor_);
    s.sqrt_();
    mom.mul_(momentum_).addcdiv_(g, s, lr);
    e.var.sub_(mom);
  }

  class Device : public SlotDeviceForm {
   public:
    // (1 - decay) in float32, as the per-variable update on float32.
    explicit Device(const RmsPropOptimizer& o)
        : SlotDeviceForm(o),
          momentum_(o.momentum_),
          decay_complement_(Float32(1.0 - o.decay_)),
          epsilon_(o.epsilon_) {}

   private:
    void Update(SlotGradients& g, const torch::Tensor& lr,
                const torch::Tensor&) override {
      std::vector<torch::Tensor>& ms = g.slots[0];
      std::vector<torch::Tensor>& mom = g.slots[1];
      std::vector<torch::Tensor> s = at::_foreach_mul(g.grads, g.grads);
      at::_foreach_sub_(s, ms);
      at::_foreach_add_(ms, s, decay_complement_);
      s = at::_foreach_add(ms, epsilon_);
      at::_foreach_sqrt_(s);
      at::_foreach_mul_(mom, momentum_);
      at::_foreach_addcdiv_(mom, TimesScalarTensor(g.grads, lr), s);
      at::_foreach_sub_(g.vars, mom);
    }

    double momentum_;
    double decay_complement_;
    double epsilon_;
  };

  double decay_;
  double momentum_;
  double epsilon_;
  torch::Tensor epsilon_tensor_;
};

SLIM_REGISTER_OPTIMIZER("rmsprop",
                        DescribeOptimizer<RmsPropOptimizer, RmsPropOptions>(
                            {{"rmsprop_decay", &RmsPropOptions::decay},
                             {"rmsprop_momentum", &RmsPropOptions::momentum},
                             {"opt_epsilon", &RmsPropOptions::epsilon}},
                            /*has_device_form=*/true));

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
