// The fused CUDA kernels of cuda_kernels.h.
//
// Layout of the batch norm kernels: a block of 256 threads is bx threads
// across the channels (each owning V adjacent channels, V = 16 bytes of
// elements when C allows, else 1) by `by` threads down the rows; gy blocks
// cover the channels, gx blocks the rows, each thread striding down the rows
// with its channels fixed (their coefficients stay in registers). A warp
// reads whole 16-byte vectors of adjacent rows: coalesced for every C.
// Reductions: per thread in float over its rows, per block in shared memory
// (a fixed tree), per channel over the gx blocks' partials in double.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cuda_kernels.h"

namespace slimtorch {
namespace nets {
namespace internal {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float ToFloat(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half FromFloat(float v) {
  return __float2half_rn(v);
}

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The forward pass's value before the activation; the backward pass
// decides the activation's mask from the same expression.
__device__ __forceinline__ float PreActivation(float x, float scale,
                                               float shift) {
  return __fmaf_rn(x, scale, shift);
}

// NaN passes through (a non-finite check downstream must see it).
template <BnActivation A>
__device__ __forceinline__ float Activate(float v) {
  if (A != BnActivation::kNone) v = v < 0.0f ? 0.0f : v;
  if (A == BnActivation::kRelu6) v = v > 6.0f ? 6.0f : v;
  return v;
}

// Whether the activation's gradient at v is 1 (else 0): ReLU's and ReLU6's
// as LibTorch's threshold / hardtanh backward give them.
template <BnActivation A>
__device__ __forceinline__ bool Passes(float v) {
  if (A == BnActivation::kRelu) return v > 0.0f;
  if (A == BnActivation::kRelu6) return v > 0.0f && v < 6.0f;
  return true;
}

struct Plan {
  int v = 1;   // channels per thread
  int bx = 1;  // threads across the channels
  int by = 1;  // threads down the rows
  int gx = 1;  // blocks down the rows
  int gy = 1;  // blocks across the channels
};

int ElementBytes(CudaElement e) { return e == CudaElement::kFloat32 ? 4 : 2; }

// Streaming multiprocessors of `device`, asked once.
int MultiProcessors(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return 132;
  int n = cached[device].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) !=
            cudaSuccess ||
        n <= 0) {
      (void)cudaGetLastError();
      n = 132;
    }
    cached[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

Plan MakePlan(const BnCudaShape& s) {
  Plan p;
  const int64_t C = s.channels;
  const int wide = 16 / ElementBytes(s.element);
  p.v = C % wide == 0 ? wide : 1;
  const int64_t vectors = C / p.v;
  p.bx = 1;
  while (p.bx < 32 && p.bx < vectors) p.bx *= 2;
  p.by = kThreads / p.bx;
  p.gy = static_cast<int>((vectors + p.bx - 1) / p.bx);
  const int64_t target = int64_t{8} * MultiProcessors(s.device);
  const int64_t row_blocks = (s.rows + p.by - 1) / p.by;
  p.gx = static_cast<int>(
      std::max<int64_t>(1, std::min(target / p.gy, row_blocks)));
  return p;
}

// ---------------------------------------------------------------- kernels

// Per block: float partial sums over its rows of
//   stats:    d = x - pivot and d * d (pivot: x's row 0);
//   backward: g' and g' * (x - mean);
// written to partial[blockIdx.x * C + c] and partial[(gx + blockIdx.x) * C
// + c].
template <typename T, int V, BnActivation A, bool kBackward>
__global__ void __launch_bounds__(kThreads)
    ReduceKernel(const T* __restrict__ x, const T* __restrict__ g, int64_t rows,
                 int C, const float* __restrict__ coef,
                 float* __restrict__ partial) {
  extern __shared__ float shared[];
  const int width = blockDim.x * V;
  const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * V;
  const bool active = c0 < C;
  float s1[V], s2[V], p[V], sc[V], sh[V];
#pragma unroll
  for (int k = 0; k < V; ++k) s1[k] = s2[k] = p[k] = sc[k] = sh[k] = 0.0f;
  if (active) {
    if (kBackward) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        p[k] = coef[c0 + k];  // mean
        sc[k] = coef[2 * C + c0 + k];
        sh[k] = coef[3 * C + c0 + k];
      }
    } else {
      const Pack<T, V> pv = *reinterpret_cast<const Pack<T, V>*>(x + c0);
#pragma unroll
      for (int k = 0; k < V; ++k) p[k] = ToFloat(pv.v[k]);
    }
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
#pragma unroll 4
    for (int64_t r =
             static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
         r < rows; r += step) {
      const Pack<T, V> xv =
          *reinterpret_cast<const Pack<T, V>*>(x + r * C + c0);
      if (kBackward) {
        const Pack<T, V> gv =
            *reinterpret_cast<const Pack<T, V>*>(g + r * C + c0);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float xf = ToFloat(xv.v[k]);
          const float gf = Passes<A>(PreActivation(xf, sc[k], sh[k]))
                               ? ToFloat(gv.v[k])
                               : 0.0f;
          s1[k] += gf;
          s2[k] = __fmaf_rn(gf, xf - p[k], s2[k]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = ToFloat(xv.v[k]) - p[k];
          s1[k] += d;
          s2[k] = __fmaf_rn(d, d, s2[k]);
        }
      }
    }
  }
  float* a1 = shared;
  float* a2 = shared + blockDim.y * width;
  const int at = threadIdx.y * width + threadIdx.x * V;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    a1[at + k] = s1[k];
    a2[at + k] = s2[k];
  }
  __syncthreads();
  for (int h = blockDim.y / 2; h > 0; h /= 2) {
    if (threadIdx.y < h) {
      const int from = at + h * width;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        a1[at + k] += a1[from + k];
        a2[at + k] += a2[from + k];
      }
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && active) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      partial[static_cast<int64_t>(blockIdx.x) * C + c0 + k] = a1[at + k];
      partial[static_cast<int64_t>(gridDim.x + blockIdx.x) * C + c0 + k] =
          a2[at + k];
    }
  }
}

