#include "slimtorch/train/device_update.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/train/moving_average.h"
#include "train/update_kernels.h"

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

Twin MakeTwin(const std::string& name, const OptimizerParameters& o,
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
  OptimizerParameters o;
  o["opt_epsilon"] = 0.1;  // small enough that the epsilon matters less
  Twin golden = MakeTwin(name, o, device);
  Twin fast = MakeTwin(name, o, device);
  DeviceUpdate update(*fast.optimizer, fast.ema.get(), fast.vars, device);
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

// Every registered optimizer with a device form (the registry is read when
// the tests are listed, after every registration).
std::vector<std::string> DeviceOptimizers() {
  std::vector<std::string> names;
  for (const std::string& name : GetOptimizerRegistry().Names()) {
    if (OptimizerHasDeviceForm(name)) names.push_back(name);
  }
  return names;
}

class DeviceUpdateEquivalenceTest
    : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceUpdateEquivalenceTest, EqualsThePerVariableUpdateOnCpu) {
  RunEquivalence(GetParam(), torch::kCPU);
}

TEST_P(DeviceUpdateEquivalenceTest, EqualsThePerVariableUpdateOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  RunEquivalence(GetParam(), torch::Device(torch::kCUDA, 0));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DeviceUpdateEquivalenceTest,
                         ::testing::ValuesIn(DeviceOptimizers()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param;
                         });

TEST(DeviceUpdateTest, EveryTensorFlowRuleButFtrlHasADeviceForm) {
  const std::vector<std::string> names = DeviceOptimizers();
  for (const char* name :
       {"sgd", "momentum", "rmsprop", "adam", "adagrad", "adadelta"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_EQ(std::find(names.begin(), names.end(), "ftrl"), names.end());
}

TEST(DeviceUpdateTest, RefusesOptimizersWithoutADeviceForm) {
  EXPECT_TRUE(DeviceUpdate::Supports("momentum"));
  EXPECT_TRUE(DeviceUpdate::Supports("adam"));
  EXPECT_FALSE(DeviceUpdate::Supports("ftrl"));
  Twin t = MakeTwin("ftrl", OptimizerParameters(), torch::kCPU);
  try {
    DeviceUpdate update(*t.optimizer, nullptr, {}, torch::kCPU);
    FAIL() << "ftrl accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--optimizer=ftrl"), std::string::npos)
        << e.what();
  }
}

// ------------------------------------------------ fused multi-tensor kernels

using train_internal::kUpdateChunk;
using train_internal::kUpdateMaxTensors;
using train_internal::kUpdateThreads;
using train_internal::PackUpdateTensors;
using train_internal::UpdateBlock;
using train_internal::UpdateKind;
using train_internal::UpdatePack;
using train_internal::UpdateScalars;

// update_kernels.h's kernel run on the CPU as the GPU runs it: every thread
// of every block of every pack (no thread reads another's elements, so the
// order is immaterial).
void RunKernelOnCpu(const UpdateScalars& s,
                    const std::vector<UpdatePack>& packs) {
  for (const UpdatePack& p : packs) {
    for (int block = 0; block < p.blocks(); ++block) {
      for (int thread = 0; thread < kUpdateThreads; ++thread) {
        UpdateBlock(p, s, block, thread);
      }
    }
  }
}

// Sizes around the chunk and thread boundaries, empty ones, and more
// tensors than one launch takes.
std::vector<int64_t> KernelTestSizes() {
  std::vector<int64_t> sizes = {0,
                                1,
                                kUpdateThreads - 1,
                                kUpdateThreads,
                                kUpdateChunk - 1,
                                kUpdateChunk,
                                kUpdateChunk + 1,
                                3 * kUpdateChunk + 17,
                                0};
  for (int i = 0; i < kUpdateMaxTensors + 5; ++i) sizes.push_back(1 + i * 97);
  return sizes;
}

std::vector<float*> Pointers(const std::vector<torch::Tensor>& ts) {
  std::vector<float*> out;
  for (const auto& t : ts) out.push_back(t.data_ptr<float>());
  return out;
}

