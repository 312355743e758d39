#pragma once
// The fused CUDA kernels of batch normalization with its activation, and of
// a residual sum with its ReLU (private to src/nets; compiled by nvcc only
// when LibTorch has CUDA and a CUDA compiler is found,
// SLIMTORCH_WITH_CUDA_KERNELS). No LibTorch here: raw device pointers, the
// caller's stream, float32 statistics whatever the element type.
//
// Batch norm works on channels-last tensors: `rows` = N * H * W rows of C
// dense values (an NCHW tensor with H = W = 1 is the same bytes). Training:
//   stats:    one pass over x for per-channel sums of x - x[row 0] (the
//             pivot keeps the variance from cancelling), a small kernel
//             that turns them into mean, invstd, scale = gamma * invstd,
//             shift = beta - mean * scale, and updates the moving averages;
//   apply:    y = act(x * scale + shift), one fused multiply-add rounded once;
//   backward: one pass for sum(g') and sum(g' * (x - mean)), where g' is g
//             where the activation let x * scale + shift through (decided
//             again from x with the forward pass's own expression, so y is
//             not kept), then dx = a * g' + b * (x - mean) + k.
// Every value is reduced in a fixed order: the same inputs give the same
// bits on the same GPU.
//
// x, g, y and dx must be 16-byte aligned (rows of C elements are read as
// 16-byte vectors when C is a multiple of 16 bytes' worth).
//
// Every function returns nullptr on success, else CUDA's error string for
// the first failed launch.

#include <cstdint>

#include "../batch_norm_layout.h"

namespace slimtorch {
namespace nets {
namespace internal {

enum class CudaElement { kFloat32, kBFloat16, kFloat16 };

struct BnCudaShape {
  CudaElement element = CudaElement::kFloat32;
  int64_t rows = 0;      // N * H * W
  int64_t channels = 0;  // C
  BnActivation act = BnActivation::kNone;
  int device = 0;          // the CUDA device the pointers live on
  void* stream = nullptr;  // cudaStream_t, on that device
};

// Floats of device workspace BnCudaTrainStats and BnCudaBackward need.
int64_t BnCudaWorkspaceFloats(const BnCudaShape& s);

// Training statistics of x: coef ([4, C] float32 on the device) receives
// mean, invstd = 1 / sqrt(var + epsilon), scale, shift; moving_mean and
// moving_variance ([C]) become m * decay + v * (1 - decay) with
// TensorFlow's Bessel-corrected batch variance. gamma / beta may be null
// (1 / 0).
const char* BnCudaTrainStats(const BnCudaShape& s, const void* x,
                             const float* gamma, const float* beta,
                             double decay, double epsilon, float* moving_mean,
                             float* moving_variance, float* workspace,
                             float* coef);

// coef ([4, C]) from the moving statistics (inference).
const char* BnCudaInferenceCoefficients(const BnCudaShape& s,
                                        const float* gamma, const float* beta,
                                        const float* moving_mean,
                                        const float* moving_variance,
                                        double epsilon, float* coef);

// y = act(x * scale + shift); y may be x.
const char* BnCudaApply(const BnCudaShape& s, const void* x, const float* coef,
                        void* y);

// dx, and dgamma / dbeta ([C] float32; either may be null) from g, x and the
// forward pass's coef. gamma may be null (1).
const char* BnCudaBackward(const BnCudaShape& s, const void* g, const void* x,
                           const float* gamma, const float* coef,
                           float* workspace, void* dx, float* dgamma,
                           float* dbeta);

// A layer's bias and activation, y = act(x + bias[c]), over the rows of C
// of a BnCudaShape (bias float32 [C]; y may be x).
const char* BiasActCuda(const BnCudaShape& s, const void* x, const float* bias,
                        void* y);
// Floats of device workspace BiasActBackwardCuda needs.
int64_t BiasGradWorkspaceFloats(const BnCudaShape& s);
// g' = g where the activation passed x + bias (into dx; with kNone g' is g
// and dx is neither needed nor written), and dbias[c] = sum over the rows
// of g'.
const char* BiasActBackwardCuda(const BnCudaShape& s, const void* g,
                                const void* x, const float* bias,
                                float* workspace, void* dx, float* dbias);

// out = max(a + b, 0) over n elements (a, b, out dense, one element type;
// out may be a or b). The sum is rounded once, as a + b then ReLU is.
const char* AddReluCuda(CudaElement element, int64_t n, const void* a,
                        const void* b, void* out, int device, void* stream);

// A dense 4-D tensor [n, c, h, w], NCHW or channels-last.
struct Cuda4d {
  int64_t n = 0, c = 0, h = 0, w = 0;
  bool channels_last = false;
};

// Max pooling over square windows of `kernel` with `stride`, the first
// window starting pad_top / pad_left pixels before the image and every
// window clipped to it (TensorFlow's SAME: padded positions never win); y and
// argmax ([n, c, out_h, out_w] in x's memory order; argmax the offset
// h * w_in + w of the first maximum in row-major window order, where the
// gradient goes; NaN wins and stays).
struct CudaPool {
  int kernel = 1, stride = 1, pad_top = 0, pad_left = 0;
  int64_t out_h = 0, out_w = 0;
};
const char* MaxPoolCuda(CudaElement element, const void* x, const Cuda4d& in,
                        const CudaPool& pool, void* y, int32_t* argmax,
                        int device, void* stream);
// dx (every element written) from g (the output's shape and memory order)
// and the argmax: each input sums the gradients of the windows it won, in
// a fixed order (no atomics).
const char* MaxPoolBackwardCuda(CudaElement element, const void* g,
                                const int32_t* argmax, const Cuda4d& in,
                                const CudaPool& pool, void* dx, int device,
                                void* stream);

// TensorFlow's local response normalization over the channels:
//   N_c = bias + alpha * sum_{|c' - c| <= radius} x_c'^2,  y_c = x_c N_c^-beta,
// in float32 whatever the element type; norm ([n, c, h, w] float32 in x's
// memory order) keeps N for the backward pass:
//   dx_c = g_c N_c^-beta
//          - 2 alpha beta x_c sum_{|c' - c| <= radius} g_c' x_c' N_c'^(-beta-1)
// (scratch: x's element count of float32).
struct CudaLrn {
  int radius = 5;
  float bias = 1.0f, alpha = 1.0f, beta = 0.5f;
};
const char* LrnForwardCuda(CudaElement element, const void* x,
                           const Cuda4d& shape, const CudaLrn& lrn, void* y,
                           float* norm, int device, void* stream);
const char* LrnBackwardCuda(CudaElement element, const void* x, const void* g,
                            const float* norm, const Cuda4d& shape,
                            const CudaLrn& lrn, float* scratch, void* dx,
                            int device, void* stream);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
