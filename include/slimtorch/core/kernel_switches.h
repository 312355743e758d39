#pragma once
// The kernel switches: which of slimtorch's own kernels may run, in one
// place. Each kernel computes what the LibTorch ops it replaces compute; the
// switches exist for A/B runs and for ruling a kernel out when hunting a bug
// (docs/runtime_switches.md has the table). They are read from the
// environment once, the first time any is asked for, and named in the tools'
// start log line (DescribeKernelSwitches). Tests and benchmarks flip them
// with SetKernelSwitch (the setters of nets/layers.h and SetFusedKernels
// are the same switches under their old names).

#include <functional>
#include <string>

namespace slimtorch {

// The switches as the environment sets them.
struct KernelSwitches {
  // SLIMTORCH_FUSED_KERNELS=0 turns off every fused GPU kernel (batch norm,
  // add + ReLU, pooling, LRN, bias + activation, the multi-tensor updates,
  // the CIFAR augmentation, the loss readout) and on the CPU the fused batch
  // norm (oneDNN's included) and add + ReLU.
  bool fused_kernels = true;
  // SLIMTORCH_DNNL_BATCH_NORM=0: channels-last CPU training batch norms run
  // slimtorch's own kernels instead of oneDNN's.
  bool dnnl_batch_norm = true;
  // SLIMTORCH_WINOGRAD=0: 3x3 stride-1 float32 CPU convolutions run
  // LibTorch's convolution instead of oneDNN's Winograd kernels.
  bool winograd = true;
  // SLIMTORCH_DNNL_POOLING=0: channels-last bfloat16 CPU max pooling runs
  // LibTorch's kernel instead of oneDNN's.
  bool dnnl_pooling = true;
  // SLIMTORCH_DEPTHWISE=0: channels-last float32 CPU depthwise convolutions
  // run LibTorch's convolution instead of slimtorch's own kernel.
  bool depthwise = true;
  // SLIMTORCH_CPU_ALLOCATOR=system: LibTorch's own CPU allocator instead of
  // slimtorch's caching one.
  bool caching_cpu_allocator = true;
  // SLIMTORCH_CPU_ISA: "" (the widest the CPU has), or baseline, avx2,
  // avx512 as a cap; core/cpu_isa.cc checks the name.
  std::string cpu_isa;

  // From a getenv-like lookup (null = unset). Only "0" turns a kernel off.
  static KernelSwitches FromEnvironment(
      const std::function<const char*(const char*)>& lookup);
};

// The process's switches as its environment set them, read on the first
// call.
const KernelSwitches& StartKernelSwitches();

// The switches that can change while the process runs (tests, A/B runs).
enum class KernelSwitch {
  kFusedKernels,
  kDnnlBatchNorm,
  kWinograd,
  kDnnlPooling,
  kDepthwise
};

// Whether the kernel may run now: StartKernelSwitches() until set.
bool KernelSwitchOn(KernelSwitch s);

// Sets a switch for the whole process; returns its previous setting.
bool SetKernelSwitch(KernelSwitch s, bool on);

// "fused_kernels=on dnnl_batch_norm=on winograd=on dnnl_pooling=on
// depthwise=on cpu_allocator=caching cpu_isa=widest": the live switches and the
// instruction-set cap asked for (ActiveCpuIsa() says which one runs), for
// the start log line.
std::string DescribeKernelSwitches();

}  // namespace slimtorch