// Blocks of 32 channels by 8 lanes: each lane sums every 8th block's
// partials in double, then the 8 lanes are summed in a fixed order.
constexpr int kFinalX = 32;
constexpr int kFinalY = 8;

__device__ __forceinline__ bool SumPartials(const float* __restrict__ partial,
                                            int gx, int C, double* s1,
                                            double* s2) {
  __shared__ double t1[kFinalY][kFinalX];
  __shared__ double t2[kFinalY][kFinalX];
  const int c = blockIdx.x * kFinalX + threadIdx.x;
  double a = 0.0, b = 0.0;
  if (c < C) {
    for (int i = threadIdx.y; i < gx; i += kFinalY) {
      a += partial[static_cast<int64_t>(i) * C + c];
      b += partial[static_cast<int64_t>(gx + i) * C + c];
    }
  }
  t1[threadIdx.y][threadIdx.x] = a;
  t2[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return false;
  a = b = 0.0;
  for (int i = 0; i < kFinalY; ++i) {
    a += t1[i][threadIdx.x];
    b += t2[i][threadIdx.x];
  }
  *s1 = a;
  *s2 = b;
  return true;
}

__device__ __forceinline__ void WriteCoefficients(int C, int c, double mean,
                                                  double invstd,
                                                  const float* gamma,
                                                  const float* beta,
                                                  float* coef) {
  const double sc = gamma != nullptr ? invstd * gamma[c] : invstd;
  coef[c] = static_cast<float>(mean);
  coef[C + c] = static_cast<float>(invstd);
  coef[2 * C + c] = static_cast<float>(sc);
  coef[3 * C + c] =
      static_cast<float>((beta != nullptr ? beta[c] : 0.0) - mean * sc);
}

template <typename T>
__global__ void __launch_bounds__(kFinalX* kFinalY)
    StatsFinalKernel(const T* __restrict__ x, int64_t rows, int C, int gx,
                     const float* __restrict__ partial,
                     const float* __restrict__ gamma,
                     const float* __restrict__ beta, double decay,
                     double epsilon, float* moving_mean, float* moving_variance,
                     float* coef) {
  double s1, s2;
  if (!SumPartials(partial, gx, C, &s1, &s2)) return;
  const int c = blockIdx.x * kFinalX + threadIdx.x;
  const double n = static_cast<double>(rows);
  const double d = s1 / n;
  double var = s2 / n - d * d;
  if (var < 0.0) var = 0.0;  // (NaN stays NaN)
  const double mean = static_cast<double>(ToFloat(x[c])) + d;
  const double bessel = rows > 1 ? n / (n - 1.0) : 1.0;
  moving_mean[c] = static_cast<float>(
      moving_mean[c] * decay +
      static_cast<double>(static_cast<float>(mean)) * (1.0 - decay));
  moving_variance[c] = static_cast<float>(
      moving_variance[c] * decay +
      static_cast<double>(static_cast<float>(var * bessel)) * (1.0 - decay));
  WriteCoefficients(C, c, mean, 1.0 / sqrt(var + epsilon), gamma, beta, coef);
}

__global__ void InferenceCoefficientsKernel(int C, const float* gamma,
                                            const float* beta,
                                            const float* moving_mean,
                                            const float* moving_variance,
                                            double epsilon, float* coef) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  WriteCoefficients(
      C, c, moving_mean[c],
      1.0 / sqrt(static_cast<double>(moving_variance[c]) + epsilon), gamma,
      beta, coef);
}

