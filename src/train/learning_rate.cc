#include "slimtorch/train/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/strings.h"

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

// The schedules of PyTorch's schedulers: computed in double, as Python
// does, and rounded to the float32 the update uses.

// CosineAnnealingLR's closed form (T_max = decay_steps, eta_min = end), held
// at end after decay_steps (timm's CosineLRScheduler with cycle_limit 1).
class CosineSchedule : public LearningRateSchedule {
 public:
  CosineSchedule(const LearningRateOptions& o, double decay_steps)
      : learning_rate_(o.learning_rate),
        end_learning_rate_(o.end_learning_rate),
        decay_steps_(decay_steps) {}

  double At(int64_t global_step) const override {
    const double t = std::min(static_cast<double>(global_step), decay_steps_);
    const double lr =
        end_learning_rate_ + (learning_rate_ - end_learning_rate_) *
                                 (1.0 + std::cos(kPi * t / decay_steps_)) / 2.0;
    return static_cast<float>(lr);
  }

 private:
  static constexpr double kPi = 3.14159265358979323846;
  double learning_rate_;
  double end_learning_rate_;
  double decay_steps_;
};

// StepLR: lr * gamma ^ (step // step_size).
class StepSchedule : public LearningRateSchedule {
 public:
  StepSchedule(const LearningRateOptions& o, double decay_steps)
      : learning_rate_(o.learning_rate),
        decay_factor_(o.learning_rate_decay_factor),
        decay_steps_(decay_steps) {}

  double At(int64_t global_step) const override {
    const double k =
        std::floor(static_cast<double>(global_step) / decay_steps_);
    return static_cast<float>(learning_rate_ * std::pow(decay_factor_, k));
  }

 private:
  double learning_rate_;
  double decay_factor_;
  double decay_steps_;
};

// MultiStepLR with explicit rates: rates_[i] from boundary i - 1 on
// (rates_[0] before the first).
class MultistepSchedule : public LearningRateSchedule {
 public:
  MultistepSchedule(std::vector<double> boundaries, std::vector<double> rates)
      : boundaries_(std::move(boundaries)), rates_(std::move(rates)) {}

  double At(int64_t global_step) const override {
    const auto passed = std::upper_bound(boundaries_.begin(), boundaries_.end(),
                                         static_cast<double>(global_step)) -
                        boundaries_.begin();
    return static_cast<float>(rates_[passed]);
  }

 private:
  std::vector<double> boundaries_;  // steps, increasing
  std::vector<double> rates_;       // boundaries_.size() + 1
};

std::unique_ptr<LearningRateSchedule> MakeCosine(const LearningRateOptions& o) {
  return std::make_unique<CosineSchedule>(o, CheckedDecaySteps("cosine", o));
}

std::unique_ptr<LearningRateSchedule> MakeStep(const LearningRateOptions& o) {
  return std::make_unique<StepSchedule>(o, CheckedDecaySteps("step", o));
}

// The boundaries in steps (checked increasing and positive) and the rates.
std::unique_ptr<LearningRateSchedule> MakeMultistep(
    const LearningRateOptions& o) {
  SLIM_CHECK(!o.boundaries.empty(),
             "learning_rate_decay_type multistep needs "
             "--learning_rate_boundaries (epochs, comma-separated)");
  SLIM_CHECK(o.values.empty() || o.values.size() == o.boundaries.size(),
             "--learning_rate_values has ", o.values.size(), " rates for ",
             o.boundaries.size(),
             " --learning_rate_boundaries: give one rate per boundary (the "
             "rate from that boundary on; --learning_rate is the one before "
             "the first), or none for --learning_rate_decay_factor's steps");
  std::vector<double> steps;
  std::vector<double> rates = {o.learning_rate};
  for (size_t i = 0; i < o.boundaries.size(); ++i) {
    const double step = EpochsToSteps(o.boundaries[i], o);
    SLIM_CHECK(
        step > 0 && (steps.empty() || step > steps.back()),
        "--learning_rate_boundaries must be increasing epochs that "
        "fall on different steps after 0; boundary ",
        i + 1, " (", o.boundaries[i], " epochs) is step ", step,
        steps.empty() ? std::string() : StrCat(", after step ", steps.back()));
    steps.push_back(step);
    rates.push_back(o.values.empty()
                        ? rates.back() * o.learning_rate_decay_factor
                        : o.values[i]);
    SLIM_CHECK(rates.back() >= 0,
               "--learning_rate_values must not be "
               "negative, got ",
               rates.back());
  }
  return std::make_unique<MultistepSchedule>(std::move(steps),
                                             std::move(rates));
}

