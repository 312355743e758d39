#pragma once
// --moving_average_decay: tf.train.ExponentialMovingAverage(decay,
// num_updates=global_step) over the model variables, as TF-Slim's
// train_image_classifier and the CIFAR-10 tutorial use it.
//
//   d = min(decay, (1 + num_updates) / (10 + num_updates))   (float32)
//   shadow -= (shadow - variable) * (1 - d)                  (float32)
//
// Training applies it after each optimizer step with num_updates = the
// incremented global step (the tutorial's order: the averaging op depends on
// the gradient step, which increments global_step). Shadows are saved as
// "<variable>/ExponentialMovingAverage"; evaluation with the flag loads them
// into the model variables (TF's variables_to_restore()).

#include <cstdint>
#include <string>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/io/checkpoint.h"

namespace slimtorch {

// The checkpoint name of a variable's shadow.
std::string MovingAverageName(const std::string& variable);

// --moving_average_warmup (ours): how the decay starts.
//   kTensorFlow  min(decay, (1 + n) / (10 + n))        TF-Slim's (default)
//   kNone        decay from the first update           torchvision, timm V2
//   kTimm        0 at n = 1 (a copy), then min(decay, 1 - (1 + (n - 1))
//                ^ (-2/3))                             timm's ModelEmaV3
//                                                      use_warmup=True
// n: num_updates, the global step after the update (1 for the first).
enum class EmaWarmup { kTensorFlow, kNone, kTimm };
// "tf", "none" or "timm"; throws naming the flag on any other value.
EmaWarmup ParseEmaWarmup(const std::string& flag);

class ExponentialMovingAverage {
 public:
  // Shadows start as copies of the variables' current values (TF: their
  // initial values).
  ExponentialMovingAverage(double decay, NamedTensors variables,
                           EmaWarmup warmup = EmaWarmup::kTensorFlow);

  // The decay applied for `num_updates`.
  float EffectiveDecay(int64_t num_updates) const;

  // One update of every shadow towards its variable.
  void Apply(int64_t num_updates);

  // The shadows under their checkpoint names.
  const NamedTensors& shadows() const { return shadows_; }
  // The decay as given, in float32.
  float decay() const { return decay_; }
  EmaWarmup warmup() const { return warmup_; }

  // Loads the shadows from a checkpoint; false (and nothing changed) when
  // it has none of them; throws when it has only some, or a wrong shape.
  bool Load(const CheckpointData& ckpt, const std::string& ckpt_path);

 private:
  float decay_;
  EmaWarmup warmup_;
  NamedTensors variables_;
  NamedTensors shadows_;
};

// Evaluation: fills each variable with its shadow from the checkpoint.
// A checkpoint without shadows is an error that says so.
void RestoreMovingAverages(const NamedTensors& variables,
                           const CheckpointData& ckpt,
                           const std::string& ckpt_path);

}  // namespace slimtorch
