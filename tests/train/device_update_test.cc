#include "slimtorch/train/device_update.h"

#include <gtest/gtest.h>

#include "slimtorch/core/error.h"
#include "slimtorch/train/moving_average.h"

namespace slimtorch {
namespace {

// Two copies of the same variables, one updated by the optimizer's own
// per-variable Apply (the golden path, itself checked against TensorFlow in
// optimizer_test.cc), one by DeviceUpdate; both see the same gradients and
// learning rates for several steps.
struct Twin {
  NamedTensors vars;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<ExponentialMovingAverage> ema;
};

Twin MakeTwin(const std::string& name, const OptimizerOptions& o,
              torch::Device device) {
  torch::manual_seed(7);
  Twin t;
  t.vars = {{"net/conv/weights", torch::randn({3, 3, 2, 4})},
            {"net/conv/biases", torch::randn({4})},
            {"net/fc/weights", torch::randn({5, 7})}};
  for (auto& v : t.vars) v.tensor = v.tensor.to(device).requires_grad_(true);
  t.optimizer = CreateOptimizer(name, t.vars, o);
  t.ema = std::make_unique<ExponentialMovingAverage>(0.99, t.vars);
  return t;
}

void CheckEqual(const Twin& a, const Twin& b, const std::string& what) {
  for (size_t i = 0; i < a.vars.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a.vars[i].tensor.cpu(), b.vars[i].tensor.cpu(),
                                1e-5, 1e-6))
        << what << ": " << a.vars[i].name;
    EXPECT_TRUE(torch::allclose(a.ema->shadows()[i].tensor.cpu(),
                                b.ema->shadows()[i].tensor.cpu(), 1e-5, 1e-6))
        << what << ": shadow of " << a.vars[i].name;
  }
  auto sa = a.optimizer->State();
  auto sb = b.optimizer->State();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_TRUE(
        torch::allclose(sa[i].tensor.cpu(), sb[i].tensor.cpu(), 1e-5, 1e-6))
        << what << ": slot " << sa[i].name;
  }
}

void RunEquivalence(const std::string& name, torch::Device device) {
  OptimizerOptions o;
  o.opt_epsilon = 0.1;  // small enough that the epsilon matters less
  Twin golden = MakeTwin(name, o, device);
  Twin fast = MakeTwin(name, o, device);
  DeviceUpdate update(name, fast.vars, *fast.optimizer, o, fast.ema.get(),
                      fast.vars, device);
  const double lrs[] = {0.1, 0.05, 0.3, 0.01, 0.2, 0.07};
  torch::manual_seed(11);
  for (int step = 0; step < 6; ++step) {
    for (size_t i = 0; i < golden.vars.size(); ++i) {
      torch::Tensor g = torch::randn(golden.vars[i].tensor.sizes()).to(device);
      // The biases get no gradient on odd steps: they and their slots stay.
      const bool none = i == 1 && step % 2 == 1;
      golden.vars[i].tensor.mutable_grad() = none ? torch::Tensor() : g.clone();
      fast.vars[i].tensor.mutable_grad() = none ? torch::Tensor() : g.clone();
    }
    golden.optimizer->Apply(lrs[step]);
    golden.ema->Apply(step + 1);
    update.SetStep(lrs[step], step + 1);
    update.ApplyOptimizer();
    update.ApplyAverages();
    update.SyncState();  // Adam's beta powers into the optimizer's
    CheckEqual(golden, fast, name + " step " + std::to_string(step + 1));
  }
  EXPECT_EQ(update.step().item<int64_t>(), 6);
}

// Every optimizer with a device form.
const char* const kDeviceOptimizers[] = {"sgd",  "momentum", "rmsprop",
                                         "adam", "adagrad",  "adadelta"};

class DeviceUpdateEquivalenceTest
    : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceUpdateEquivalenceTest, EqualsThePerVariableUpdateOnCpu) {
  RunEquivalence(GetParam(), torch::kCPU);
}

TEST_P(DeviceUpdateEquivalenceTest, EqualsThePerVariableUpdateOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  RunEquivalence(GetParam(), torch::Device(torch::kCUDA, 0));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DeviceUpdateEquivalenceTest,
                         ::testing::ValuesIn(kDeviceOptimizers));

TEST(DeviceUpdateTest, RefusesOptimizersWithoutADeviceForm) {
  EXPECT_TRUE(DeviceUpdate::Supports("momentum"));
  EXPECT_TRUE(DeviceUpdate::Supports("adam"));
  EXPECT_FALSE(DeviceUpdate::Supports("ftrl"));
  Twin t = MakeTwin("ftrl", OptimizerOptions(), torch::kCPU);
  try {
    DeviceUpdate update("ftrl", t.vars, *t.optimizer, OptimizerOptions(),
                        nullptr, {}, torch::kCPU);
    FAIL() << "ftrl accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--optimizer=ftrl"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace slimtorch
