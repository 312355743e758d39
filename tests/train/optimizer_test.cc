#include "slimtorch/train/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iomanip>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

struct GoldenTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct GoldenStep {
  double lr;
  // Gradient per variable, in variable order.
  std::vector<GoldenTensor> grads;
  // Variables, slots and non-slot variables after the step, sorted by name.
  std::vector<GoldenTensor> state;
};

struct GoldenCase {
  std::string label;
  std::string optimizer;
  std::vector<std::pair<std::string, double>> options;
  std::vector<GoldenTensor> initial;
  std::vector<GoldenStep> steps;
};

#include "golden/optimizer_goldens.inc"

const std::vector<std::string> kAllOptimizers = {
    "adadelta", "adagrad", "adam", "ftrl", "momentum", "rmsprop", "sgd"};

torch::Tensor ToTensor(const GoldenTensor& g) {
  return torch::tensor(g.values, torch::kFloat).reshape(g.shape);
}

OptimizerParameters OptionsOf(const GoldenCase& c) {
  OptimizerParameters options;
  for (const auto& kv : c.options) options[kv.first] = kv.second;
  return options;
}

// The case's variables (the names with gradients) at their initial values.
NamedTensors VariablesOf(const GoldenCase& c, const torch::TensorOptions& to) {
  std::map<std::string, torch::Tensor> initial;
  for (const GoldenTensor& g : c.initial) initial[g.name] = ToTensor(g);
  NamedTensors variables;
  for (const GoldenTensor& g : c.steps.at(0).grads) {
    variables.push_back(
        {g.name, initial.at(g.name).to(to).clone().set_requires_grad(true)});
  }
  return variables;
}

void SetGrads(const NamedTensors& variables, const GoldenStep& step) {
  for (size_t i = 0; i < variables.size(); ++i) {
    ASSERT_EQ(variables[i].name, step.grads[i].name);
    torch::Tensor var = variables[i].tensor;
    var.mutable_grad() = ToTensor(step.grads[i]).to(var.options());
  }
}

// Variables and optimizer state by name, on the CPU.
std::map<std::string, torch::Tensor> Snapshot(const NamedTensors& variables,
                                              const Optimizer& optimizer) {
  std::map<std::string, torch::Tensor> all;
  for (const NamedTensor& v : variables) {
    all[v.name] = v.tensor.detach().cpu().clone();
  }
  for (const NamedTensor& s : optimizer.State()) {
    EXPECT_TRUE(all.emplace(s.name, s.tensor.cpu().clone()).second) << s.name;
  }
  return all;
}