// abk ([3, C]): dx = a * g' + b * (x - mean) + k.
__global__ void __launch_bounds__(kFinalX* kFinalY)
    BackwardFinalKernel(int64_t rows, int C, int gx,
                        const float* __restrict__ partial,
                        const float* __restrict__ gamma,
                        const float* __restrict__ coef, float* abk,
                        float* dgamma, float* dbeta) {
  double sum_g, sum_gx;
  if (!SumPartials(partial, gx, C, &sum_g, &sum_gx)) return;
  const int c = blockIdx.x * kFinalX + threadIdx.x;
  const double n = static_cast<double>(rows);
  const double invstd = coef[C + c];
  const double a = gamma != nullptr ? gamma[c] * invstd : invstd;
  abk[c] = static_cast<float>(a);
  abk[C + c] = static_cast<float>(-a * invstd * invstd * sum_gx / n);
  abk[2 * C + c] = static_cast<float>(-a * sum_g / n);
  if (dgamma != nullptr) dgamma[c] = static_cast<float>(sum_gx * invstd);
  if (dbeta != nullptr) dbeta[c] = static_cast<float>(sum_g);
}

template <typename T, int V, BnActivation A>
__global__ void __launch_bounds__(kThreads)
    ApplyKernel(const T* x, int64_t rows, int C, const float* __restrict__ coef,
                T* y) {
  const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * V;
  if (c0 >= C) return;
  float sc[V], sh[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sc[k] = coef[2 * C + c0 + k];
    sh[k] = coef[3 * C + c0 + k];
  }
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
#pragma unroll 4
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
       r < rows; r += step) {
    const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(x + r * C + c0);
    Pack<T, V> yv;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      yv.v[k] = FromFloat<T>(
          Activate<A>(PreActivation(ToFloat(xv.v[k]), sc[k], sh[k])));
    }
    *reinterpret_cast<Pack<T, V>*>(y + r * C + c0) = yv;
  }
}

template <typename T, int V, BnActivation A>
__global__ void __launch_bounds__(kThreads)
    BackwardApplyKernel(const T* __restrict__ g, const T* __restrict__ x,
                        int64_t rows, int C, const float* __restrict__ coef,
                        const float* __restrict__ abk, T* __restrict__ dx) {
  const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * V;
  if (c0 >= C) return;
  float m[V], sc[V], sh[V], a[V], b[V], k3[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    m[k] = coef[c0 + k];
    sc[k] = coef[2 * C + c0 + k];
    sh[k] = coef[3 * C + c0 + k];
    a[k] = abk[c0 + k];
    b[k] = abk[C + c0 + k];
    k3[k] = abk[2 * C + c0 + k];
  }
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
#pragma unroll 4
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
       r < rows; r += step) {
    const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(x + r * C + c0);
    const Pack<T, V> gv = *reinterpret_cast<const Pack<T, V>*>(g + r * C + c0);
    Pack<T, V> dv;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float xf = ToFloat(xv.v[k]);
      const float gf =
          Passes<A>(PreActivation(xf, sc[k], sh[k])) ? ToFloat(gv.v[k]) : 0.0f;
      dv.v[k] = FromFloat<T>(a[k] * gf + b[k] * (xf - m[k]) + k3[k]);
    }
    *reinterpret_cast<Pack<T, V>*>(dx + r * C + c0) = dv;
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    AddReluKernel(const T* a, const T* b, int64_t n, T* out) {
  const int64_t vectors = n / V;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < vectors; i += step) {
    const Pack<T, V> av = reinterpret_cast<const Pack<T, V>*>(a)[i];
    const Pack<T, V> bv = reinterpret_cast<const Pack<T, V>*>(b)[i];
    Pack<T, V> ov;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      // Rounding keeps the sign: ReLU of the rounded sum is the rounded
      // ReLU of the exact one.
      ov.v[k] = FromFloat<T>(
          Activate<BnActivation::kRelu>(ToFloat(av.v[k]) + ToFloat(bv.v[k])));
    }
    reinterpret_cast<Pack<T, V>*>(out)[i] = ov;
  }
}

// ------------------------------------------------------ bias + activation

template <typename T, int V, BnActivation A>
__global__ void __launch_bounds__(kThreads)
    BiasActKernel(const T* __restrict__ x, int64_t rows, int C,
                  const float* __restrict__ bias, T* __restrict__ y) {
  const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * V;
  if (c0 >= C) return;
  float b[V];
#pragma unroll
  for (int k = 0; k < V; ++k) b[k] = bias[c0 + k];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
#pragma unroll 4
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
       r < rows; r += step) {
    const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(x + r * C + c0);
    Pack<T, V> yv;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      yv.v[k] = FromFloat<T>(Activate<A>(ToFloat(xv.v[k]) + b[k]));
    }
    *reinterpret_cast<Pack<T, V>*>(y + r * C + c0) = yv;
  }
}

