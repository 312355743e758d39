#include "slimtorch/core/cpu_isa.h"

#include <glog/logging.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "slimtorch/core/kernel_switches.h"

namespace slimtorch {
namespace {

CpuIsa Detect() {
#if defined(SLIMTORCH_ISA_VARIANTS) && defined(__x86_64__)
  // __builtin_cpu_supports also checks that the operating system saves the
  // vector registers (XGETBV), not only the CPUID bits.
  __builtin_cpu_init();
  // (every CPU with AVX2 has FMA too; the depthwise kernels use it)
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return avx512 ? CpuIsa::kAvx512 : avx2 ? CpuIsa::kAvx2 : CpuIsa::kBaseline;
#else
  return CpuIsa::kBaseline;
#endif
}

CpuIsa Lower(CpuIsa a, CpuIsa b) {
  return static_cast<int>(a) < static_cast<int>(b) ? a : b;
}

// SupportedCpuIsa() capped by SLIMTORCH_CPU_ISA.
CpuIsa Initial() {
  const CpuIsa supported = SupportedCpuIsa();
  const std::string& env = StartKernelSwitches().cpu_isa;
  if (env.empty()) return supported;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (env == CpuIsaName(isa)) return Lower(isa, supported);
  }
  LOG(WARNING) << "SLIMTORCH_CPU_ISA=" << env
               << " is not one of baseline, avx2, avx512; using "
               << CpuIsaName(supported);
  return supported;
}

std::atomic<int>& Active() {
  static std::atomic<int> active{static_cast<int>(Initial())};
  return active;
}

}  // namespace

CpuIsa SupportedCpuIsa() {
  static const CpuIsa supported = Detect();
  return supported;
}

CpuIsa ActiveCpuIsa() {
  return static_cast<CpuIsa>(Active().load(std::memory_order_relaxed));
}

CpuIsa SetActiveCpuIsa(CpuIsa isa) {
  return static_cast<CpuIsa>(
      Active().exchange(static_cast<int>(Lower(isa, SupportedCpuIsa()))));
}

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kBaseline:
      break;
  }
  return "baseline";
}

}  // namespace slimtorch