// Same names as `golden`; each element within rtol * (|g| + max |G|) of
// its golden g, G being the golden tensor (values that cancel to near zero
// are judged at the scale of their tensor).
::testing::AssertionResult MatchesGolden(
    const std::map<std::string, torch::Tensor>& actual,
    const std::vector<GoldenTensor>& golden, double rtol) {
  std::vector<std::string> golden_names;
  std::vector<std::string> actual_names;
  for (const GoldenTensor& g : golden) golden_names.push_back(g.name);
  for (const auto& kv : actual) actual_names.push_back(kv.first);
  if (golden_names != actual_names) {
    return ::testing::AssertionFailure()
           << "names differ: expected " << ::testing::PrintToString(golden_names)
           << ", got " << ::testing::PrintToString(actual_names);
  }
  for (const GoldenTensor& g : golden) {
    torch::Tensor expected = ToTensor(g).to(torch::kDouble);
    torch::Tensor got = actual.at(g.name).to(torch::kDouble);
    if (got.sizes() != expected.sizes()) {
      return ::testing::AssertionFailure()
             << g.name << ": shape " << got.sizes() << ", expected "
             << expected.sizes();
    }
    if (expected.numel() == 0) continue;
    const double scale = expected.abs().max().item<double>();
    torch::Tensor excess =
        (got - expected).abs() - rtol * (expected.abs() + scale);
    for (int64_t i = 0; i < excess.numel(); ++i) {
      if (excess.flatten()[i].item<double>() > 0) {
        return ::testing::AssertionFailure()
               << std::setprecision(9) << g.name << "[" << i << "]: got "
               << got.flatten()[i].item<double>() << ", expected "
               << expected.flatten()[i].item<double>();
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs a golden case on `to`; values must match within `rtol`.
void RunGoldenCase(const GoldenCase& c, const torch::TensorOptions& to,
                   double rtol) {
  NamedTensors variables = VariablesOf(c, to);
  auto optimizer = CreateOptimizer(c.optimizer, variables, OptionsOf(c));
  EXPECT_EQ(optimizer->name(), c.optimizer);
  EXPECT_TRUE(MatchesGolden(Snapshot(variables, *optimizer), c.initial, 0))
      << "initial state";
  for (size_t i = 0; i < c.steps.size(); ++i) {
    SetGrads(variables, c.steps[i]);
    optimizer->Apply(c.steps[i].lr);
    EXPECT_TRUE(
        MatchesGolden(Snapshot(variables, *optimizer), c.steps[i].state, rtol))
        << "after step " << i + 1;
  }
  for (const NamedTensor& v : variables) {
    EXPECT_EQ(v.tensor.scalar_type(), to.dtype().toScalarType());
  }
  for (const NamedTensor& s : optimizer->State()) {
    if (s.name == "beta1_power" || s.name == "beta2_power") {
      EXPECT_EQ(s.tensor.scalar_type(), torch::kFloat) << s.name;
      EXPECT_TRUE(s.tensor.device().is_cpu()) << s.name;
    } else {
      EXPECT_EQ(s.tensor.scalar_type(), to.dtype().toScalarType()) << s.name;
      EXPECT_EQ(s.tensor.device(), to.device()) << s.name;
      EXPECT_FALSE(s.tensor.requires_grad()) << s.name;
    }
  }
}

class OptimizerGoldenTest : public ::testing::TestWithParam<size_t> {
 protected:
  const GoldenCase& golden() const { return OptimizerGoldens()[GetParam()]; }
};

TEST_P(OptimizerGoldenTest, Float32MatchesTensorFlow) {
  RunGoldenCase(golden(), torch::TensorOptions().dtype(torch::kFloat), 1e-6);
}

// Double variables keep double slots; TF's float32 goldens bound the result.
TEST_P(OptimizerGoldenTest, Float64StaysDoubleAndMatches) {
  RunGoldenCase(golden(), torch::TensorOptions().dtype(torch::kDouble), 1e-5);
}

TEST_P(OptimizerGoldenTest, CudaMatchesTensorFlow) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  RunGoldenCase(golden(),
                torch::TensorOptions().dtype(torch::kFloat).device(
                    torch::Device(torch::kCUDA, 0)),
                1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    TensorFlow, OptimizerGoldenTest,
    ::testing::Range<size_t>(0, OptimizerGoldens().size()),
    [](const ::testing::TestParamInfo<size_t>& info) {
      return OptimizerGoldens()[info.param].label;
    });

TEST(OptimizerGoldensTest, CoverEveryOptimizer) {
  std::map<std::string, int> cases;
  for (const GoldenCase& c : OptimizerGoldens()) ++cases[c.optimizer];
  for (const std::string& name : kAllOptimizers) {
    EXPECT_GE(cases[name], name == "sgd" ? 1 : 2) << name;
  }
}

NamedTensors OneVariable(const std::string& name = "net/w") {
  return {{name, torch::ones({2, 3}).set_requires_grad(true)}};
}

std::vector<std::string> StateNames(const Optimizer& optimizer) {
  std::vector<std::string> names;
  for (const NamedTensor& s : optimizer.State()) names.push_back(s.name);
  return names;
}

TEST(OptimizerTest, SlotNamesAsDocumented) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"adadelta", {"net/w/Adadelta", "net/w/Adadelta_1"}},
      {"adagrad", {"net/w/Adagrad"}},
      {"adam", {"net/w/Adam", "net/w/Adam_1", "beta1_power", "beta2_power"}},
      {"ftrl", {"net/w/Ftrl", "net/w/Ftrl_1"}},
      {"momentum", {"net/w/Momentum"}},
      {"rmsprop", {"net/w/RMSProp", "net/w/RMSProp_1"}},
      {"sgd", {}},
  };
  for (const auto& kv : expected) {
    auto optimizer = CreateOptimizer(kv.first, OneVariable(), {});
    EXPECT_EQ(StateNames(*optimizer), kv.second) << kv.first;
  }
}

TEST(OptimizerTest, InitialSlotValues) {
  OptimizerParameters options;
  options["adagrad_initial_accumulator_value"] = 0.25;
  options["ftrl_initial_accumulator_value"] = 0.5;
  const std::map<std::string, float> expected = {
      {"net/w/Adadelta", 0},  {"net/w/Adadelta_1", 0}, {"net/w/Adagrad", 0.25f},
      {"net/w/Adam", 0},      {"net/w/Adam_1", 0},     {"beta1_power", 0.9f},
      {"beta2_power", 0.999f}, {"net/w/Ftrl", 0.5f},   {"net/w/Ftrl_1", 0},
      {"net/w/Momentum", 0},  {"net/w/RMSProp", 1},    {"net/w/RMSProp_1", 0},
  };
  for (const std::string& name : kAllOptimizers) {
    auto optimizer = CreateOptimizer(name, OneVariable(), options);
    for (const NamedTensor& s : optimizer->State()) {
      EXPECT_TRUE(torch::all(s.tensor == expected.at(s.name)).item<bool>())
          << s.name;
    }
  }
}

TEST(OptimizerTest, RegistryHoldsAllSeven) {
  EXPECT_EQ(GetOptimizerRegistry().Names(), kAllOptimizers);
  for (const std::string& name : kAllOptimizers) {
    NamedTensors variables = OneVariable();
    auto optimizer = CreateOptimizer(name, variables, {});
    EXPECT_EQ(optimizer->name(), name);
    variables[0].tensor.mutable_grad() = torch::full({2, 3}, 0.5);
    optimizer->Apply(0.1);
    EXPECT_FALSE(torch::equal(variables[0].tensor, torch::ones({2, 3})))
        << name;
  }
}

TEST(OptimizerTest, UnknownNameListsAllSeven) {
  try {
    CreateOptimizer("adamw", OneVariable(), {});
    FAIL() << "expected slimtorch::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("adamw"), std::string::npos) << what;
    EXPECT_NE(what.find("adadelta, adagrad, adam, ftrl, momentum, rmsprop, sgd"),
              std::string::npos)
        << what;
  }
}

NamedTensors TwoVariables() {
  return {{"net/w", torch::linspace(-1, 1, 6).reshape({2, 3}).set_requires_grad(true)},
          {"net/b", torch::linspace(0.5, 1.5, 3).set_requires_grad(true)}};
}

void SetStepGrads(const NamedTensors& variables, int step) {
  for (size_t i = 0; i < variables.size(); ++i) {
    torch::Tensor var = variables[i].tensor;
    var.mutable_grad() =
        torch::sin(torch::arange(var.numel(), torch::kFloat) * (step + 1) +
                   static_cast<double>(i))
            .reshape(var.sizes());
  }
}

NamedTensors CloneVariables(const NamedTensors& variables) {
  NamedTensors out;
  for (const NamedTensor& v : variables) {
    out.push_back({v.name, v.tensor.detach().clone().set_requires_grad(true)});
  }
  return out;
}

TEST(OptimizerTest, LoadStateRoundTrip) {
  OptimizerParameters options;
  options["ftrl_l1"] = 0.01;
  options["ftrl_l2"] = 0.01;
  for (const std::string& name : kAllOptimizers) {
    NamedTensors a_vars = TwoVariables();
    auto a = CreateOptimizer(name, a_vars, options);
    for (int step = 0; step < 2; ++step) {
      SetStepGrads(a_vars, step);
      a->Apply(0.05);
    }
    std::map<std::string, torch::Tensor> saved;
    for (const NamedTensor& s : a->State()) saved[s.name] = s.tensor.clone();
    saved["unrelated/extra"] = torch::zeros({7});

    NamedTensors b_vars = CloneVariables(a_vars);
    auto b = CreateOptimizer(name, b_vars, options);
    b->LoadState(saved);
    SetStepGrads(a_vars, 2);
    SetStepGrads(b_vars, 2);
    a->Apply(0.02);
    b->Apply(0.02);
    for (size_t i = 0; i < a_vars.size(); ++i) {
      EXPECT_TRUE(torch::equal(a_vars[i].tensor, b_vars[i].tensor))
          << name << " " << a_vars[i].name;
    }
    NamedTensors a_state = a->State();
    NamedTensors b_state = b->State();
    ASSERT_EQ(a_state.size(), b_state.size());
    for (size_t i = 0; i < a_state.size(); ++i) {
      EXPECT_EQ(a_state[i].name, b_state[i].name);
      EXPECT_TRUE(torch::equal(a_state[i].tensor, b_state[i].tensor))
          << name << " " << a_state[i].name;
    }
  }
}

std::string LoadStateError(Optimizer& optimizer,
                           const std::map<std::string, torch::Tensor>& state) {
  try {
    optimizer.LoadState(state);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OptimizerTest, LoadStateRejectsMissingOrMisshapedSlots) {
  NamedTensors variables = TwoVariables();
  auto adam = CreateOptimizer("adam", variables, {});
  std::map<std::string, torch::Tensor> state;
  for (const NamedTensor& s : adam->State()) {
    state[s.name] = torch::full_like(s.tensor, 0.5);
  }

  auto missing = state;
  missing.erase("net/b/Adam_1");
  missing.erase("beta2_power");
  std::string what = LoadStateError(*adam, missing);
  EXPECT_NE(what.find("missing"), std::string::npos) << what;
  EXPECT_NE(what.find("net/b/Adam_1"), std::string::npos) << what;
  EXPECT_NE(what.find("beta2_power"), std::string::npos) << what;

  auto misshaped = state;
  misshaped["net/w/Adam"] = torch::zeros({3, 2});
  what = LoadStateError(*adam, misshaped);
  EXPECT_NE(what.find("net/w/Adam"), std::string::npos) << what;
  EXPECT_NE(what.find("[2, 3]"), std::string::npos) << what;
  EXPECT_NE(what.find("[3, 2]"), std::string::npos) << what;

  // A failed load leaves the state as it was.
  for (const NamedTensor& s : adam->State()) {
    EXPECT_FALSE(torch::equal(s.tensor, torch::full_like(s.tensor, 0.5)))
        << s.name;
  }
  adam->LoadState(state);
  for (const NamedTensor& s : adam->State()) {
    EXPECT_TRUE(torch::equal(s.tensor, torch::full_like(s.tensor, 0.5)))
        << s.name;
  }
}

TEST(OptimizerTest, VariablesWithoutGradAreSkipped) {
  for (const std::string& name : kAllOptimizers) {
    NamedTensors variables = TwoVariables();
    auto optimizer = CreateOptimizer(name, variables, {});
    std::map<std::string, torch::Tensor> before;
    for (const NamedTensor& s : optimizer->State()) {
      before[s.name] = s.tensor.clone();
    }
    const torch::Tensor b_before = variables[1].tensor.detach().clone();

    // No gradient at all: nothing changes, Adam's beta powers included.
    optimizer->Apply(0.1);
    for (const NamedTensor& s : optimizer->State()) {
      EXPECT_TRUE(torch::equal(s.tensor, before.at(s.name))) << name << s.name;
    }

    variables[0].tensor.mutable_grad() = torch::full({2, 3}, 0.3);
    optimizer->Apply(0.1);
    EXPECT_TRUE(torch::equal(variables[1].tensor, b_before)) << name;
    for (const NamedTensor& s : optimizer->State()) {
      if (s.name.rfind("net/b/", 0) == 0) {
        EXPECT_TRUE(torch::equal(s.tensor, before.at(s.name)))
            << name << " " << s.name;
      } else {
        EXPECT_FALSE(torch::equal(s.tensor, before.at(s.name)))
            << name << " " << s.name;
      }
    }
  }
}

TEST(OptimizerTest, AdamBetaPowersAdvanceOncePerStep) {
  NamedTensors variables = TwoVariables();
  auto adam = CreateOptimizer("adam", variables, {});
  for (int step = 0; step < 3; ++step) {
    SetStepGrads(variables, step);
    adam->Apply(0.1);
  }
  float beta1_power = 0.9f;
  float beta2_power = 0.999f;
  for (int step = 0; step < 3; ++step) {
    beta1_power *= 0.9f;
    beta2_power *= 0.999f;
  }
  for (const NamedTensor& s : adam->State()) {
    if (s.name == "beta1_power") EXPECT_EQ(s.tensor.item<float>(), beta1_power);
    if (s.name == "beta2_power") EXPECT_EQ(s.tensor.item<float>(), beta2_power);
  }
}

TEST(OptimizerTest, RejectsBadVariablesAndGradients) {
  NamedTensors twice = {{"w", torch::zeros({2}).set_requires_grad(true)},
                        {"w", torch::zeros({3}).set_requires_grad(true)}};
  EXPECT_THROW(CreateOptimizer("sgd", twice, {}), Error);
  NamedTensors integral = {{"step", torch::zeros({2}, torch::kLong)}};
  EXPECT_THROW(CreateOptimizer("momentum", integral, {}), Error);

  NamedTensors variables = OneVariable();
  auto optimizer = CreateOptimizer("momentum", variables, {});
  variables[0].tensor.mutable_grad() = torch::zeros({3, 2});
  try {
    optimizer->Apply(0.1);
    FAIL() << "expected slimtorch::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("net/w"), std::string::npos)
        << e.what();
  }
}

TEST(OptimizerTest, RejectsInvalidHyperParameters) {
  OptimizerParameters options;
  options["adagrad_initial_accumulator_value"] = 0;
  EXPECT_THROW(CreateOptimizer("adagrad", OneVariable(), options), Error);
  options = {};
  options["ftrl_initial_accumulator_value"] = -1;
  EXPECT_THROW(CreateOptimizer("ftrl", OneVariable(), options), Error);
  options = {};
  options["ftrl_learning_rate_power"] = 0.5;
  EXPECT_THROW(CreateOptimizer("ftrl", OneVariable(), options), Error);
  options = {};
  options["ftrl_l1"] = -0.1;
  EXPECT_THROW(CreateOptimizer("ftrl", OneVariable(), options), Error);
  options = {};
  options["ftrl_l2"] = -0.1;
  EXPECT_THROW(CreateOptimizer("ftrl", OneVariable(), options), Error);
}

// --clip_gradient_norm: tf.clip_by_norm per variable. Golden values from
// TensorFlow 2.21 (tf.clip_by_norm(g, 0.5) and (g, 10.0) on this g, float32).
TEST(ClipGradientNormsTest, MatchesTensorFlowsClipByNorm) {
  const std::vector<float> g = {0.7f, -1.3f, 2.1f, 0.05f, -0.4f, 1.9f};
  auto make = [&] {
    torch::Tensor v = torch::zeros({2, 3}).requires_grad_();
    v.mutable_grad() = torch::tensor(g).reshape({2, 3});
    return v;
  };
  const torch::Tensor a = make();
  const torch::Tensor b = make();
  const torch::Tensor none = torch::zeros({2}).requires_grad_();  // no grad
  const torch::Tensor zero = torch::zeros({2}).requires_grad_();
  zero.mutable_grad() = torch::zeros({2});
  ClipGradientNorms({{"a", a}, {"none", none}, {"zero", zero}}, 0.5);
  ClipGradientNorms({{"b", b}}, 10.0);
  const float want_clipped[6] = {0.108726598f,   -0.201920822f,  0.326179773f,
                                 0.00776618579f, -0.0621294864f, 0.295115054f};
  const torch::Tensor got = a.grad().flatten();
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(got[i].item<float>(), want_clipped[i], 2e-8) << i;
    // Within the bound: TensorFlow gives g back exactly.
    EXPECT_EQ(b.grad().flatten()[i].item<float>(), g[i]) << i;
  }
  EXPECT_NEAR(got.norm().item<double>(), 0.5, 1e-6);
  EXPECT_FALSE(none.grad().defined());
  EXPECT_TRUE(torch::equal(zero.grad(), torch::zeros({2})));
  EXPECT_THROW(ClipGradientNorms({{"a", a}}, 0.0), Error);
}

}  // namespace
}  // namespace slimtorch
