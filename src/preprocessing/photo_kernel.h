#pragma once
// The per-pixel stages of the fused photo preprocessing (private to
// src/preprocessing), on planar float rows: branch-free loops, compiled on
// their own without the LibTorch header so that they vectorize. Each does the
// same float operations, in the same order, as the tensor ops of
// inception_preprocessing / image_ops (tests compare them bit for bit).

#include <cstdint>

namespace slimtorch {
namespace internal {

// Inception training, after the resize: + delta, adjust_saturation(factor)
// (TF's HSV formulas; `rgb` has 3 planes), clip to [0, 1], then
// (x - 0.5) * 2. planes[c] points at n values of channel c, updated in place.
void InceptionDistortPixels(float* const* planes, int channels, int64_t n,
                            float delta, float factor);

// (x - 0.5) * 2 in place (inception evaluation).
void SignedUnitPixels(float* values, int64_t n);

}  // namespace internal
}  // namespace slimtorch