// g' = g where the activation passed x + bias (dx, when not null) and its
// per-block column sums (partial[blockIdx.x * C + c]).
template <typename T, int V, BnActivation A>
__global__ void __launch_bounds__(kThreads)
    BiasActGradKernel(const T* __restrict__ g, const T* __restrict__ x,
                      int64_t rows, int C, const float* __restrict__ bias,
                      float* __restrict__ partial, T* __restrict__ dx) {
  extern __shared__ float shared[];
  const int width = blockDim.x * V;
  const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * V;
  const bool active = c0 < C;
  float s[V], b[V];
#pragma unroll
  for (int k = 0; k < V; ++k) s[k] = b[k] = 0.0f;
  if (active) {
#pragma unroll
    for (int k = 0; k < V; ++k) b[k] = bias[c0 + k];
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
#pragma unroll 4
    for (int64_t r =
             static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
         r < rows; r += step) {
      const Pack<T, V> gv =
          *reinterpret_cast<const Pack<T, V>*>(g + r * C + c0);
      if (A == BnActivation::kNone) {
#pragma unroll
        for (int k = 0; k < V; ++k) s[k] += ToFloat(gv.v[k]);
      } else {
        const Pack<T, V> xv =
            *reinterpret_cast<const Pack<T, V>*>(x + r * C + c0);
        Pack<T, V> dv;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const bool pass = Passes<A>(ToFloat(xv.v[k]) + b[k]);
          dv.v[k] = pass ? gv.v[k] : FromFloat<T>(0.0f);
          s[k] += pass ? ToFloat(gv.v[k]) : 0.0f;
        }
        *reinterpret_cast<Pack<T, V>*>(dx + r * C + c0) = dv;
      }
    }
  }
  const int at = threadIdx.y * width + threadIdx.x * V;
#pragma unroll
  for (int k = 0; k < V; ++k) shared[at + k] = s[k];
  __syncthreads();
  for (int h = blockDim.y / 2; h > 0; h /= 2) {
    if (threadIdx.y < h) {
#pragma unroll
      for (int k = 0; k < V; ++k) shared[at + k] += shared[at + h * width + k];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && active) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      partial[static_cast<int64_t>(blockIdx.x) * C + c0 + k] = shared[at + k];
    }
  }
}

