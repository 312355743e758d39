#pragma once
// What the host-device kernel bodies share (src/train/update_kernels.h,
// src/preprocessing/cifar_counter_kernel.h): functions compiled for both
// the CPU (the tests run the bodies there) and the GPU, and float32
// operations rounded once each, never contracted into a fused multiply-add
// (the tensor ops they must equal bit for bit round each operation).

#ifdef __CUDACC__
#define SLIMTORCH_HOST_DEVICE __host__ __device__
#else
#define SLIMTORCH_HOST_DEVICE
#endif

namespace slimtorch {
namespace host_device {

SLIMTORCH_HOST_DEVICE inline float MulRn(float x, float y) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(x, y);
#else
  return x * y;
#endif
}

SLIMTORCH_HOST_DEVICE inline float AddRn(float x, float y) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(x, y);
#else
  return x + y;
#endif
}

SLIMTORCH_HOST_DEVICE inline float SubRn(float x, float y) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(x, y);
#else
  return x - y;
#endif
}

SLIMTORCH_HOST_DEVICE inline float DivRn(float x, float y) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(x, y);
#else
  return x / y;
#endif
}

}  // namespace host_device
}  // namespace slimtorch
