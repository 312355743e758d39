#include "slimtorch/train/learning_rate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

struct LearningRateGolden {
  std::string label;
  std::string decay_type;
  int64_t num_samples_per_epoch;
  int64_t batch_size;
  double num_epochs_per_decay;
  bool sync_replicas;
  int64_t replicas_to_aggregate;
  double learning_rate;
  double learning_rate_decay_factor;
  double end_learning_rate;
  // decay_steps as train_image_classifier computes it.
  double decay_steps;
  int64_t global_step;
  // The float32 learning rate TensorFlow computes.
  float expected;
};

#include "golden/learning_rate_goldens.inc"

LearningRateOptions OptionsOf(const LearningRateGolden& g) {
  LearningRateOptions o;
  o.learning_rate = g.learning_rate;
  o.end_learning_rate = g.end_learning_rate;
  o.learning_rate_decay_factor = g.learning_rate_decay_factor;
  o.num_epochs_per_decay = g.num_epochs_per_decay;
  o.batch_size = g.batch_size;
  o.num_samples_per_epoch = g.num_samples_per_epoch;
  o.sync_replicas = g.sync_replicas;
  o.replicas_to_aggregate = g.replicas_to_aggregate;
  return o;
}

std::string ErrorOf(const std::string& decay_type,
                    const LearningRateOptions& options) {
  try {
    CreateLearningRateSchedule(decay_type, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LearningRateTest, MatchesTensorFlow) {
  ASSERT_FALSE(LearningRateGoldens().empty());
  for (const LearningRateGolden& g : LearningRateGoldens()) {
    SCOPED_TRACE(g.label + " step " + std::to_string(g.global_step));
    const LearningRateOptions options = OptionsOf(g);
    EXPECT_EQ(DecaySteps(options), g.decay_steps);
    auto schedule = CreateLearningRateSchedule(g.decay_type, options);
    const double lr = schedule->At(g.global_step);
    EXPECT_NEAR(lr, g.expected, 1e-6 * std::abs(g.expected));
  }
}

TEST(LearningRateTest, ExponentialStepsAtDecayBoundaries) {
  LearningRateOptions options;
  options.num_samples_per_epoch = 3320;
  auto schedule = CreateLearningRateSchedule("exponential", options);
  EXPECT_EQ(schedule->At(0), schedule->At(206));
  EXPECT_LT(schedule->At(207), schedule->At(206));
  EXPECT_EQ(schedule->At(207), schedule->At(413));
  EXPECT_FLOAT_EQ(schedule->At(207), 0.01f * 0.94f);
  EXPECT_FLOAT_EQ(schedule->At(414), 0.01f * 0.94f * 0.94f);
}

// TensorFlow's optimized graph multiplies by float32(1 / decay_steps):
// 41 * float32(1 / 41) = 0.99999994, so the first decay lands on step 42.
TEST(LearningRateTest, ExponentialDecaysWhereTensorFlowDoes) {
  LearningRateOptions options;
  options.num_samples_per_epoch = 41 * 32;
  options.num_epochs_per_decay = 1.0;
  ASSERT_EQ(DecaySteps(options), 41.0);
  auto schedule = CreateLearningRateSchedule("exponential", options);
  EXPECT_EQ(schedule->At(41), schedule->At(0));
  EXPECT_LT(schedule->At(42), schedule->At(41));
}

TEST(LearningRateTest, PolynomialIsLinearThenConstant) {
  LearningRateOptions options;
  options.num_samples_per_epoch = 3320;
  auto schedule = CreateLearningRateSchedule("polynomial", options);
  EXPECT_FLOAT_EQ(schedule->At(0), 0.01f);
  EXPECT_FLOAT_EQ(schedule->At(207), 0.0001f);
  EXPECT_EQ(schedule->At(207), schedule->At(100000));
  EXPECT_NEAR(schedule->At(103), 0.0001 + 0.0099 * (1 - 103.0 / 207), 1e-9);
}

TEST(LearningRateTest, FixedIgnoresStepsAndDecaySettings) {
  LearningRateOptions options;
  options.learning_rate = 0.1;
  auto schedule = CreateLearningRateSchedule("fixed", options);
  EXPECT_EQ(schedule->At(0), static_cast<float>(0.1));
  EXPECT_EQ(schedule->At(123456789), static_cast<float>(0.1));
}

TEST(LearningRateTest, DecayStepsFlowersExample) {
  LearningRateOptions options;
  options.num_samples_per_epoch = 3320;
  options.batch_size = 32;
  options.num_epochs_per_decay = 2.0;
  EXPECT_EQ(DecaySteps(options), 207.0);
}

TEST(LearningRateTest, DecayStepsTruncatesThenDividesByReplicas) {
  LearningRateOptions options;
  options.num_samples_per_epoch = 3320;
  options.batch_size = 32;
  options.num_epochs_per_decay = 2.0;
  options.replicas_to_aggregate = 2;
  EXPECT_EQ(DecaySteps(options), 207.0);  // Not divided without sync.
  options.sync_replicas = true;
  EXPECT_EQ(DecaySteps(options), 103.5);
  options.replicas_to_aggregate = 4;
  EXPECT_EQ(DecaySteps(options), 51.75);
  options.num_epochs_per_decay = 0.01;  // int(1.0375) = 1, then 1 / 4.
  EXPECT_EQ(DecaySteps(options), 0.25);
}

TEST(LearningRateTest, UnknownTypeListsValidNames) {
  const std::string what = ErrorOf("linear_cosine", LearningRateOptions());
  EXPECT_NE(what.find("linear_cosine"), std::string::npos) << what;
  EXPECT_NE(
      what.find("cosine, exponential, fixed, multistep, polynomial, step"),
      std::string::npos)
      << what;
  EXPECT_EQ(GetLearningRateRegistry().Names(),
            (std::vector<std::string>{"cosine", "exponential", "fixed",
                                      "multistep", "polynomial", "step"}));
}

TEST(LearningRateTest, ZeroDecayStepsNamesTheCause) {
  LearningRateOptions options;
  options.num_samples_per_epoch = 10;
  options.batch_size = 32;
  options.num_epochs_per_decay = 2.0;
  for (const std::string type : {"exponential", "polynomial"}) {
    const std::string what = ErrorOf(type, options);
    EXPECT_NE(what.find(type), std::string::npos) << what;
    EXPECT_NE(what.find("decay_steps"), std::string::npos) << what;
    EXPECT_NE(what.find("num_samples_per_epoch 10"), std::string::npos) << what;
    EXPECT_NE(what.find("num_epochs_per_decay 2"), std::string::npos) << what;
    EXPECT_NE(what.find("batch_size 32"), std::string::npos) << what;
  }
  EXPECT_EQ(ErrorOf("fixed", options), "");

  options.num_samples_per_epoch = 0;
  EXPECT_NE(ErrorOf("exponential", options).find("num_samples_per_epoch 0"),
            std::string::npos);
}

TEST(LearningRateTest, RejectsNonPositiveBatchOrReplicas) {
  LearningRateOptions options;
  options.num_samples_per_epoch = 3320;
  options.batch_size = 0;
  EXPECT_NE(ErrorOf("exponential", options).find("batch_size"),
            std::string::npos);
  options.batch_size = 32;
  options.sync_replicas = true;
  options.replicas_to_aggregate = 0;
  EXPECT_NE(ErrorOf("polynomial", options).find("replicas_to_aggregate"),
            std::string::npos);
}

// The schedules of PyTorch's and timm's schedulers (cosine, step,
// multistep, the warm-up), stepped once per step by
// scripts/golden/gen_schedule_goldens.py: the rates of steps 0, 1, ...
struct ScheduleGolden {
  std::string label;
  std::string decay_type;
  double learning_rate;
  double end_learning_rate;
  double learning_rate_decay_factor;
  double num_epochs_per_decay;
  double warmup_epochs;
  double warmup_learning_rate;
  std::vector<double> boundaries;
  std::vector<double> values;
  std::vector<double> rates;
};

#include "golden/schedule_goldens.inc"

// 1000 examples an epoch in batches of 10: an epoch is 100 steps.
LearningRateOptions OptionsOf(const ScheduleGolden& g) {
  LearningRateOptions o;
  o.num_samples_per_epoch = 1000;
  o.batch_size = 10;
  o.learning_rate = g.learning_rate;
  o.end_learning_rate = g.end_learning_rate;
  o.learning_rate_decay_factor = g.learning_rate_decay_factor;
  o.num_epochs_per_decay = g.num_epochs_per_decay;
  o.warmup_epochs = g.warmup_epochs;
  o.warmup_learning_rate = g.warmup_learning_rate;
  o.boundaries = g.boundaries;
  o.values = g.values;
  return o;
}

TEST(LearningRateTest, MatchesPyTorchAndTimmStepByStep) {
  ASSERT_EQ(ScheduleGoldens().size(), 7u);
  for (const ScheduleGolden& g : ScheduleGoldens()) {
    SCOPED_TRACE(g.label);
    auto schedule = CreateLearningRateSchedule(g.decay_type, OptionsOf(g));
    ASSERT_GT(g.rates.size(), 400u);
    for (size_t t = 0; t < g.rates.size(); ++t) {
      // A float32 rate: within its rounding of the double.
      ASSERT_NEAR(schedule->At(static_cast<int64_t>(t)), g.rates[t],
                  6e-8 * g.rates[t] + 1e-15)
          << "step " << t;
    }
  }
}

TEST(LearningRateTest, CosineEndsAtTheEndRateAndStaysThere) {
  LearningRateOptions o;
  o.num_samples_per_epoch = 1000;
  o.batch_size = 10;
  o.num_epochs_per_decay = 3;  // 300 steps
  o.learning_rate = 0.1;
  o.end_learning_rate = 0.001;
  auto schedule = CreateLearningRateSchedule("cosine", o);
  EXPECT_FLOAT_EQ(schedule->At(0), 0.1f);
  EXPECT_FLOAT_EQ(schedule->At(150), 0.0505f);  // half way: the mean
  EXPECT_FLOAT_EQ(schedule->At(300), 0.001f);
  EXPECT_EQ(schedule->At(300), schedule->At(1000000));
}

TEST(LearningRateTest, MultistepTakesExplicitRatesFromEachBoundary) {
  LearningRateOptions o;
  o.num_samples_per_epoch = 1000;
  o.batch_size = 10;
  o.learning_rate = 0.4;
  o.boundaries = {0.5, 1.25};  // steps 50 and 125
  o.values = {0.3, 0.02};
  auto schedule = CreateLearningRateSchedule("multistep", o);
  EXPECT_FLOAT_EQ(schedule->At(0), 0.4f);
  EXPECT_FLOAT_EQ(schedule->At(49), 0.4f);
  EXPECT_FLOAT_EQ(schedule->At(50), 0.3f);
  EXPECT_FLOAT_EQ(schedule->At(124), 0.3f);
  EXPECT_FLOAT_EQ(schedule->At(125), 0.02f);
  EXPECT_FLOAT_EQ(schedule->At(99999), 0.02f);
}

// Warm-up before a TF-Slim schedule: the ramp, then the schedule as it
// would run without warm-up, W steps late.
TEST(LearningRateTest, WarmupShiftsTensorFlowSchedules) {
  LearningRateOptions o;
  o.num_samples_per_epoch = 3320;
  o.batch_size = 32;  // decay_steps 207
  for (const std::string type : {"exponential", "polynomial"}) {
    SCOPED_TRACE(type);
    auto plain = CreateLearningRateSchedule(type, o);
    LearningRateOptions w = o;
    w.warmup_epochs = 0.5;  // int(3320 * 0.5 / 32) = 51 steps
    w.warmup_learning_rate = 0.001;
    auto warm = CreateLearningRateSchedule(type, w);
    EXPECT_FLOAT_EQ(warm->At(0), 0.001f);
    EXPECT_NEAR(warm->At(17), 0.001 + (0.01 - 0.001) * 17 / 51, 1e-9);
    for (int64_t t : {0, 1, 155, 156, 206, 207, 1000}) {
      EXPECT_EQ(warm->At(51 + t), plain->At(t)) << "step " << t;
    }
  }
}

TEST(LearningRateTest, ParsesNumberListsNamingTheFlag) {
  EXPECT_EQ(ParseNumberList("learning_rate_values", ""), std::vector<double>{});
  EXPECT_EQ(ParseNumberList("learning_rate_boundaries", " 30, 60,90.5 "),
            (std::vector<double>{30, 60, 90.5}));
  for (const std::string bad : {"30,,60", "30,x", "1e999", "30,"}) {
    try {
      ParseNumberList("learning_rate_boundaries", bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--learning_rate_boundaries=" + bad),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(LearningRateTest, RejectsMisfitBoundariesValuesAndWarmup) {
  LearningRateOptions o;
  o.num_samples_per_epoch = 1000;
  o.batch_size = 10;
  EXPECT_NE(ErrorOf("multistep", o).find("--learning_rate_boundaries"),
            std::string::npos);
  o.boundaries = {1.0, 2.0};
  o.values = {0.1};
  std::string what = ErrorOf("multistep", o);
  EXPECT_NE(what.find("1 rates for 2 --learning_rate_boundaries"),
            std::string::npos)
      << what;
  o.values = {};
  o.boundaries = {1.0, 1.001};  // both step 100
  what = ErrorOf("multistep", o);
  EXPECT_NE(what.find("boundary 2 (1.001 epochs) is step 100, after step 100"),
            std::string::npos)
      << what;
  o.boundaries = {0.0};
  EXPECT_NE(ErrorOf("multistep", o).find("increasing"), std::string::npos);
  o.boundaries = {1.0};
  what = ErrorOf("cosine", o);
  EXPECT_NE(what.find("apply to --learning_rate_decay_type=multistep, not "
                      "cosine"),
            std::string::npos)
      << what;
  o.boundaries = {};
  o.warmup_epochs = 0.001;  // 0.1 step
  what = ErrorOf("fixed", o);
  EXPECT_NE(what.find("--warmup_epochs=0.001 is 0 steps"), std::string::npos)
      << what;
  o.warmup_epochs = -1;
  EXPECT_NE(ErrorOf("fixed", o).find("must not be negative"),
            std::string::npos);
}

}  // namespace
}  // namespace slimtorch
