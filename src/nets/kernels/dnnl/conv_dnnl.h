#pragma once
// 3 x 3, stride-1 convolutions of float32 CPU tensors through oneDNN's
// Winograd kernels (F(4x4, 3x3), `jit_wino_4x3`: about 2-3x fewer
// multiplications than the direct kernels LibTorch's and TensorFlow's
// convolutions run) — forward, backward data and backward weights — in the
// library LibTorch's CPU build already links (Debian: libdnnl.so.2, headers
// from libdnnl-dev). The kernels take oneDNN's blocked layouts (nChw16c),
// so every call reorders its tensors from and to the caller's NCHW or
// channels-last order through per-thread scratch buffers. Private to
// src/nets; built with SLIMTORCH_WITH_DNNL, else DnnlWinogradBuilt() is
// false. Primitives are made once per shape and thread and kept.

#include <cstdint>

namespace slimtorch {
namespace nets {
namespace internal {

struct WinogradShape {
  int64_t n = 0, in_channels = 0, out_channels = 0;
  int64_t height = 0, width = 0;       // the input's
  int64_t pad_h = 0, pad_w = 0;        // on each side: 0 or 1
  bool channels_last = false;          // x, y and their gradients
  bool weights_channels_last = false;  // w [O, I, 3, 3] stored as O, 3, 3, I
  bool bias = false;
  int64_t out_height() const { return height + 2 * pad_h - 2; }
  int64_t out_width() const { return width + 2 * pad_w - 2; }
};

bool DnnlWinogradBuilt();

// Whether oneDNN has Winograd kernels for this shape on this CPU (it needs
// AVX-512 and channel counts it can block); asked once per shape and thread.
bool DnnlWinogradApplies(const WinogradShape& s);

// y = conv(x, w) (+ b), every pointer dense in the shape's orders.
void DnnlWinogradForward(const WinogradShape& s, const float* x, const float* w,
                         const float* b, float* y);

// dx, dw and db (where not null) from g (dy, in y's order), x and w.
void DnnlWinogradBackward(const WinogradShape& s, const float* x,
                          const float* w, const float* g, float* dx, float* dw,
                          float* db);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
