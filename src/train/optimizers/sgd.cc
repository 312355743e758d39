// GradientDescentOptimizer (TensorFlow's ApplyGradientDescent):
//   var -= lr * g
// No hyper-parameters, no slots.

#include <memory>
#include <utility>

#include "../multi_tensor.h"
#include "../slot_optimizer.h"

namespace slimtorch {
namespace train_internal {
namespace {

struct SgdOptions {};

class SgdOptimizer : public SlotOptimizer {
 public:
  SgdOptimizer(NamedTensors variables, const SgdOptions&)
      : SlotOptimizer("sgd", std::move(variables), {}, 0) {}

  std::unique_ptr<DeviceOptimizer> MakeDeviceForm(torch::Device) override {
    return std::make_unique<Device>(*this);
  }

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    e.var.add_(g, -lr);
  }

  class Device : public SlotDeviceForm {
   public:
    using SlotDeviceForm::SlotDeviceForm;

   private:
    void Update(SlotGradients& g, const torch::Tensor& lr,
                const torch::Tensor& step) override {
      if (FusedUpdate(UpdateKind::kSgd, g.vars, g.grads, nullptr, lr, 0, step,
                      0)) {
        return;
      }
      at::_foreach_sub_(g.vars, TimesScalarTensor(g.grads, lr));
    }
  };
};

SLIM_REGISTER_OPTIMIZER("sgd", DescribeOptimizer<SgdOptimizer, SgdOptions>(
                                   {}, /*has_device_form=*/true));

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
