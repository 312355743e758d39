#pragma once
// slim.max_pool2d and slim.avg_pool2d with TensorFlow's padding.

#include <torch/torch.h>

#include <cstdint>

#include "slimtorch/nets/layer_common.h"

namespace slimtorch {
namespace nets {

// slim.max_pool2d (default stride 2, 'VALID'); 'SAME' pads with -inf.
torch::Tensor MaxPool2d(const torch::Tensor& x, int64_t kernel,
                        int64_t stride = 2, Padding padding = Padding::kValid);

// slim.avg_pool2d (default stride 2, 'VALID'); 'SAME' averages over the
// window's pixels inside the image only, as TensorFlow.
torch::Tensor AvgPool2d(const torch::Tensor& x, int64_t kernel,
                        int64_t stride = 2, Padding padding = Padding::kValid);

// Whether max pooling of channels-last CPU bfloat16 tensors
// (--precision=bf16) runs through oneDNN's pooling when the build has it
// (default true; SLIMTORCH_DNNL_POOLING=0 for a whole process), else
// through LibTorch's max_pool2d. The same values, and the same argmax (the
// first maximum in row-major window order) for the gradient; unlike
// LibTorch's, a NaN among finite values in a window is not propagated (a
// window of NaNs gives -inf), as in TensorFlow's oneDNN pooling. Returns
// whether the build has it.
bool SetDnnlPooling(bool enabled);

}  // namespace nets
}  // namespace slimtorch
