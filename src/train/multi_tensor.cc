#include "multi_tensor.h"

#include <torch/version.h>

#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"

#ifdef SLIMTORCH_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/autograd/variable.h>
#endif

// LibTorch >= 2.1 multiplies a tensor list by a 0-dim device tensor in one
// kernel; older versions (Debian's 1.13) loop.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define SLIMTORCH_FOREACH_TENSOR_SCALAR 1
#endif

namespace slimtorch {
namespace train_internal {

bool FusedUpdate(UpdateKind kind, const std::vector<torch::Tensor>& a,
                 const std::vector<torch::Tensor>& b,
                 const std::vector<torch::Tensor>* c, const torch::Tensor& lr,
                 double momentum, const torch::Tensor& step, float decay) {
#ifdef SLIMTORCH_WITH_CUDA_KERNELS
  if (!KernelSwitchOn(KernelSwitch::kFusedKernels) || !lr.is_cuda() ||
      a.size() != b.size() || (c != nullptr && c->size() != a.size())) {
    return false;
  }
  auto fits = [&](const torch::Tensor& t, const torch::Tensor& first) {
    return t.device() == lr.device() && t.scalar_type() == torch::kFloat32 &&
           t.sizes() == first.sizes() && t.strides() == first.strides() &&
           t.is_non_overlapping_and_dense();
  };
  std::vector<float*> pa, pc;
  std::vector<const float*> pb;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!fits(a[i], a[i]) || !fits(b[i], a[i]) ||
        (c != nullptr && !fits((*c)[i], a[i]))) {
      return false;
    }
    pa.push_back(a[i].data_ptr<float>());
    pb.push_back(b[i].data_ptr<float>());
    if (c != nullptr) pc.push_back((*c)[i].data_ptr<float>());
    sizes.push_back(a[i].numel());
  }
  UpdateScalars s;
  s.kind = kind;
  s.learning_rate = lr.data_ptr<float>();
  s.momentum = static_cast<float>(momentum);
  s.step = step.data_ptr<int64_t>();
  s.decay = decay;
  const char* error = MultiTensorUpdateCuda(
      s,
      PackUpdateTensors(a.size(), pa.data(), pb.data(),
                        c != nullptr ? pc.data() : nullptr, sizes.data()),
      at::cuda::getCurrentCUDAStream(lr.get_device()).stream());
  SLIM_CHECK(error == nullptr, "the fused multi-tensor update kernel: ", error);
  // As the in-place ops would: autograd sees the tensors changed.
  for (const auto& t : a) torch::autograd::impl::bump_version(t);
  if (c != nullptr) {
    for (const auto& t : *c) torch::autograd::impl::bump_version(t);
  }
  return true;
#else
  (void)kind, (void)a, (void)b, (void)c, (void)lr, (void)momentum;
  (void)step, (void)decay;
  return false;
#endif
}

std::vector<torch::Tensor> TimesScalarTensor(torch::TensorList list,
                                             const torch::Tensor& t) {
#ifdef SLIMTORCH_FOREACH_TENSOR_SCALAR
  return at::_foreach_mul(list, t);
#else
  std::vector<torch::Tensor> out;
  out.reserve(list.size());
  for (const auto& x : list) out.push_back(x * t);
  return out;
#endif
}

void MulByScalarTensor_(torch::TensorList list, const torch::Tensor& t) {
#ifdef SLIMTORCH_FOREACH_TENSOR_SCALAR
  at::_foreach_mul_(list, t);
#else
  for (const auto& x : list) const_cast<torch::Tensor&>(x).mul_(t);
#endif
}

}  // namespace train_internal
}  // namespace slimtorch
