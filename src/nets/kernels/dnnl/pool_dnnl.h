#pragma once
// Max pooling of channels-last float32 / bfloat16 CPU tensors through
// oneDNN's pooling, the library LibTorch's CPU build links (TensorFlow's CPU
// build pools the same way; layers.cc sends it bfloat16 only): a forward
// that keeps its window argmax as a workspace, and a backward that writes
// every dx element in one pass (LibTorch's channels-last kernels: a zero
// fill then a scatter). Windows clipped to the image (TensorFlow's SAME:
// padded positions never win); on ties the first maximum in row-major window
// order wins, as TensorFlow's and LibTorch's; unlike LibTorch's, a NaN among
// finite values does not win (a window of NaNs gives -inf in bfloat16,
// -FLT_MAX in float32). Private to src/nets; built with SLIMTORCH_WITH_DNNL,
// else DnnlPoolBuilt() is false. Primitives are made once per shape and
// thread.

#include <cstddef>
#include <cstdint>

namespace slimtorch {
namespace nets {
namespace internal {

struct DnnlPoolShape {
  int64_t n = 0, channels = 0, height = 0, width = 0;
  int64_t out_height = 0, out_width = 0;
  int64_t kernel = 0, stride = 0;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  bool bfloat16 = false;  // else float32
};

bool DnnlPoolBuilt();

// Whether oneDNN pools this shape (asked once per shape and thread).
bool DnnlMaxPoolApplies(const DnnlPoolShape& s);

// Bytes of the workspace a training forward keeps for the backward.
size_t DnnlMaxPoolWorkspaceBytes(const DnnlPoolShape& s);

// y = max pool(x), x and y dense channels-last; `workspace` null: inference
// (nothing kept).
void DnnlMaxPoolForward(const DnnlPoolShape& s, const void* x, void* y,
                        void* workspace);

// dx (dense channels-last, every element written) from g (dy, dense
// channels-last) and the forward's workspace.
void DnnlMaxPoolBackward(const DnnlPoolShape& s, const void* g,
                         const void* workspace, void* dx);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