// dbias[c]: the gx blocks' partials summed in double in a fixed order.
__global__ void __launch_bounds__(kFinalX* kFinalY)
    BiasFinalKernel(int C, int gx, const float* __restrict__ partial,
                    float* __restrict__ dbias) {
  __shared__ double t[kFinalY][kFinalX];
  const int c = blockIdx.x * kFinalX + threadIdx.x;
  double a = 0.0;
  if (c < C) {
    for (int i = threadIdx.y; i < gx; i += kFinalY) {
      a += partial[static_cast<int64_t>(i) * C + c];
    }
  }
  t[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  a = 0.0;
  for (int i = 0; i < kFinalY; ++i) a += t[i][threadIdx.x];
  dbias[c] = static_cast<float>(a);
}

// ---------------------------------------------------- pooling and LRN

// Division by a divisor fixed at launch: for 32-bit indices (below 2^31) a
// multiply-high, an add and a shift (the magic-number method), else plain
// division. The pooling and LRN kernels are bound by their index
// arithmetic, not by memory, with hardware division.
template <typename I>
struct Divider {
  explicit Divider(I divisor) : d(divisor) {}
  __device__ __forceinline__ I Div(I n) const { return n / d; }
  I d;
};

template <>
struct Divider<uint32_t> {
  explicit Divider(uint32_t divisor) : d(divisor) {
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(
        ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t Div(uint32_t n) const {
    return (__umulhi(n, magic) + n) >> shift;
  }
  uint32_t d;
  uint32_t magic = 0;
  uint32_t shift = 0;
};

// The divisors of a dense [N, C, H, W] tensor's element index.
template <typename I>
struct Dims4d {
  Dims4d(int64_t c, int64_t h, int64_t w)
      : C(static_cast<I>(c)), H(static_cast<I>(h)), W(static_cast<I>(w)) {}
  Divider<I> C, H, W;
};

// Element i of a dense 4-D tensor (either memory order) as (n, c, h, w).
template <typename I>
struct Index4d {
  I c, h, w, n;
};

template <typename I>
__device__ __forceinline__ Index4d<I> Split(I i, const Dims4d<I>& d, bool cl) {
  Index4d<I> r;
  I q;
  if (cl) {
    q = d.C.Div(i);
    r.c = i - q * d.C.d;
    i = q;
    q = d.W.Div(i);
    r.w = i - q * d.W.d;
    i = q;
    r.n = d.H.Div(i);
    r.h = i - r.n * d.H.d;
  } else {
    q = d.W.Div(i);
    r.w = i - q * d.W.d;
    i = q;
    q = d.H.Div(i);
    r.h = i - q * d.H.d;
    i = q;
    r.n = d.C.Div(i);
    r.c = i - r.n * d.C.d;
  }
  return r;
}

// Offset of (n, c, h, w) in a dense tensor of C x H x W planes.
template <typename I>
__device__ __forceinline__ I Offset(I n, I c, I h, I w, I C, I H, I W,
                                    bool cl) {
  return cl ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    MaxPoolKernel(const T* __restrict__ x, I H, I W, bool cl, int kernel,
                  int stride, int pad_top, int pad_left, Dims4d<I> out, I total,
                  T* __restrict__ y, int32_t* __restrict__ argmax) {
  const I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) return;
  const I C = out.C.d;
  const Index4d<I> o = Split<I>(i, out, cl);
  const int h0 = static_cast<int>(o.h) * stride - pad_top;
  const int w0 = static_cast<int>(o.w) * stride - pad_left;
  const int hb = max(h0, 0), he = min(h0 + kernel, static_cast<int>(H));
  const int wb = max(w0, 0), we = min(w0 + kernel, static_cast<int>(W));
  const I plane = cl ? o.n * H * W * C + o.c : (o.n * C + o.c) * H * W;
  const I step = cl ? C : 1;  // from one pixel to the next in a row
  float best = ToFloat(x[plane + (static_cast<I>(hb) * W + wb) * step]);
  int32_t at = hb * static_cast<int>(W) + wb;
  for (int h = hb; h < he; ++h) {
    for (int w = wb; w < we; ++w) {
      const float v = ToFloat(x[plane + (static_cast<I>(h) * W + w) * step]);
      // Strictly greater keeps the first maximum; a NaN wins and stays.
      if (v > best || (v != v && best == best)) {
        best = v;
        at = h * static_cast<int>(W) + w;
      }
    }
  }
  y[i] = FromFloat<T>(best);
  argmax[i] = at;
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    MaxPoolBackwardKernel(const T* __restrict__ g,
                          const int32_t* __restrict__ argmax, Dims4d<I> in,
                          bool cl, int kernel, Divider<uint32_t> stride,
                          int pad_top, int pad_left, I OH, I OW, I total,
                          T* __restrict__ dx) {
  const I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) return;
  const Index4d<I> p = Split<I>(i, in, cl);
  const I C = in.C.d;
  const int h = static_cast<int>(p.h), w = static_cast<int>(p.w);
  const int32_t self = h * static_cast<int>(in.W.d) + w;
  // The windows oh with oh * stride - pad_top <= h < oh * stride - pad_top
  // + kernel: from ceil((h + pad_top - kernel + 1) / stride) (at least 0) to
  // floor((h + pad_top) / stride); likewise the columns.
  const int s = static_cast<int>(stride.d);
  auto first = [&](int v) {
    const int t = v - kernel + s;
    return t <= 0 ? 0 : static_cast<int>(stride.Div(static_cast<uint32_t>(t)));
  };
  auto last = [&](int v, I count) {
    return min(static_cast<int>(count) - 1,
               static_cast<int>(stride.Div(static_cast<uint32_t>(v))));
  };
  const int oh_lo = first(h + pad_top), oh_hi = last(h + pad_top, OH);
  const int ow_lo = first(w + pad_left), ow_hi = last(w + pad_left, OW);
  float sum = 0.0f;
  for (int oh = oh_lo; oh <= oh_hi; ++oh) {
    for (int ow = ow_lo; ow <= ow_hi; ++ow) {
      const I o = Offset<I>(p.n, p.c, oh, ow, C, OH, OW, cl);
      if (argmax[o] == self) sum += ToFloat(g[o]);
    }
  }
  dx[i] = FromFloat<T>(sum);
}

// n^-beta for n >= bias > 0, within a few float ulps (log2 and exp2 cost
// less than pow's general case).
__device__ __forceinline__ float NegativePower(float n, float beta) {
  return exp2f(-beta * log2f(n));
}

// The channel of element i of a dense tensor of C channels of HW pixels.
template <typename I>
__device__ __forceinline__ I Channel(I i, const Divider<I>& C,
                                     const Divider<I>& HW, bool cl) {
  if (cl) return i - C.Div(i) * C.d;
  const I plane = HW.Div(i);
  return plane - C.Div(plane) * C.d;
}

// x^2 summed over the channel window of element i (channel c, channels
// `cs` elements apart).
template <typename T, typename I>
__device__ __forceinline__ float WindowSquares(const T* __restrict__ x, I i,
                                               I c, I C, I cs, int radius) {
  const I lo = c > radius ? c - radius : 0;
  const I hi = c + radius < C - 1 ? c + radius : C - 1;
  float sum = 0.0f;
  for (I k = lo; k <= hi; ++k) {
    const float v = ToFloat(x[i + (k - c) * cs]);
    sum = __fmaf_rn(v, v, sum);
  }
  return sum;
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    LrnForwardKernel(const T* __restrict__ x, Divider<I> C, Divider<I> HW,
                     bool cl, CudaLrn lrn, I total, T* __restrict__ y,
                     float* __restrict__ norm) {
  const I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) return;
  const I c = Channel(i, C, HW, cl);
  const I cs = cl ? 1 : HW.d;
  const float n =
      lrn.bias + lrn.alpha * WindowSquares<T, I>(x, i, c, C.d, cs, lrn.radius);
  norm[i] = n;
  y[i] = FromFloat<T>(ToFloat(x[i]) * NegativePower(n, lrn.beta));
}

// t = g * x * N^(-beta-1), the backward pass's windowed term.
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    LrnBackwardTermKernel(const T* __restrict__ x, const T* __restrict__ g,
                          const float* __restrict__ norm, CudaLrn lrn, I total,
                          float* __restrict__ t) {
  const I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) return;
  t[i] =
      ToFloat(g[i]) * ToFloat(x[i]) * NegativePower(norm[i], lrn.beta + 1.0f);
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    LrnBackwardKernel(const T* __restrict__ x, const T* __restrict__ g,
                      const float* __restrict__ norm,
                      const float* __restrict__ t, Divider<I> C, Divider<I> HW,
                      bool cl, CudaLrn lrn, I total, T* __restrict__ dx) {
  const I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) return;
  const I c = Channel(i, C, HW, cl);
  const I cs = cl ? 1 : HW.d;
  const I lo = c > lrn.radius ? c - lrn.radius : 0;
  const I hi = c + lrn.radius < C.d - 1 ? c + lrn.radius : C.d - 1;
  float sum = 0.0f;
  for (I k = lo; k <= hi; ++k) sum += t[i + (k - c) * cs];
  dx[i] = FromFloat<T>(ToFloat(g[i]) * NegativePower(norm[i], lrn.beta) -
                       2.0f * lrn.alpha * lrn.beta * ToFloat(x[i]) * sum);
}

// ------------------------------------------------------------- dispatch

const char* LastError() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

cudaStream_t StreamOf(const BnCudaShape& s) {
  return static_cast<cudaStream_t>(s.stream);
}

// f.template operator()<T>() for the element type.
template <typename F>
void ForElement(CudaElement e, F&& f) {
  switch (e) {
    case CudaElement::kFloat32:
      f(float());
      break;
    case CudaElement::kBFloat16:
      f(__nv_bfloat16());
      break;
    case CudaElement::kFloat16:
      f(__half());
      break;
  }
}

template <typename F>
void ForActivation(BnActivation a, F&& f) {
  switch (a) {
    case BnActivation::kNone:
      f(std::integral_constant<BnActivation, BnActivation::kNone>());
      break;
    case BnActivation::kRelu:
      f(std::integral_constant<BnActivation, BnActivation::kRelu>());
      break;
    case BnActivation::kRelu6:
      f(std::integral_constant<BnActivation, BnActivation::kRelu6>());
      break;
  }
}

// f(T, V, A) with V the plan's width (16 bytes of T, or 1).
template <typename F>
void Dispatch(const BnCudaShape& s, const Plan& p, F&& f) {
  ForElement(s.element, [&](auto t) {
    using T = decltype(t);
    constexpr int kWide = 16 / sizeof(T);
    ForActivation(s.act, [&](auto a) {
      if (p.v == kWide) {
        f(t, std::integral_constant<int, kWide>(), a);
      } else {
        f(t, std::integral_constant<int, 1>(), a);
      }
    });
  });
}

template <bool kBackward>
void LaunchReduce(const BnCudaShape& s, const Plan& p, const void* x,
                  const void* g, const float* coef, float* partial) {
  const dim3 grid(p.gx, p.gy), block(p.bx, p.by);
  Dispatch(s, p, [&](auto t, auto v, auto a) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    const size_t shared = size_t{2} * kThreads * V * sizeof(float);
    // (the statistics do not depend on the activation)
    constexpr BnActivation A =
        kBackward ? decltype(a)::value : BnActivation::kNone;
    ReduceKernel<T, V, A, kBackward><<<grid, block, shared, StreamOf(s)>>>(
        static_cast<const T*>(x), static_cast<const T*>(g), s.rows,
        static_cast<int>(s.channels), coef, partial);
  });
}

int FinalBlocks(int64_t C) {
  return static_cast<int>((C + kFinalX - 1) / kFinalX);
}

}  // namespace

