#include "slimtorch/train/moving_average.h"

#include <gtest/gtest.h>

#include <string>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

TEST(MovingAverageTest, EffectiveDecayIsTensorFlows) {
  ExponentialMovingAverage ema(0.9999, {});
  // min(decay, (1 + n) / (10 + n)), worked by hand in float32.
  EXPECT_EQ(ema.EffectiveDecay(0), 0.1f);
  EXPECT_EQ(ema.EffectiveDecay(1), 2.0f / 11.0f);
  EXPECT_EQ(ema.EffectiveDecay(90), 91.0f / 100.0f);
  EXPECT_EQ(ema.EffectiveDecay(1000000), 0.9999f);
  // (1 + n) / (10 + n) reaches 0.9999 at n = 89990.
  EXPECT_EQ(ema.EffectiveDecay(8999), 9000.0f / 9009.0f);
  EXPECT_LT(ema.EffectiveDecay(8999), 0.9999f);
  EXPECT_EQ(ema.EffectiveDecay(90000), 0.9999f);
}

// --moving_average_warmup=timm: timm 1.0's ModelEmaV3(decay=0.9998,
// use_warmup=True).get_decay(step) with step = the global step after the
// update (as its train.py passes num_updates); none: the decay throughout.
TEST(MovingAverageTest, WarmupModesAreTimmsAndNone) {
  ExponentialMovingAverage timm(0.9998, {}, EmaWarmup::kTimm);
  EXPECT_EQ(timm.EffectiveDecay(1), 0.0f);  // the first update copies
  EXPECT_FLOAT_EQ(timm.EffectiveDecay(2), 0.3700394750525634f);
  EXPECT_FLOAT_EQ(timm.EffectiveDecay(3), 0.5192501432308638f);
  EXPECT_FLOAT_EQ(timm.EffectiveDecay(10), 0.7845565309968117f);
  EXPECT_FLOAT_EQ(timm.EffectiveDecay(1000), 0.99f);
  EXPECT_FLOAT_EQ(timm.EffectiveDecay(1000000), 0.9998f);
  ExponentialMovingAverage none(0.9998, {}, EmaWarmup::kNone);
  EXPECT_EQ(none.EffectiveDecay(1), 0.9998f);
  EXPECT_EQ(none.EffectiveDecay(77), 0.9998f);
  EXPECT_EQ(ParseEmaWarmup("tf"), EmaWarmup::kTensorFlow);
  EXPECT_EQ(ParseEmaWarmup("timm"), EmaWarmup::kTimm);
  try {
    ParseEmaWarmup("linear");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--moving_average_warmup=linear"),
              std::string::npos);
  }
}

TEST(MovingAverageTest, ShadowsFollowTheFormula) {
  torch::Tensor w = torch::tensor({1.0f, -2.0f});
  torch::Tensor b = torch::tensor({0.5f});
  ExponentialMovingAverage ema(0.5, {{"net/w", w}, {"net/b", b}});
  ASSERT_EQ(ema.shadows().size(), 2u);
  EXPECT_EQ(ema.shadows()[0].name, "net/w/ExponentialMovingAverage");
  EXPECT_EQ(ema.shadows()[1].name, "net/b/ExponentialMovingAverage");
  // Step 1: w -> {3, 0}; d = min(0.5, 2/11) = 2/11.
  w.copy_(torch::tensor({3.0f, 0.0f}));
  ema.Apply(1);
  float d = 2.0f / 11.0f;
  float s0 = 1.0f - (1.0f - 3.0f) * (1.0f - d);
  float s1 = -2.0f - (-2.0f - 0.0f) * (1.0f - d);
  EXPECT_FLOAT_EQ(ema.shadows()[0].tensor[0].item<float>(), s0);
  EXPECT_FLOAT_EQ(ema.shadows()[0].tensor[1].item<float>(), s1);
  EXPECT_FLOAT_EQ(ema.shadows()[1].tensor[0].item<float>(), 0.5f);
  // Step 100: d = min(0.5, 101/110) = 0.5.
  ema.Apply(100);
  EXPECT_FLOAT_EQ(ema.shadows()[0].tensor[0].item<float>(),
                  s0 - (s0 - 3.0f) * 0.5f);
  // The variables themselves are untouched.
  EXPECT_EQ(w[0].item<float>(), 3.0f);
}

TEST(MovingAverageTest, ConvergesToAConstantVariable) {
  torch::Tensor w = torch::zeros({3});
  ExponentialMovingAverage ema(0.9, {{"w", w}});
  w.fill_(2.0f);
  for (int step = 1; step <= 300; ++step) ema.Apply(step);
  EXPECT_NEAR(ema.shadows()[0].tensor[0].item<float>(), 2.0f, 1e-5);
}

TEST(MovingAverageTest, RejectsDecayOutsideOpenUnitInterval) {
  EXPECT_THROW(ExponentialMovingAverage(1.0, {}), Error);
  EXPECT_THROW(ExponentialMovingAverage(-0.5, {}), Error);
}

TEST(MovingAverageTest, LoadRoundTripAndPartialCheckpoints) {
  torch::Tensor w = torch::ones({2});
  torch::Tensor b = torch::ones({1});
  ExponentialMovingAverage ema(0.99, {{"n/w", w}, {"n/b", b}});
  CheckpointData ckpt;
  EXPECT_FALSE(ema.Load(ckpt, "x.safetensors"));  // none: false
  ckpt.tensors.push_back(
      {"n/w/ExponentialMovingAverage", torch::tensor({7.0f, 8.0f})});
  EXPECT_THROW(ema.Load(ckpt, "x.safetensors"), Error);  // only some
  ckpt.tensors.push_back({"n/b/ExponentialMovingAverage", torch::tensor({9.0f})});
  EXPECT_TRUE(ema.Load(ckpt, "x.safetensors"));
  EXPECT_EQ(ema.shadows()[0].tensor[1].item<float>(), 8.0f);
  EXPECT_EQ(ema.shadows()[1].tensor[0].item<float>(), 9.0f);
}

TEST(MovingAverageTest, EvaluationRestoresShadowsOrSaysWhyNot) {
  torch::Tensor w = torch::zeros({2});
  CheckpointData ckpt;
  ckpt.tensors.push_back({"n/w", torch::tensor({1.0f, 1.0f})});
  try {
    RestoreMovingAverages({{"n/w", w}}, ckpt, "/tmp/m.safetensors");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("/tmp/m.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("n/w/ExponentialMovingAverage"), std::string::npos);
    EXPECT_NE(msg.find("without --moving_average_decay"), std::string::npos);
  }
  ckpt.tensors.push_back(
      {"n/w/ExponentialMovingAverage", torch::tensor({4.0f, 5.0f})});
  RestoreMovingAverages({{"n/w", w}}, ckpt, "/tmp/m.safetensors");
  EXPECT_EQ(w[1].item<float>(), 5.0f);
  ckpt.tensors.back().tensor = torch::zeros({3});
  EXPECT_THROW(RestoreMovingAverages({{"n/w", w}}, ckpt, "m"), Error);
}

}  // namespace
}  // namespace slimtorch