TEST(UpdateKernelTest, EveryElementIsUpdatedOnce) {
  // var -= 1 * 1 from 0: an element missed stays 0, one taken twice is -2.
  const std::vector<int64_t> sizes = KernelTestSizes();
  std::vector<torch::Tensor> vars, grads;
  for (int64_t n : sizes) {
    vars.push_back(torch::zeros({n}));
    grads.push_back(torch::ones({n}));
  }
  std::vector<float*> a = Pointers(vars);
  std::vector<float*> b = Pointers(grads);
  std::vector<const float*> cb(b.begin(), b.end());
  const std::vector<UpdatePack> packs = PackUpdateTensors(
      sizes.size(), a.data(), cb.data(), nullptr, sizes.data());
  ASSERT_EQ(packs.size(), 2u);  // 52 non-empty tensors, 40 a launch
  EXPECT_EQ(packs[0].count, kUpdateMaxTensors);
  EXPECT_EQ(packs[1].count, 12);
  const float lr = 1.0f;
  UpdateScalars s;
  s.kind = UpdateKind::kSgd;
  s.learning_rate = &lr;
  RunKernelOnCpu(s, packs);
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_TRUE(torch::equal(vars[i], torch::full({sizes[i]}, -1.0f)))
        << "tensor " << i << " of " << sizes[i] << " elements: min "
        << (sizes[i] ? vars[i].min().item<float>() : 0.0f) << ", max "
        << (sizes[i] ? vars[i].max().item<float>() : 0.0f);
  }
}

TEST(UpdateKernelTest, MovingAverageComplementIsTheTensorOpsOne) {
  // DeviceUpdate's tensor form of 1 - min(decay, (1 + n) / (10 + n)).
  for (float decay : {0.9999f, 0.99f, 0.5f}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{89},
                      int64_t{1000}, int64_t{123457}, int64_t{1} << 40}) {
      const torch::Tensor t = torch::tensor(n).to(torch::kFloat32);
      const float expected =
          (1.0f - ((t + 1.0f) / (t + 10.0f)).clamp_max(decay)).item<float>();
      EXPECT_EQ(train_internal::MovingAverageComplement(n, decay), expected)
          << "decay " << decay << ", step " << n;
    }
  }
}

// The kernel (run on the CPU) against DeviceUpdate's _foreach ops on the CPU,
// bit for bit, over several steps of `optimizer` and the moving averages.
void CheckKernelEqualsForeach(const std::string& optimizer) {
  const std::vector<int64_t> sizes = KernelTestSizes();
  torch::manual_seed(3);
  NamedTensors vars;
  for (size_t i = 0; i < sizes.size(); ++i) {
    vars.push_back({"v" + std::to_string(i),
                    torch::randn({sizes[i]}).requires_grad_(true)});
  }
  OptimizerParameters o;
  o["momentum"] = 0.9;
  std::unique_ptr<Optimizer> opt = CreateOptimizer(optimizer, vars, o);
  ExponentialMovingAverage ema(0.99, vars);
  DeviceUpdate update(*opt, &ema, vars, torch::kCPU);
  // The kernel's copies of the same values.
  std::vector<torch::Tensor> kv, ks, kc;
  for (const auto& v : vars) {
    kv.push_back(v.tensor.detach().clone());
    ks.push_back(v.tensor.detach().clone());
    kc.push_back(torch::zeros_like(v.tensor));
  }
  const bool momentum = optimizer == "momentum";
  std::vector<torch::Tensor> accum;
  if (momentum) {
    for (const auto& s : opt->State()) accum.push_back(s.tensor);
    ASSERT_EQ(accum.size(), vars.size());
  }
  const double lrs[] = {0.1, 0.37, 0.013};
  const int64_t steps[] = {1, 40, 5000};
  for (int k = 0; k < 3; ++k) {
    std::vector<torch::Tensor> grads;
    for (auto& v : vars) {
      grads.push_back(torch::randn(v.tensor.sizes()) * 3.0);
      v.tensor.mutable_grad() = grads.back().clone();
    }
    update.SetStep(lrs[k], steps[k]);
    update.ApplyOptimizer();
    update.ApplyAverages();

    const float lr = static_cast<float>(lrs[k]);
    UpdateScalars s;
    s.kind = momentum ? UpdateKind::kMomentum : UpdateKind::kSgd;
    s.learning_rate = &lr;
    s.momentum = 0.9f;
    s.step = &steps[k];
    s.decay = 0.99f;
    std::vector<float*> a = Pointers(kv);
    std::vector<float*> g = Pointers(grads);
    std::vector<const float*> cg(g.begin(), g.end());
    std::vector<float*> c = Pointers(kc);
    RunKernelOnCpu(
        s, PackUpdateTensors(sizes.size(), a.data(), cg.data(),
                             momentum ? c.data() : nullptr, sizes.data()));
    s.kind = UpdateKind::kMovingAverage;
    std::vector<float*> sh = Pointers(ks);
    std::vector<const float*> cv(a.begin(), a.end());
    RunKernelOnCpu(s, PackUpdateTensors(sizes.size(), sh.data(), cv.data(),
                                        nullptr, sizes.data()));
    for (size_t i = 0; i < vars.size(); ++i) {
      EXPECT_TRUE(torch::equal(kv[i], vars[i].tensor.detach()))
          << optimizer << " step " << k << ": variable " << i;
      EXPECT_TRUE(torch::equal(ks[i], ema.shadows()[i].tensor))
          << optimizer << " step " << k << ": shadow " << i;
      if (momentum) {
        EXPECT_TRUE(torch::equal(kc[i], accum[i]))
            << "step " << k << ": accumulator " << i;
      }
    }
  }
}

