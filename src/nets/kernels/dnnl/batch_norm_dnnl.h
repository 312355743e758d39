#pragma once
// Batch normalization (+ ReLU) in training through oneDNN's own kernels —
// the library LibTorch's CPU build already links (Debian: libdnnl.so.2,
// headers from libdnnl-dev) — for dense float32 or bfloat16 (l.bfloat16)
// [N, C, H, W] in NCHW or channels-last order; the per-channel values
// (gamma, beta, statistics, their gradients) are float32 either way. Private to
// src/nets; built when oneDNN's headers are found (SLIMTORCH_WITH_DNNL); else
// DnnlBatchNormBuilt() is false and the caller keeps its own kernels.
// Primitives are made once per shape and thread and kept.

#include <cstddef>
#include <cstdint>

#include "../batch_norm_layout.h"

namespace slimtorch {
namespace nets {
namespace internal {

bool DnnlBatchNormBuilt();

// Bytes of the workspace (the ReLU's mask) the forward pass leaves for the
// backward pass; 0 without the ReLU.
size_t DnnlBnWorkspaceBytes(const BnLayout& l, bool relu, float epsilon);

// y = relu?(gamma * (x - mean) / sqrt(var + epsilon) + beta) with the
// batch's mean and biased variance (written to mean / variance, [C]);
// gamma / beta may be null (1 / 0). Throws (naming the shape) if oneDNN
// refuses it; call only where DnnlBatchNormBuilt().
void DnnlBnForwardTraining(const void* x, const BnLayout& l, const float* gamma,
                           const float* beta, float epsilon, bool relu, void* y,
                           float* mean, float* variance, void* workspace);

// dx and, where not null, dgamma / dbeta ([C]) from g (dense in x's order),
// x, gamma (may be null: 1) and the forward pass's mean, variance and
// workspace.
void DnnlBnBackward(const void* x, const void* g, const BnLayout& l,
                    const float* gamma, const float* mean,
                    const float* variance, const void* workspace, float epsilon,
                    bool relu, void* dx, float* dgamma, float* dbeta);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
