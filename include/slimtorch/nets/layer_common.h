#pragma once
// What the slim layers share: TensorFlow's padding modes and 'SAME'
// padding, the activations, the L2 regularization interface.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace slimtorch {
namespace nets {

// kSame / kValid: TensorFlow's 'SAME' / 'VALID'. kFixed: resnet_utils'
// conv2d_same for strides > 1: (k - 1) / 2 zeros before, the rest after, then
// 'VALID' (unlike 'SAME', independent of the input size).
enum class Padding { kSame, kValid, kFixed };
enum class Activation { kNone, kRelu, kRelu6 };

// Layers that contribute to the L2 regularization loss (slim's
// l2_regularizer(wd) = wd * sum(W^2) / 2 on their weights).
class Regularized {
 public:
  virtual ~Regularized() = default;
  // The variables the layer regularizes, each with its coefficient c (the
  // term is c * sum(V^2) / 2); empty when it has none.
  virtual std::vector<std::pair<torch::Tensor, double>> L2Variables() const = 0;
  // The layer's L2 term (differentiable), or an undefined tensor when it
  // has none.
  torch::Tensor RegularizationLoss() const;
};

// Pads an NCHW tensor for TensorFlow's 'SAME' on a window of kh x kw with
// the given stride: total = max((ceil(in/s) - 1) * s + k - in, 0), the extra
// pixel (odd totals) going to the bottom/right. Returns
// {top, bottom, left, right}.
std::array<int64_t, 4> SamePadding(int64_t in_h, int64_t in_w, int64_t kh,
                                   int64_t kw, int64_t stride);

}  // namespace nets
}  // namespace slimtorch
