#include "slimtorch/core/kernel_switches.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace slimtorch {
namespace {

// The switches from a made-up environment.
KernelSwitches From(const std::map<std::string, std::string>& env) {
  return KernelSwitches::FromEnvironment([&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(KernelSwitchesTest, AnEmptyEnvironmentTurnsEverythingOn) {
  const KernelSwitches s = From({});
  EXPECT_TRUE(s.fused_kernels);
  EXPECT_TRUE(s.dnnl_batch_norm);
  EXPECT_TRUE(s.winograd);
  EXPECT_TRUE(s.dnnl_pooling);
  EXPECT_TRUE(s.depthwise);
  EXPECT_TRUE(s.caching_cpu_allocator);
  EXPECT_EQ(s.cpu_isa, "");
}

TEST(KernelSwitchesTest, OnlyZeroTurnsAKernelOff) {
  // As each variable was read before the switches were gathered: "0" is
  // off, anything else (even "off" or "") leaves the kernel on.
  const KernelSwitches s = From({{"SLIMTORCH_FUSED_KERNELS", "0"},
                                 {"SLIMTORCH_DNNL_BATCH_NORM", "off"},
                                 {"SLIMTORCH_WINOGRAD", ""},
                                 {"SLIMTORCH_DNNL_POOLING", "0"},
                                 {"SLIMTORCH_DEPTHWISE", "0"}});
  EXPECT_FALSE(s.fused_kernels);
  EXPECT_TRUE(s.dnnl_batch_norm);
  EXPECT_TRUE(s.winograd);
  EXPECT_FALSE(s.dnnl_pooling);
  EXPECT_FALSE(s.depthwise);
}

TEST(KernelSwitchesTest, AllocatorAndInstructionSet) {
  EXPECT_FALSE(From({{"SLIMTORCH_CPU_ALLOCATOR", "system"}}).caching_cpu_allocator);
  EXPECT_TRUE(From({{"SLIMTORCH_CPU_ALLOCATOR", "caching"}}).caching_cpu_allocator);
  EXPECT_EQ(From({{"SLIMTORCH_CPU_ISA", "avx2"}}).cpu_isa, "avx2");
}

TEST(KernelSwitchesTest, SettersFlipTheLiveSwitchAndTheDescription) {
  const bool before = SetKernelSwitch(KernelSwitch::kWinograd, false);
  EXPECT_FALSE(KernelSwitchOn(KernelSwitch::kWinograd));
  EXPECT_NE(DescribeKernelSwitches().find("winograd=off"), std::string::npos)
      << DescribeKernelSwitches();
  EXPECT_FALSE(SetKernelSwitch(KernelSwitch::kWinograd, before));
  EXPECT_EQ(KernelSwitchOn(KernelSwitch::kWinograd), before);
}

}  // namespace
}  // namespace slimtorch
