// AdadeltaOptimizer (TensorFlow's ApplyAdadelta). Slots "<var>/Adadelta"
// (accum, zeros) and "<var>/Adadelta_1" (accum_update, zeros):
//   accum = rho * accum + (1 - rho) * g²
//   u = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * g
//   var -= lr * u;  accum_update = rho * accum_update + (1 - rho) * u²

#include <memory>
#include <utility>

#include "../multi_tensor.h"
#include "../slot_optimizer.h"

namespace slimtorch {
namespace train_internal {
namespace {

struct AdadeltaOptions {
  double rho = 0.95;     // --adadelta_rho
  double epsilon = 1.0;  // --opt_epsilon (TF-Slim's unusually large 1.0)
};

class AdadeltaOptimizer : public SlotOptimizer {
 public:
  AdadeltaOptimizer(NamedTensors variables, const AdadeltaOptions& o)
      : SlotOptimizer("adadelta", std::move(variables),
                      {{"Adadelta", 0.0}, {"Adadelta_1", 0.0}}, 2),
        rho_(Float32(o.rho)),
        epsilon_(Float32(o.epsilon)),
        epsilon_tensor_(CpuScalar(epsilon_)) {}

  std::unique_ptr<DeviceOptimizer> MakeDeviceForm(torch::Device) override {
    return std::make_unique<Device>(*this);
  }

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& accum = e.slots[0];
    torch::Tensor& accum_update = e.slots[1];
    torch::Tensor& s = e.scratch[0];
    torch::Tensor& t = e.scratch[1];
    const double one_minus_rho = InDtype(1.0 - rho_, e.var.scalar_type());
    at::mul_out(s, g, g);
    accum.mul_(rho_).add_(s, one_minus_rho);
    at::add_out(t, accum_update, epsilon_tensor_);
    t.sqrt_();
    at::add_out(s, accum, epsilon_tensor_);
    s.rsqrt_();
    s.mul_(t).mul_(g);
    e.var.sub_(s, lr);
    at::mul_out(t, s, s);
    accum_update.mul_(rho_).add_(t, one_minus_rho);
  }

  class Device : public SlotDeviceForm {
   public:
    explicit Device(const AdadeltaOptimizer& o)
        : SlotDeviceForm(o),
          rho_(o.rho_),
          one_minus_rho_(Float32(1.0 - o.rho_)),
          epsilon_(o.epsilon_) {}

   private:
    void Update(SlotGradients& g, const torch::Tensor& lr,
                const torch::Tensor&) override {
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
      at::_foreach_sub_(g.vars, TimesScalarTensor(s, lr));
      t = at::_foreach_mul(s, s);
      at::_foreach_mul_(accum_update, rho_);
      at::_foreach_add_(accum_update, t, one_minus_rho_);
    }

    double rho_, one_minus_rho_, epsilon_;
  };

  double rho_;
  double epsilon_;
  torch::Tensor epsilon_tensor_;
};

SLIM_REGISTER_OPTIMIZER("adadelta",
                        DescribeOptimizer<AdadeltaOptimizer, AdadeltaOptions>(
                            {{"adadelta_rho", &AdadeltaOptions::rho},
                             {"opt_epsilon", &AdadeltaOptions::epsilon}},
                            /*has_device_form=*/true));

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
