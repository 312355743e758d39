#pragma once
// Optimizers with TensorFlow 1.x update rules (tf.train.*Optimizer), as
// TF-Slim's train_image_classifier._configure_optimizer builds them:
//   adadelta adagrad adam ftrl momentum rmsprop sgd
// (src/train/optimizers/, one file each: its options type, its rule and,
// where it has one, its device form). Weight decay is not part of the
// optimizer (nets add L2 losses).
//
// Slot variables carry TensorFlow's names so checkpoints map one to one:
// "<var>/Momentum", "<var>/RMSProp" (ms, starts at 1.0), "<var>/RMSProp_1"
// (mom), "<var>/Adam" (m), "<var>/Adam_1" (v), "beta1_power",
// "beta2_power", "<var>/Adagrad", "<var>/Adadelta" (accum),
// "<var>/Adadelta_1" (accum_update), "<var>/Ftrl" (accum), "<var>/Ftrl_1"
// (linear). Persisted names: do not change.

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/core/registry.h"

namespace slimtorch {

// Hyper-parameters by the name of the train_image_classifier flag that sets
// them ("momentum", "adam_beta1", "opt_epsilon", ...). An optimizer reads
// the ones its descriptor lists and ignores the others; one it reads that is
// absent takes its options type's default (the flag's default).
using OptimizerParameters = std::map<std::string, double>;

// An optimizer's update as multi-tensor kernels over the optimizer's own
// state, with the learning rate and the global step in device tensors that
// nothing reads on the host, so the update can be captured in a CUDA graph
// and replayed. Built by Optimizer::MakeDeviceForm; the optimizer must
// outlive it.
class DeviceOptimizer {
 public:
  virtual ~DeviceOptimizer() = default;
  // The update of every variable with a gradient (the others, with their
  // slots, are left as they are), in TensorFlow's float32 arithmetic, to
  // within a few ulps of the optimizer's own Apply. `learning_rate`: float32
  // 0-dim; `step_after`: int64 0-dim, the global step after this update;
  // both on the variables' device.
  virtual void Apply(const torch::Tensor& learning_rate,
                     const torch::Tensor& step_after) = 0;
  // Copies state this holds on the device alone into the optimizer's own
  // tensors (before the optimizer's Apply or State is used again).
  virtual void SyncState() {}
};

// Applies updates to a fixed, ordered list of variables. Slots live on each
// variable's device and dtype; Adam's beta1_power/beta2_power are float32
// scalars on the CPU (as TF creates them from Python floats). Hyper-
// parameters and the learning rate are rounded to float32 first, as TF turns
// them into float32 tensors. Not thread-safe.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every variable whose grad() is defined, with learning
  // rate `lr`, under torch::NoGradGuard. Variables without grad are skipped
  // (their slots are untouched), as in TF when a variable gets no gradient;
  // with no grad at all nothing changes (beta powers included). Throws if a
  // grad is sparse or not of its variable's shape.
  virtual void Apply(double lr) = 0;
  // Slot and non-slot variables under TensorFlow's names, in a stable order.
  // The tensors alias the live state.
  virtual NamedTensors State() const = 0;
  // Copies state in by name (converting dtype and device); throws naming
  // every missing name and shape mismatch, and then changes nothing. Extra
  // names in `state` are ignored.
  void LoadState(const std::map<std::string, torch::Tensor>& state);
  virtual const char* name() const = 0;
  // The same rule as a DeviceOptimizer over this optimizer's state, for
  // variables on `device`; null where the rule has no device form (its
  // descriptor says which).
  virtual std::unique_ptr<DeviceOptimizer> MakeDeviceForm(torch::Device) {
    return nullptr;
  }
};

// One hyper-parameter an optimizer reads: its flag and its default.
struct OptimizerParameter {
  std::string flag;
  double default_value;
};

// What registering an optimizer records.
struct OptimizerDescriptor {
  // The hyper-parameters it reads, in its options type's order.
  std::vector<OptimizerParameter> parameters;
  // Whether Optimizer::MakeDeviceForm returns one.
  bool has_device_form = false;
  // Builds it over `variables` (leaf tensors with requires_grad).
  std::function<std::unique_ptr<Optimizer>(NamedTensors variables,
                                           const OptimizerParameters&)>
      create;
};
using OptimizerRegistry = Registry<OptimizerDescriptor>;
OptimizerRegistry& GetOptimizerRegistry();

// One field of an optimizer's options type and the flag that sets it.
template <typename Options>
struct OptimizerField {
  const char* flag;
  double Options::*field;
};

// The descriptor of optimizer class T, built as T(NamedTensors, const
// Options&) from an Options whose `fields` are set from the parameters
// (Options's own defaults for absent ones). T has a device form where
// `has_device_form`.
template <typename T, typename Options>
OptimizerDescriptor DescribeOptimizer(
    std::vector<OptimizerField<Options>> fields, bool has_device_form) {
  OptimizerDescriptor d;
  const Options defaults{};
  for (const auto& f : fields)
    d.parameters.push_back({f.flag, defaults.*f.field});
  d.has_device_form = has_device_form;
  d.create = [fields](NamedTensors variables,
                      const OptimizerParameters& parameters) {
    Options options{};
    for (const auto& f : fields) {
      auto it = parameters.find(f.flag);
      if (it != parameters.end()) options.*f.field = it->second;
    }
    return std::unique_ptr<Optimizer>(
        std::make_unique<T>(std::move(variables), options));
  };
  return d;
}

// Builds the optimizer registered as `name` over `variables` (leaf tensors
// with requires_grad). Throws listing the valid names, or naming a
// parameter that no registered optimizer reads.
std::unique_ptr<Optimizer> CreateOptimizer(
    const std::string& name, NamedTensors variables,
    const OptimizerParameters& parameters);

// Whether the optimizer registered as `name` has a device form.
bool OptimizerHasDeviceForm(const std::string& name);

// The registered optimizers that read the parameter `flag`, sorted.
std::vector<std::string> OptimizersReading(const std::string& flag);

// Every parameter some registered optimizer reads: the optimizers in name
// order, each one's parameters in its options type's order, each once.
std::vector<std::string> OptimizerParameterFlags();

// slim.learning's clip_gradient_norm: every variable's gradient g clipped
// by its own L2 norm, as tf.clip_by_norm computes it:
//   g <- (g * max_norm) / max(||g||, max_norm)
// (a gradient within max_norm keeps its value; a zero one stays zero).
// In place, on the device, without a host sync. max_norm must be > 0.
void ClipGradientNorms(const NamedTensors& variables, double max_norm);

}  // namespace slimtorch

// Registers an OptimizerDescriptor (DescribeOptimizer's) under `name`.
#define SLIM_REGISTER_OPTIMIZER(name, ...) \
  SLIM_STATIC_REGISTRATION(                \
      [] { ::slimtorch::GetOptimizerRegistry().Register(name, __VA_ARGS__); })