TEST(UpdateKernelTest, SgdEqualsTheForeachOpsBitForBit) {
  CheckKernelEqualsForeach("sgd");
}

TEST(UpdateKernelTest, MomentumEqualsTheForeachOpsBitForBit) {
  CheckKernelEqualsForeach("momentum");
}

// RecordLosses on `device` (the kernel on a GPU with the kernels built, the
// tensor ops otherwise) and the kernel's body on the CPU: the losses of the
// last step, the first non-finite loss and its step kept.
void CheckRecordLosses(torch::Device device) {
  Twin t = MakeTwin("sgd", OptimizerParameters(), device);
  DeviceUpdate update(*t.optimizer, nullptr, {}, device);
  torch::Tensor readout =
      torch::zeros({5}, torch::TensorOptions(torch::kFloat64).device(device));
  std::vector<double> host(5, 0.0);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // (step, total, cross entropy, regularization)
  const float steps[][4] = {{1, 2.5f, 2.25f, 0.1f},
                            {2, 1e38f, 1.0f, 3e38f},  // overflows to inf
                            {3, nan, nan, 0.5f},
                            {4, 0.75f, 0.5f, 0.125f}};
  for (const auto& s : steps) {
    const int64_t step = static_cast<int64_t>(s[0]);
    update.SetStep(0.1, step);
    auto scalar = [&](float v) {
      return torch::tensor(v).to(device).reshape({});
    };
    update.RecordLosses(scalar(s[1]), scalar(s[2]), scalar(s[3]), readout);
    const float total = s[1], ce = s[2], reg = s[3];
    train_internal::RecordStepLosses(&total, &ce, &reg, &step, host.data());
    const torch::Tensor r = readout.cpu();
    const float loss = s[1] + s[3];
    for (int k = 0; k < 3; ++k) {
      const double got = r[k].item<double>();
      EXPECT_TRUE(got == host[k] || (std::isnan(got) && std::isnan(host[k])))
          << "step " << step << ", readout " << k << ": " << got << " vs "
          << host[k];
    }
    if (!std::isnan(loss)) {
      EXPECT_EQ(r[0].item<double>(), static_cast<double>(loss));
    }
    EXPECT_EQ(r[2].item<double>(), static_cast<double>(s[3]));
    if (step >= 2) {
      // Step 2's infinite loss stays the first.
      EXPECT_EQ(r[3].item<double>(), static_cast<double>(inf)) << step;
      EXPECT_EQ(r[4].item<double>(), 2.0) << step;
      EXPECT_EQ(host[3], static_cast<double>(inf)) << step;
      EXPECT_EQ(host[4], 2.0) << step;
    } else {
      EXPECT_EQ(r[4].item<double>(), 0.0);
      EXPECT_EQ(host[4], 0.0);
    }
  }
  EXPECT_EQ(readout.cpu()[1].item<double>(), 0.5);
}

