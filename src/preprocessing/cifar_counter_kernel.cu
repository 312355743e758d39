// Launch of cifar_counter_kernel.h's draw-and-crop (the body is there).

#include <cuda_runtime.h>

#include <algorithm>

#include "cifar_counter_kernel.h"

namespace slimtorch {
namespace preprocessing_internal {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    CifarCounterCropKernel(const CifarCounterCrop p) {
  const int64_t total = p.elements();
  for (int64_t e = int64_t{blockIdx.x} * kThreads + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * kThreads) {
    CifarCounterCropElement(p, e);
  }
}

}  // namespace

const char* CifarCounterCropCuda(const CifarCounterCrop& p, void* stream) {
  const int64_t total = p.elements();
  if (total == 0) return nullptr;
  const int blocks = static_cast<int>(
      std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t{1} << 16));
  CifarCounterCropKernel<<<blocks, kThreads, 0,
                           static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace preprocessing_internal
}  // namespace slimtorch
