#pragma once
// How the batch norm kernels of every back end (cpu/, dnnl/, cuda/) see a
// tensor and the activation they fuse (private to src/nets).

#include <cstdint>

namespace slimtorch {
namespace nets {
namespace internal {

struct BnLayout {
  int64_t n = 0;         // images
  int64_t channels = 0;  // C
  int64_t spatial = 0;   // H * W
  bool channels_last = false;
  // bfloat16 values (x, y and their gradients): oneDNN's batch norm only
  // (batch_norm_dnnl.h); the own kernels take float32.
  bool bfloat16 = false;
};

// kRelu: max(0, v); kRelu6: min(max(0, v), 6).
enum class BnActivation { kNone, kRelu, kRelu6 };

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