// Linear warm-up over the first `steps` steps from `start` to `target`
// (the schedule's first rate), then the schedule `steps` steps late.
class WarmupSchedule : public LearningRateSchedule {
 public:
  WarmupSchedule(std::unique_ptr<LearningRateSchedule> main, double steps,
                 double start, double target)
      : main_(std::move(main)), steps_(steps), start_(start), target_(target) {}

  double At(int64_t global_step) const override {
    const double t = static_cast<double>(global_step);
    if (t >= steps_) {
      return main_->At(global_step - static_cast<int64_t>(steps_));
    }
    return static_cast<float>(start_ + (target_ - start_) * t / steps_);
  }

 private:
  std::unique_ptr<LearningRateSchedule> main_;
  double steps_;
  double start_;
  double target_;
};

SLIM_REGISTER_LEARNING_RATE("fixed", MakeFixed);
SLIM_REGISTER_LEARNING_RATE("exponential", MakeExponential);
SLIM_REGISTER_LEARNING_RATE("polynomial", MakePolynomial);
SLIM_REGISTER_LEARNING_RATE("cosine", MakeCosine);
SLIM_REGISTER_LEARNING_RATE("step", MakeStep);
SLIM_REGISTER_LEARNING_RATE("multistep", MakeMultistep);

// The warm-up's steps, checked.
double WarmupSteps(const LearningRateOptions& o) {
  SLIM_CHECK(o.warmup_epochs >= 0 && o.warmup_learning_rate >= 0,
             "--warmup_epochs and --warmup_learning_rate must not be "
             "negative, got ",
             o.warmup_epochs, " and ", o.warmup_learning_rate);
  if (o.warmup_epochs == 0) return 0;
  const double steps = EpochsToSteps(o.warmup_epochs, o);
  SLIM_CHECK(steps >= 1, "--warmup_epochs=", o.warmup_epochs, " is 0 steps of ",
             o.batch_size, " examples in an epoch of ", o.num_samples_per_epoch,
             ": warm up for at least one step");
  return steps;
}

}  // namespace

std::vector<double> ParseNumberList(const std::string& flag,
                                    const std::string& csv) {
  std::vector<double> numbers;
  if (Trim(csv).empty()) return numbers;
  size_t begin = 0;
  while (begin <= csv.size()) {
    size_t end = csv.find(',', begin);
    if (end == std::string::npos) end = csv.size();
    const std::string item = Trim(csv.substr(begin, end - begin));
    char* stop = nullptr;
    const double x = std::strtod(item.c_str(), &stop);
    SLIM_CHECK(!item.empty() && *stop == '\0' && std::isfinite(x), "--", flag,
               "=", csv, ": '", item,
               "' is not a number (expected numbers "
               "separated by commas)");
    numbers.push_back(x);
    begin = end + 1;
  }
  return numbers;
}

double DecaySteps(const LearningRateOptions& options) {
  return EpochsToSteps(options.num_epochs_per_decay, options);
}

double EpochsToSteps(double epochs, const LearningRateOptions& options) {
  SLIM_CHECK(options.batch_size > 0, "batch_size must be positive, got ",
             options.batch_size);
  // int(num_samples_per_epoch * num_epochs_per_decay / batch_size): Python
  // float arithmetic, truncated toward zero.
  double decay_steps =
      std::trunc(static_cast<double>(options.num_samples_per_epoch) * epochs /
                 static_cast<double>(options.batch_size));
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
  const LearningRateFactory& factory =
      GetLearningRateRegistry().Get(decay_type);
  SLIM_CHECK(decay_type == "multistep" ||
                 (options.boundaries.empty() && options.values.empty()),
             "--learning_rate_boundaries and --learning_rate_values apply to "
             "--learning_rate_decay_type=multistep, not ",
             decay_type);
  const double warmup_steps = WarmupSteps(options);
  std::unique_ptr<LearningRateSchedule> schedule = factory(options);
  if (warmup_steps == 0) return schedule;
  return std::make_unique<WarmupSchedule>(std::move(schedule), warmup_steps,
                                          options.warmup_learning_rate,
                                          options.learning_rate);
}

}  // namespace slimtorch
