#include "slimtorch/core/kernel_switches.h"

#include <atomic>
#include <string>

#include "slimtorch/core/environment.h"

namespace slimtorch {
namespace {

bool NotZero(const char* v) { return v == nullptr || std::string(v) != "0"; }

size_t Index(KernelSwitch s) { return static_cast<size_t>(s); }

// In KernelSwitch's order, from the environment until set.
std::atomic<bool>& Live(KernelSwitch s) {
  static std::atomic<bool> live[] = {
      StartKernelSwitches().fused_kernels,
      StartKernelSwitches().dnnl_batch_norm,
      StartKernelSwitches().winograd,
      StartKernelSwitches().dnnl_pooling,
      StartKernelSwitches().depthwise,
  };
  return live[Index(s)];
}

const char* OnOff(bool on) { return on ? "on" : "off"; }

}  // namespace

KernelSwitches KernelSwitches::FromEnvironment(
    const std::function<const char*(const char*)>& lookup) {
  KernelSwitches s;
  s.fused_kernels = NotZero(lookup("SLIMTORCH_FUSED_KERNELS"));
  s.dnnl_batch_norm = NotZero(lookup("SLIMTORCH_DNNL_BATCH_NORM"));
  s.winograd = NotZero(lookup("SLIMTORCH_WINOGRAD"));
  s.dnnl_pooling = NotZero(lookup("SLIMTORCH_DNNL_POOLING"));
  s.depthwise = NotZero(lookup("SLIMTORCH_DEPTHWISE"));
  const char* allocator = lookup("SLIMTORCH_CPU_ALLOCATOR");
  s.caching_cpu_allocator =
      allocator == nullptr || std::string(allocator) != "system";
  const char* isa = lookup("SLIMTORCH_CPU_ISA");
  s.cpu_isa = isa == nullptr ? "" : isa;
  return s;
}

const KernelSwitches& StartKernelSwitches() {
  static const KernelSwitches start = KernelSwitches::FromEnvironment(
      [](const char* name) { return SlimtorchVariable(name); });
  return start;
}

bool KernelSwitchOn(KernelSwitch s) { return Live(s).load(); }

bool SetKernelSwitch(KernelSwitch s, bool on) {
  return Live(s).exchange(on);
}

std::string DescribeKernelSwitches() {
  return std::string("fused_kernels=") +
         OnOff(KernelSwitchOn(KernelSwitch::kFusedKernels)) +
         " dnnl_batch_norm=" +
         OnOff(KernelSwitchOn(KernelSwitch::kDnnlBatchNorm)) +
         " winograd=" + OnOff(KernelSwitchOn(KernelSwitch::kWinograd)) +
         " dnnl_pooling=" + OnOff(KernelSwitchOn(KernelSwitch::kDnnlPooling)) +
         " depthwise=" + OnOff(KernelSwitchOn(KernelSwitch::kDepthwise)) +
         " cpu_allocator=" +
         (StartKernelSwitches().caching_cpu_allocator ? "caching" : "system") +
         " cpu_isa=" +
         (StartKernelSwitches().cpu_isa.empty() ? std::string("widest")
                                                : StartKernelSwitches().cpu_isa);
}

}  // namespace slimtorch
