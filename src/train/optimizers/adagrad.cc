// AdagradOptimizer (TensorFlow's ApplyAdagrad). Slot "<var>/Adagrad" (accum,
// starts at initial_accumulator_value > 0):
//   accum += g²;  var -= lr * g / sqrt(accum)

#include <memory>
#include <utility>

#include "../multi_tensor.h"
#include "../slot_optimizer.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace train_internal {
namespace {

struct AdagradOptions {
  double initial_accumulator_value =
      0.1;  // --adagrad_initial_accumulator_value
};

class AdagradOptimizer : public SlotOptimizer {
 public:
  AdagradOptimizer(NamedTensors variables, const AdagradOptions& o)
      : SlotOptimizer("adagrad", std::move(variables),
                      {{"Adagrad", Checked(o)}}, 1) {}

  std::unique_ptr<DeviceOptimizer> MakeDeviceForm(torch::Device) override {
    return std::make_unique<Device>(*this);
  }

 private:
  static double Checked(const AdagradOptions& o) {
    SLIM_CHECK(o.initial_accumulator_value > 0,
               "adagrad: initial_accumulator_value must be positive, got ",
               o.initial_accumulator_value);
    return Float32(o.initial_accumulator_value);
  }

  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& accum = e.slots[0];
    torch::Tensor& s = e.scratch[0];
    accum.addcmul_(g, g);
    at::rsqrt_out(s, accum);
    e.var.addcmul_(g, s, -lr);
  }

  class Device : public SlotDeviceForm {
   public:
    using SlotDeviceForm::SlotDeviceForm;

   private:
    void Update(SlotGradients& g, const torch::Tensor& lr,
                const torch::Tensor&) override {
      std::vector<torch::Tensor>& accum = g.slots[0];
      at::_foreach_addcmul_(accum, g.grads, g.grads);
      std::vector<torch::Tensor> s = at::_foreach_sqrt(accum);
      at::_foreach_reciprocal_(s);
      at::_foreach_mul_(s, g.grads);
      MulByScalarTensor_(s, lr);
      at::_foreach_sub_(g.vars, s);
    }
  };
};

SLIM_REGISTER_OPTIMIZER("adagrad",
                        DescribeOptimizer<AdagradOptimizer, AdagradOptions>(
                            {{"adagrad_initial_accumulator_value",
                              &AdagradOptions::initial_accumulator_value}},
                            /*has_device_form=*/true));

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
