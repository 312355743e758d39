#pragma once
// Multi-tensor helpers of the device updates (the optimizers' device forms
// and DeviceUpdate's moving averages): update_kernels.h's fused kernels
// where they apply, LibTorch's _foreach ops otherwise.

#include <torch/torch.h>

#include <vector>

#include "update_kernels.h"

namespace slimtorch {
namespace train_internal {

// a[i] op= b[i] (c[i]) through update_kernels.h's fused kernel, when this
// build has it, KernelSwitch::kFusedKernels is on, and every tensor is a
// dense float32 tensor on the learning rate's GPU with its partners' shape
// and strides; false (nothing done) otherwise. `c` may be null.
bool FusedUpdate(UpdateKind kind, const std::vector<torch::Tensor>& a,
                 const std::vector<torch::Tensor>& b,
                 const std::vector<torch::Tensor>* c, const torch::Tensor& lr,
                 double momentum, const torch::Tensor& step, float decay);

// list[i] * t for a 0-dim tensor t on the list's device.
std::vector<torch::Tensor> TimesScalarTensor(torch::TensorList list,
                                             const torch::Tensor& t);

// list[i] *= t for a 0-dim tensor t on the list's device.
void MulByScalarTensor_(torch::TensorList list, const torch::Tensor& t);

}  // namespace train_internal
}  // namespace slimtorch
