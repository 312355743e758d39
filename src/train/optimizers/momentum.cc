// MomentumOptimizer, not Nesterov (TensorFlow's ApplyMomentum). Slot
// "<var>/Momentum" (accum, zeros):
//   accum = accum * momentum + g;  var -= lr * accum

#include <memory>
#include <utility>

#include "../multi_tensor.h"
#include "../slot_optimizer.h"

namespace slimtorch {
namespace train_internal {
namespace {

struct MomentumOptions {
  double momentum = 0.9;  // --momentum
};

class MomentumOptimizer : public SlotOptimizer {
 public:
  MomentumOptimizer(NamedTensors variables, const MomentumOptions& o)
      : SlotOptimizer("momentum", std::move(variables), {{"Momentum", 0.0}}, 0),
        momentum_(Float32(o.momentum)) {}

  std::unique_ptr<DeviceOptimizer> MakeDeviceForm(torch::Device) override {
    return std::make_unique<Device>(*this);
  }

 private:
  void Update(SlotEntry& e, const torch::Tensor& g, double lr) override {
    torch::Tensor& accum = e.slots[0];
    at::add_out(accum, g, accum, momentum_);
    e.var.add_(accum, -lr);
  }

  class Device : public SlotDeviceForm {
   public:
    explicit Device(const MomentumOptimizer& o)
        : SlotDeviceForm(o), momentum_(o.momentum_) {}

   private:
    void Update(SlotGradients& g, const torch::Tensor& lr,
                const torch::Tensor& step) override {
      std::vector<torch::Tensor>& accum = g.slots[0];
      if (FusedUpdate(UpdateKind::kMomentum, g.vars, g.grads, &accum, lr,
                      momentum_, step, 0)) {
        return;
      }
      at::_foreach_mul_(accum, momentum_);
      at::_foreach_add_(accum, g.grads);
      at::_foreach_sub_(g.vars, TimesScalarTensor(accum, lr));
    }

    double momentum_;
  };

  double momentum_;
};

SLIM_REGISTER_OPTIMIZER("momentum",
                        DescribeOptimizer<MomentumOptimizer, MomentumOptions>(
                            {{"momentum", &MomentumOptions::momentum}},
                            /*has_device_form=*/true));

}  // namespace
}  // namespace train_internal
}  // namespace slimtorch
