#pragma once
// Optimizers with TensorFlow 1.x update rules (tf.train.*Optimizer), as
// TF-Slim's train_image_classifier._configure_optimizer builds them:
//   adadelta adagrad adam ftrl momentum rmsprop sgd
// Weight decay is not part of the optimizer (nets add L2 losses).
//
// Slot variables carry TensorFlow's names so checkpoints map one to one:
// "<var>/Momentum", "<var>/RMSProp" (ms, starts at 1.0), "<var>/RMSProp_1"
// (mom), "<var>/Adam" (m), "<var>/Adam_1" (v), "beta1_power",
// "beta2_power", "<var>/Adagrad", "<var>/Adadelta" (accum),
// "<var>/Adadelta_1" (accum_update), "<var>/Ftrl" (accum), "<var>/Ftrl_1"
// (linear). Persisted names: do not change.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/core/registry.h"

namespace slimtorch {

// Hyper-parameters; defaults are train_image_classifier's flag defaults.
struct OptimizerOptions {
  double adadelta_rho = 0.95;
  double adagrad_initial_accumulator_value = 0.1;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  // Epsilon for adadelta, adam and rmsprop (TF-Slim's unusually large 1.0).
  double opt_epsilon = 1.0;
  double ftrl_learning_rate_power = -0.5;
  double ftrl_initial_accumulator_value = 0.1;
  double ftrl_l1 = 0.0;
  double ftrl_l2 = 0.0;
  // MomentumOptimizer's momentum (not Nesterov).
  double momentum = 0.9;
  double rmsprop_momentum = 0.9;
  double rmsprop_decay = 0.9;
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
};

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(
    NamedTensors variables, const OptimizerOptions& options)>;
using OptimizerRegistry = Registry<OptimizerFactory>;
OptimizerRegistry& GetOptimizerRegistry();

// Builds the optimizer registered as `name` over `variables` (leaf tensors
// with requires_grad). Throws listing the valid names.
std::unique_ptr<Optimizer> CreateOptimizer(const std::string& name,
                                           NamedTensors variables,
                                           const OptimizerOptions& options);

// slim.learning's clip_gradient_norm: every variable's gradient g clipped
// by its own L2 norm, as tf.clip_by_norm computes it:
//   g <- (g * max_norm) / max(||g||, max_norm)
// (a gradient within max_norm keeps its value; a zero one stays zero).
// In place, on the device, without a host sync. max_norm must be > 0.
void ClipGradientNorms(const NamedTensors& variables, double max_norm);

}  // namespace slimtorch

#define SLIM_REGISTER_OPTIMIZER(name, factory)                          \
  SLIM_STATIC_REGISTRATION(                                             \
      [] { ::slimtorch::GetOptimizerRegistry().Register(name, factory); })