int64_t BnCudaWorkspaceFloats(const BnCudaShape& s) {
  const Plan p = MakePlan(s);
  return (2 * static_cast<int64_t>(p.gx) + 3) * s.channels;
}

const char* BnCudaTrainStats(const BnCudaShape& s, const void* x,
                             const float* gamma, const float* beta,
                             double decay, double epsilon, float* moving_mean,
                             float* moving_variance, float* workspace,
                             float* coef) {
  const Plan p = MakePlan(s);
  LaunchReduce<false>(s, p, x, nullptr, nullptr, workspace);
  if (const char* e = LastError()) return e;
  ForElement(s.element, [&](auto t) {
    using T = decltype(t);
    StatsFinalKernel<T>
        <<<FinalBlocks(s.channels), dim3(kFinalX, kFinalY), 0, StreamOf(s)>>>(
            static_cast<const T*>(x), s.rows, static_cast<int>(s.channels),
            p.gx, workspace, gamma, beta, decay, epsilon, moving_mean,
            moving_variance, coef);
  });
  return LastError();
}

const char* BnCudaInferenceCoefficients(const BnCudaShape& s,
                                        const float* gamma, const float* beta,
                                        const float* moving_mean,
                                        const float* moving_variance,
                                        double epsilon, float* coef) {
  const int C = static_cast<int>(s.channels);
  InferenceCoefficientsKernel<<<(C + 127) / 128, 128, 0, StreamOf(s)>>>(
      C, gamma, beta, moving_mean, moving_variance, epsilon, coef);
  return LastError();
}