TEST(DeviceUpdateTest, RecordLossesKeepsTheFirstNonFiniteLossOnCpu) {
  CheckRecordLosses(torch::kCPU);
}

TEST(DeviceUpdateTest, RecordLossesKeepsTheFirstNonFiniteLossOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  CheckRecordLosses(torch::Device(torch::kCUDA, 0));
}

// On a GPU: the fused kernels against the _foreach ops, bit for bit, on
// tensors around the chunk boundaries and more than one launch takes, with
// a variable that gets no gradient and a channels-last one.
TEST(DeviceUpdateTest, FusedKernelsEqualTheForeachOpsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!DeviceUpdate::FusedKernelsBuilt()) {
    GTEST_SKIP() << "this build has no CUDA kernels";
  }
  const torch::Device cuda(torch::kCUDA, 0);
  for (const std::string optimizer : {"sgd", "momentum"}) {
    std::vector<int64_t> sizes = KernelTestSizes();
    auto make = [&](NamedTensors* vars) {
      torch::manual_seed(5);
      for (size_t i = 0; i < sizes.size(); ++i) {
        vars->push_back({"v" + std::to_string(i),
                         torch::randn({sizes[i]}).to(cuda).requires_grad_()});
      }
      vars->push_back(
          {"conv", torch::randn({4, 6, 3, 3})
                       .to(cuda)
                       .contiguous(torch::MemoryFormat::ChannelsLast)
                       .requires_grad_()});
    };
    NamedTensors fused_vars, plain_vars;
    make(&fused_vars);
    make(&plain_vars);
    OptimizerParameters o;
    o["momentum"] = 0.9;
    auto fused_opt = CreateOptimizer(optimizer, fused_vars, o);
    auto plain_opt = CreateOptimizer(optimizer, plain_vars, o);
    ExponentialMovingAverage fused_ema(0.999, fused_vars);
    ExponentialMovingAverage plain_ema(0.999, plain_vars);
    DeviceUpdate fused(*fused_opt, &fused_ema, fused_vars, cuda);
    DeviceUpdate plain(*plain_opt, &plain_ema, plain_vars, cuda);
    torch::manual_seed(9);
    for (int step = 1; step <= 3; ++step) {
      for (size_t i = 0; i < fused_vars.size(); ++i) {
        torch::Tensor g = torch::randn_like(fused_vars[i].tensor);
        const bool none = i == 3 && step == 2;
        fused_vars[i].tensor.mutable_grad() = none ? torch::Tensor() : g;
        plain_vars[i].tensor.mutable_grad() =
            none ? torch::Tensor() : g.clone();
      }
      fused.SetStep(0.05 * step, step * 400);
      plain.SetStep(0.05 * step, step * 400);
      const bool was = SetKernelSwitch(KernelSwitch::kFusedKernels, true);
      fused.ApplyOptimizer();
      fused.ApplyAverages();
      SetKernelSwitch(KernelSwitch::kFusedKernels, false);
      plain.ApplyOptimizer();
      plain.ApplyAverages();
      SetKernelSwitch(KernelSwitch::kFusedKernels, was);
      for (size_t i = 0; i < fused_vars.size(); ++i) {
        EXPECT_TRUE(torch::equal(fused_vars[i].tensor, plain_vars[i].tensor))
            << optimizer << " step " << step << ": " << fused_vars[i].name;
        EXPECT_TRUE(torch::equal(fused_ema.shadows()[i].tensor,
                                 plain_ema.shadows()[i].tensor))
            << optimizer << " step " << step << ": shadow of "
            << fused_vars[i].name;
      }
      auto fs = fused_opt->State();
      auto ps = plain_opt->State();
      for (size_t i = 0; i < fs.size(); ++i) {
        EXPECT_TRUE(torch::equal(fs[i].tensor, ps[i].tensor))
            << optimizer << " step " << step << ": " << fs[i].name;
      }
    }
  }
}

}  // namespace
}  // namespace slimtorch
