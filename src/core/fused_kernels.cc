#include "slimtorch/core/fused_kernels.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace slimtorch {
namespace {

std::atomic<bool>& Switch() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("SLIMTORCH_FUSED_KERNELS");
    return v == nullptr || std::string(v) != "0";
  }()};
  return on;
}

}  // namespace

bool FusedKernelsEnabled() { return Switch().load(); }

bool SetFusedKernels(bool enabled) { return Switch().exchange(enabled); }

}  // namespace slimtorch
