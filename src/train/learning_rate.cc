#include "slimtorch/train/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// TensorFlow evaluates the schedules in float32 (the dtype of the learning
// rate tensor): every operand is cast to float32 and every operation rounds
// to float32. decay_steps is a graph constant, so grappler's arithmetic
// optimizer rewrites step / decay_steps as step * (1 / decay_steps); e.g.
// with decay_steps 41, step 41 gives 0.99999994 and the staircase decays at
// step 42. At() returns the float32 value widened to double.

// tf.constant(learning_rate, name='fixed_learning_rate').
class FixedSchedule : public LearningRateSchedule {
 public:
  explicit FixedSchedule(const LearningRateOptions& o)
      : learning_rate_(static_cast<float>(o.learning_rate)) {}

  double At(int64_t) const override { return learning_rate_; }

 private:
  float learning_rate_;
};

// tf.train.exponential_decay(learning_rate, global_step, decay_steps,
// decay_factor, staircase=True):
//   learning_rate * decay_factor ^ floor(global_step / decay_steps)
class ExponentialSchedule : public LearningRateSchedule {
 public:
  ExponentialSchedule(const LearningRateOptions& o, double decay_steps)
      : learning_rate_(static_cast<float>(o.learning_rate)),
        decay_factor_(static_cast<float>(o.learning_rate_decay_factor)),
        inverse_decay_steps_(1.0f / static_cast<float>(decay_steps)) {}

  double At(int64_t global_step) const override {
    const float p =
        std::floor(static_cast<float>(global_step) * inverse_decay_steps_);
    const float lr = learning_rate_ * std::pow(decay_factor_, p);
    return lr;
  }

 private:
  float learning_rate_;
  float decay_factor_;
  float inverse_decay_steps_;
};

// tf.train.polynomial_decay(learning_rate, global_step, decay_steps,
// end_learning_rate, power=1.0, cycle=False):
//   (learning_rate - end) * (1 - min(global_step, decay_steps) / decay_steps)
//   + end
class PolynomialSchedule : public LearningRateSchedule {
 public:
  PolynomialSchedule(const LearningRateOptions& o, double decay_steps)
      : learning_rate_(static_cast<float>(o.learning_rate)),
        end_learning_rate_(static_cast<float>(o.end_learning_rate)),
        decay_steps_(static_cast<float>(decay_steps)),
        inverse_decay_steps_(1.0f / decay_steps_) {}

  double At(int64_t global_step) const override {
    const float step = std::min(static_cast<float>(global_step), decay_steps_);
    const float p = step * inverse_decay_steps_;
    const float lr =
        (learning_rate_ - end_learning_rate_) * (1.0f - p) + end_learning_rate_;
    return lr;
  }

 private:
  float learning_rate_;
  float end_learning_rate_;
  float decay_steps_;
  float inverse_decay_steps_;
};

// decay_steps, which must be positive for a decaying schedule.
double CheckedDecaySteps(const std::string& decay_type,
                         const LearningRateOptions& o) {
  const double decay_steps = DecaySteps(o);
  SLIM_CHECK(
      decay_steps > 0, "learning_rate_decay_type ", decay_type,
      " needs decay_steps > 0, got ", decay_steps,
      " = int(num_samples_per_epoch ", o.num_samples_per_epoch,
      " * num_epochs_per_decay ", o.num_epochs_per_decay, " / batch_size ",
      o.batch_size, ")",
      o.sync_replicas ? StrCat(" / replicas_to_aggregate ",
                               o.replicas_to_aggregate)
                      : std::string());
  return decay_steps;
}

std::unique_ptr<LearningRateSchedule> MakeFixed(const LearningRateOptions& o) {
  return std::make_unique<FixedSchedule>(o);
}

std::unique_ptr<LearningRateSchedule> MakeExponential(
    const LearningRateOptions& o) {
  return std::make_unique<ExponentialSchedule>(
      o, CheckedDecaySteps("exponential", o));
}

std::unique_ptr<LearningRateSchedule> MakePolynomial(
    const LearningRateOptions& o) {
  return std::make_unique<PolynomialSchedule>(
      o, CheckedDecaySteps("polynomial", o));
}

SLIM_REGISTER_LEARNING_RATE("fixed", MakeFixed);
SLIM_REGISTER_LEARNING_RATE("exponential", MakeExponential);
SLIM_REGISTER_LEARNING_RATE("polynomial", MakePolynomial);

}  // namespace

double DecaySteps(const LearningRateOptions& options) {
  SLIM_CHECK(options.batch_size > 0, "batch_size must be positive, got ",
             options.batch_size);
  // int(num_samples_per_epoch * num_epochs_per_decay / batch_size): Python
  // float arithmetic, truncated toward zero.
  double decay_steps = std::trunc(
      static_cast<double>(options.num_samples_per_epoch) *
      options.num_epochs_per_decay / static_cast<double>(options.batch_size));
  if (options.sync_replicas) {
    SLIM_CHECK(options.replicas_to_aggregate > 0,
               "replicas_to_aggregate must be positive with sync_replicas, got ",
               options.replicas_to_aggregate);
    decay_steps /= static_cast<double>(options.replicas_to_aggregate);
  }
  return decay_steps;
}

LearningRateRegistry& GetLearningRateRegistry() {
  static auto* const registry =
      new LearningRateRegistry("learning_rate_decay_type");
  return *registry;
}

std::unique_ptr<LearningRateSchedule> CreateLearningRateSchedule(
    const std::string& decay_type, const LearningRateOptions& options) {
  return GetLearningRateRegistry().Get(decay_type)(options);
}

}  // namespace slimtorch