const char* BnCudaApply(const BnCudaShape& s, const void* x, const float* coef,
                        void* y) {
  const Plan p = MakePlan(s);
  const dim3 grid(p.gx, p.gy), block(p.bx, p.by);
  Dispatch(s, p, [&](auto t, auto v, auto a) {
    using T = decltype(t);
    ApplyKernel<T, decltype(v)::value, decltype(a)::value>
        <<<grid, block, 0, StreamOf(s)>>>(static_cast<const T*>(x), s.rows,
                                          static_cast<int>(s.channels), coef,
                                          static_cast<T*>(y));
  });
  return LastError();
}

const char* BnCudaBackward(const BnCudaShape& s, const void* g, const void* x,
                           const float* gamma, const float* coef,
                           float* workspace, void* dx, float* dgamma,
                           float* dbeta) {
  const Plan p = MakePlan(s);
  LaunchReduce<true>(s, p, x, g, coef, workspace);
  if (const char* e = LastError()) return e;
  float* abk = workspace + 2 * static_cast<int64_t>(p.gx) * s.channels;
  BackwardFinalKernel<<<FinalBlocks(s.channels), dim3(kFinalX, kFinalY), 0,
                        StreamOf(s)>>>(s.rows, static_cast<int>(s.channels),
                                       p.gx, workspace, gamma, coef, abk,
                                       dgamma, dbeta);
  if (const char* e = LastError()) return e;
  const dim3 grid(p.gx, p.gy), block(p.bx, p.by);
  Dispatch(s, p, [&](auto t, auto v, auto a) {
    using T = decltype(t);
    BackwardApplyKernel<T, decltype(v)::value, decltype(a)::value>
        <<<grid, block, 0, StreamOf(s)>>>(
            static_cast<const T*>(g), static_cast<const T*>(x), s.rows,
            static_cast<int>(s.channels), coef, abk, static_cast<T*>(dx));
  });
  return LastError();
}

int64_t BiasGradWorkspaceFloats(const BnCudaShape& s) {
  return static_cast<int64_t>(MakePlan(s).gx) * s.channels;
}

const char* BiasActCuda(const BnCudaShape& s, const void* x, const float* bias,
                        void* y) {
  const Plan p = MakePlan(s);
  const dim3 grid(p.gx, p.gy), block(p.bx, p.by);
  Dispatch(s, p, [&](auto t, auto v, auto a) {
    using T = decltype(t);
    BiasActKernel<T, decltype(v)::value, decltype(a)::value>
        <<<grid, block, 0, StreamOf(s)>>>(static_cast<const T*>(x), s.rows,
                                          static_cast<int>(s.channels), bias,
                                          static_cast<T*>(y));
  });
  return LastError();
}

const char* BiasActBackwardCuda(const BnCudaShape& s, const void* g,
                                const void* x, const float* bias,
                                float* workspace, void* dx, float* dbias) {
  const Plan p = MakePlan(s);
  const dim3 grid(p.gx, p.gy), block(p.bx, p.by);
  Dispatch(s, p, [&](auto t, auto v, auto a) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    BiasActGradKernel<T, V, decltype(a)::value>
        <<<grid, block, size_t{kThreads} * V * sizeof(float), StreamOf(s)>>>(
            static_cast<const T*>(g), static_cast<const T*>(x), s.rows,
            static_cast<int>(s.channels), bias, workspace, static_cast<T*>(dx));
  });
  if (const char* e = LastError()) return e;
  BiasFinalKernel<<<FinalBlocks(s.channels), dim3(kFinalX, kFinalY), 0,
                    StreamOf(s)>>>(static_cast<int>(s.channels), p.gx,
                                   workspace, dbias);
  return LastError();
}

const char* AddReluCuda(CudaElement element, int64_t n, const void* a,
                        const void* b, void* out, int device, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const bool aligned = ((reinterpret_cast<std::uintptr_t>(a) |
                         reinterpret_cast<std::uintptr_t>(b) |
                         reinterpret_cast<std::uintptr_t>(out)) &
                        15) == 0;
  ForElement(element, [&](auto t) {
    using T = decltype(t);
    constexpr int kWide = 16 / sizeof(T);
    const int64_t blocks_max = int64_t{8} * MultiProcessors(device);
    auto launch = [&](auto v) {
      constexpr int V = decltype(v)::value;
      const int64_t vectors = n / V;
      const int blocks = static_cast<int>(std::max<int64_t>(
          1, std::min(blocks_max, (vectors + kThreads - 1) / kThreads)));
      AddReluKernel<T, V><<<blocks, kThreads, 0, st>>>(static_cast<const T*>(a),
                                                       static_cast<const T*>(b),
                                                       n, static_cast<T*>(out));
    };
    if (aligned && n % kWide == 0) {
      launch(std::integral_constant<int, kWide>());
    } else {
      launch(std::integral_constant<int, 1>());
    }
  });
  return LastError();
}

