#pragma once
// Learning-rate schedules, as TF-Slim's _configure_learning_rate:
//   decay_steps = int(num_samples_per_epoch * num_epochs_per_decay
//                     / batch_size)
//   (divided by replicas_to_aggregate when sync_replicas)
//   fixed:       lr
//   exponential: lr * decay_factor ^ floor(step / decay_steps)
//   polynomial:  (lr - end_lr) * (1 - min(step, decay_steps) / decay_steps)
//                + end_lr   (power 1, no cycle)
// evaluated in float32 as TensorFlow's optimized graph does, where
// step / decay_steps is step * float32(1 / decay_steps) (so with
// decay_steps 41 the staircase decays at step 42, not 41).
// Ours, the schedules of timm and torchvision (docs/training_recipes.md),
// evaluated in double as PyTorch's schedulers do and rounded to float32:
//   cosine:      end_lr + (lr - end_lr) * (1 + cos(pi * min(step,
//                decay_steps) / decay_steps)) / 2   (CosineAnnealingLR's
//                closed form; timm's CosineLRScheduler; then end_lr)
//   step:        lr * decay_factor ^ (step // decay_steps)   (StepLR)
//   multistep:   lr before the first boundary, values[i] from boundary i
//                on (lr * decay_factor ^ (i + 1) when no values are given;
//                MultiStepLR: a boundary's own step takes the new rate)
// Warm-up (any schedule, warmup_epochs > 0): for step < W
//   warmup_lr + (lr - warmup_lr) * step / W
// and the schedule at step - W after it (torchvision's SequentialLR of
// LinearLR then the schedule; timm's warmup_prefix=True), W counted as
// decay_steps is.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "slimtorch/core/registry.h"

namespace slimtorch {

// Defaults are train_image_classifier's flag defaults.
struct LearningRateOptions {
  double learning_rate = 0.01;
  double end_learning_rate = 0.0001;
  double learning_rate_decay_factor = 0.94;
  double num_epochs_per_decay = 2.0;
  // Per-clone batch size and the training split's size (dataset.num_samples).
  int64_t batch_size = 32;
  int64_t num_samples_per_epoch = 0;
  bool sync_replicas = false;
  int64_t replicas_to_aggregate = 1;
  // multistep: the boundaries in epochs (increasing; each becomes a step as
  // decay_steps does) and the rates from each on (empty: lr * decay_factor
  // ^ (i + 1); else as many as boundaries).
  std::vector<double> boundaries;
  std::vector<double> values;
  // Linear warm-up over warmup_epochs (0 = none) from warmup_learning_rate.
  double warmup_epochs = 0.0;
  double warmup_learning_rate = 0.0;
};

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  // The learning rate used for the update that produces step global_step+1:
  // a float32 value widened to double.
  virtual double At(int64_t global_step) const = 0;
};

// decay_steps as TF-Slim computes it (a double: sync_replicas divides with
// Python's true division).
double DecaySteps(const LearningRateOptions& options);
// A comma-separated list of numbers, the value of --`flag` ("" = none);
// throws naming the flag and the item that is not a finite number.
std::vector<double> ParseNumberList(const std::string& flag,
                                    const std::string& csv);
// `epochs` counted in steps as DecaySteps counts num_epochs_per_decay.
double EpochsToSteps(double epochs, const LearningRateOptions& options);

using LearningRateFactory = std::function<std::unique_ptr<LearningRateSchedule>(
    const LearningRateOptions& options)>;
using LearningRateRegistry = Registry<LearningRateFactory>;
LearningRateRegistry& GetLearningRateRegistry();

// `decay_type` is fixed, exponential, polynomial, cosine, step or multistep,
// with the warm-up when warmup_epochs > 0; throws listing the valid names,
// when decay_steps (or the warm-up's steps) would be 0, or on boundaries or
// values that do not fit the schedule.
std::unique_ptr<LearningRateSchedule> CreateLearningRateSchedule(
    const std::string& decay_type, const LearningRateOptions& options);

}  // namespace slimtorch

#define SLIM_REGISTER_LEARNING_RATE(name, factory)                          \
  SLIM_STATIC_REGISTRATION(                                                 \
      [] { ::slimtorch::GetLearningRateRegistry().Register(name, factory); })
