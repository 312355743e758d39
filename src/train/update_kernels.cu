// Launches of update_kernels.h's multi-tensor update (the body is there).

#include <cuda_runtime.h>

#include "update_kernels.h"

namespace slimtorch {
namespace train_internal {
namespace {

__global__ void __launch_bounds__(kUpdateThreads)
    UpdateKernel(const UpdatePack p, const UpdateScalars s) {
  UpdateBlock(p, s, static_cast<int>(blockIdx.x),
              static_cast<int>(threadIdx.x));
}

__global__ void RecordStepLossesKernel(const float* total, const float* ce,
                                       const float* reg, const int64_t* step,
                                       double* readout) {
  RecordStepLosses(total, ce, reg, step, readout);
}

}  // namespace

const char* MultiTensorUpdateCuda(const UpdateScalars& s,
                                  const std::vector<UpdatePack>& packs,
                                  void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  for (const UpdatePack& p : packs) {
    if (p.blocks() == 0) continue;
    UpdateKernel<<<p.blocks(), kUpdateThreads, 0, st>>>(p, s);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cudaGetErrorString(e);
  }
  return nullptr;
}

const char* RecordStepLossesCuda(const float* total, const float* ce,
                                 const float* reg, const int64_t* step,
                                 double* readout, void* stream) {
  RecordStepLossesKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      total, ce, reg, step, readout);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace train_internal
}  // namespace slimtorch