namespace {

// f(I()) with I the narrowest index type that addresses `total` elements.
template <typename F>
void ForIndex(int64_t total, F&& f) {
  if (total < (int64_t{1} << 31)) {
    f(uint32_t());
  } else {
    f(int64_t());
  }
}

unsigned Blocks(int64_t total) {
  return static_cast<unsigned>((total + kThreads - 1) / kThreads);
}

}  // namespace

const char* MaxPoolCuda(CudaElement element, const void* x, const Cuda4d& in,
                        const CudaPool& pool, void* y, int32_t* argmax,
                        int device, void* stream) {
  const int64_t total = in.n * in.c * pool.out_h * pool.out_w;
  if (total == 0) return nullptr;
  ForElement(element, [&](auto t) {
    using T = decltype(t);
    ForIndex(std::max(total, in.n * in.c * in.h * in.w), [&](auto index) {
      using I = decltype(index);
      MaxPoolKernel<T, I>
          <<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
              static_cast<const T*>(x), static_cast<I>(in.h),
              static_cast<I>(in.w), in.channels_last, pool.kernel, pool.stride,
              pool.pad_top, pool.pad_left,
              Dims4d<I>(in.c, pool.out_h, pool.out_w), static_cast<I>(total),
              static_cast<T*>(y), argmax);
    });
  });
  return LastError();
}

const char* MaxPoolBackwardCuda(CudaElement element, const void* g,
                                const int32_t* argmax, const Cuda4d& in,
                                const CudaPool& pool, void* dx, int device,
                                void* stream) {
  const int64_t total = in.n * in.c * in.h * in.w;
  if (total == 0) return nullptr;
  ForElement(element, [&](auto t) {
    using T = decltype(t);
    ForIndex(
        std::max(total, in.n * in.c * pool.out_h * pool.out_w),
        [&](auto index) {
          using I = decltype(index);
          MaxPoolBackwardKernel<T, I><<<Blocks(total), kThreads, 0,
                                        static_cast<cudaStream_t>(stream)>>>(
              static_cast<const T*>(g), argmax, Dims4d<I>(in.c, in.h, in.w),
              in.channels_last, pool.kernel,
              Divider<uint32_t>(static_cast<uint32_t>(pool.stride)),
              pool.pad_top, pool.pad_left, static_cast<I>(pool.out_h),
              static_cast<I>(pool.out_w), static_cast<I>(total),
              static_cast<T*>(dx));
        });
  });
  return LastError();
}

const char* LrnForwardCuda(CudaElement element, const void* x,
                           const Cuda4d& shape, const CudaLrn& lrn, void* y,
                           float* norm, int device, void* stream) {
  const int64_t total = shape.n * shape.c * shape.h * shape.w;
  if (total == 0) return nullptr;
  ForElement(element, [&](auto t) {
    using T = decltype(t);
    ForIndex(total, [&](auto index) {
      using I = decltype(index);
      LrnForwardKernel<T, I>
          <<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
              static_cast<const T*>(x), Divider<I>(static_cast<I>(shape.c)),
              Divider<I>(static_cast<I>(shape.h * shape.w)),
              shape.channels_last, lrn, static_cast<I>(total),
              static_cast<T*>(y), norm);
    });
  });
  return LastError();
}

const char* LrnBackwardCuda(CudaElement element, const void* x, const void* g,
                            const float* norm, const Cuda4d& shape,
                            const CudaLrn& lrn, float* scratch, void* dx,
                            int device, void* stream) {
  const int64_t total = shape.n * shape.c * shape.h * shape.w;
  if (total == 0) return nullptr;
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  ForElement(element, [&](auto t) {
    using T = decltype(t);
    ForIndex(total, [&](auto index) {
      using I = decltype(index);
      LrnBackwardTermKernel<T, I><<<Blocks(total), kThreads, 0, st>>>(
          static_cast<const T*>(x), static_cast<const T*>(g), norm, lrn,
          static_cast<I>(total), scratch);
      LrnBackwardKernel<T, I><<<Blocks(total), kThreads, 0, st>>>(
          static_cast<const T*>(x), static_cast<const T*>(g), norm, scratch,
          Divider<I>(static_cast<I>(shape.c)),
          Divider<I>(static_cast<I>(shape.h * shape.w)), shape.channels_last,
          lrn, static_cast<I>(total), static_cast<T*>(dx));
    });
  });
  return LastError();
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
