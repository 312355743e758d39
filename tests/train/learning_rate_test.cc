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
  const std::string what = ErrorOf("cosine", LearningRateOptions());
  EXPECT_NE(what.find("cosine"), std::string::npos) << what;
  EXPECT_NE(what.find("exponential, fixed, polynomial"), std::string::npos)
      << what;
  EXPECT_EQ(GetLearningRateRegistry().Names(),
            (std::vector<std::string>{"exponential", "fixed", "polynomial"}));
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

}  // namespace
}  // namespace slimtorch
