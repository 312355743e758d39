#pragma once
// The counter-based CIFAR augmentation's draws and crop as one CUDA kernel
// (ApplyCifarDistortionCounter on a GPU), in place of ~60 small LibTorch
// kernels (the hashes, the gather index, the pad and crop): for image i at
// position p,
//   crop_y = UniformInt(Hash(p, key0), max_y), crop_x likewise from key1,
//   flip = Hash(p, key2) & 1,
//   out[i][ch][y][x] = image i's pixel (crop_y + y - padding,
//                      crop_x + (flip ? out_w - 1 - x : x) - padding, ch)
//                      as float, 0 outside the image,
//   delta[i] = Uniform(Hash(p, key3), brightness range),
//   factor[i] = Uniform(Hash(p, key4), contrast range),
// the same bits as the tensor ops (counter_hash.h). The body is a
// host-device function of one output element, so the CPU tests run it as
// the GPU does (tests/preprocessing/cifarnet_preprocessing_test.cc). No
// LibTorch here.

#include <cstdint>

#include "counter_hash.h"

namespace slimtorch {
namespace preprocessing_internal {

struct CifarCounterCrop {
  const uint8_t* images = nullptr;     // [n, height, width, channels], dense
  const int64_t* positions = nullptr;  // [n]
  float* out = nullptr;                // [n, channels, out_h, out_w], dense
  float* delta = nullptr;              // [n]
  float* factor = nullptr;             // [n]
  int64_t n = 0, height = 0, width = 0, channels = 0, padding = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t max_y = 0, max_x = 0;  // the largest crop offsets (>= 0)
  uint64_t keys[5] = {};         // counter_hash::Key(seed, 0..4)
  // Uniform's lo, span and below_hi for the brightness delta and the
  // contrast factor.
  float delta_lo = 0, delta_span = 0, delta_below_hi = 0;
  float factor_lo = 0, factor_span = 0, factor_below_hi = 0;

  SLIMTORCH_HOST_DEVICE int64_t elements() const {
    return n * channels * out_h * out_w;
  }
};

// The keys and ranges of `p` for `seed` and the ranges [lo, hi).
inline void SetCifarCounterDraws(uint64_t seed, float delta_lo, float delta_hi,
                                 float factor_lo, float factor_hi,
                                 float delta_below_hi, float factor_below_hi,
                                 CifarCounterCrop* p) {
  for (int k = 0; k < 5; ++k) p->keys[k] = counter_hash::Key(seed, k);
  p->delta_lo = delta_lo;
  p->delta_span = delta_hi - delta_lo;
  p->delta_below_hi = delta_below_hi;
  p->factor_lo = factor_lo;
  p->factor_span = factor_hi - factor_lo;
  p->factor_below_hi = factor_below_hi;
}

// Output element e (of p.elements(), NCHW order); the first element of an
// image also writes its delta and factor.
SLIMTORCH_HOST_DEVICE inline void CifarCounterCropElement(
    const CifarCounterCrop& p, int64_t e) {
  const int64_t plane = p.out_h * p.out_w;
  const int64_t per_image = p.channels * plane;
  const int64_t i = e / per_image;
  const int64_t r = e - i * per_image;
  const int64_t ch = r / plane;
  const int64_t yx = r - ch * plane;
  const int64_t y = yx / p.out_w;
  const int64_t x = yx - y * p.out_w;
  const int64_t position = p.positions[i];
  const int64_t crop_y = counter_hash::UniformInt(
      counter_hash::Hash(position, p.keys[0]), p.max_y);
  const int64_t crop_x = counter_hash::UniformInt(
      counter_hash::Hash(position, p.keys[1]), p.max_x);
  const bool flip = (counter_hash::Hash(position, p.keys[2]) & 1) != 0;
  const int64_t iy = crop_y + y - p.padding;
  const int64_t ix = crop_x + (flip ? p.out_w - 1 - x : x) - p.padding;
  const bool inside = iy >= 0 && iy < p.height && ix >= 0 && ix < p.width;
  p.out[e] =
      inside ? static_cast<float>(
                   p.images[((i * p.height + iy) * p.width + ix) * p.channels +
                            ch])
             : 0.0f;
  if (r == 0) {
    p.delta[i] =
        counter_hash::Uniform(counter_hash::Hash(position, p.keys[3]),
                              p.delta_lo, p.delta_span, p.delta_below_hi);
    p.factor[i] =
        counter_hash::Uniform(counter_hash::Hash(position, p.keys[4]),
                              p.factor_lo, p.factor_span, p.factor_below_hi);
  }
}

// Launches CifarCounterCropElement over every element on `stream` (a
// cudaStream_t of the pointers' device). nullptr on success, else CUDA's
// error string. Defined only where the CUDA kernels are built.
const char* CifarCounterCropCuda(const CifarCounterCrop& p, void* stream);

}  // namespace preprocessing_internal
}  // namespace slimtorch
