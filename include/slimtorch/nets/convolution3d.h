#pragma once
// The 3-D layers of the video nets (I3D, S3D-G): slim.conv3d and
// slim.max_pool3d / slim.avg_pool3d on [N, C, T, H, W] (NCDHW) values, with
// TensorFlow's padding. Variables: "weights" [out, in, kt, kh, kw] (TF:
// [kt, kh, kw, in, out]), "biases" [out] (checkpoint keys; do not change).

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "slimtorch/nets/batch_norm.h"
#include "slimtorch/nets/initializers.h"
#include "slimtorch/nets/layer_common.h"

namespace slimtorch {
namespace nets {

// [t, h, w]: a kernel's or a stride's extent along each axis.
using Extent3d = std::array<int64_t, 3>;

struct Conv3dOptions {
  Conv3dOptions(int64_t in, int64_t out, Extent3d kernel)
      : in_channels_(in), out_channels_(out), kernel_(kernel) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(Extent3d, kernel);
  // Default 1 along every axis.
  TORCH_ARG(Extent3d, stride) = Extent3d{1, 1, 1};
  // Default 'SAME', as slim.conv3d.
  TORCH_ARG(Padding, padding) = Padding::kSame;
  // Default ReLU, as slim.conv3d.
  TORCH_ARG(Activation, activation) = Activation::kRelu;
  // Default true; false when a normalizer follows (biases_initializer=None).
  TORCH_ARG(bool, use_bias) = true;
  // Default xavier_initializer(), as slim.conv3d.
  TORCH_ARG(Initializer, weights_init) = Initializer::XavierUniform();
  // i3d_utils.center_initializer() instead of weights_init: a [kt, 1, 1]
  // kernel (kt odd, in == out) that is the identity at its centre tap and
  // zero elsewhere, so that a temporal conv starts as a no-op.
  TORCH_ARG(bool, center_init) = false;
  // L2 coefficient on the weights; 0 = no regularizer.
  TORCH_ARG(double, weight_decay) = 0.0;
  // slim.conv3d's normalizer_fn=batch_norm: a child "BatchNorm" between the
  // convolution and the activation, and no biases.
  TORCH_ARG(c10::optional<BatchNormOptions>, batch_norm) = c10::nullopt;
};

// slim.conv3d. Input/output [N, C, T, H, W] float.
class Conv3dImpl : public torch::nn::Cloneable<Conv3dImpl>, public Regularized {
 public:
  explicit Conv3dImpl(const Conv3dOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  std::vector<std::pair<torch::Tensor, double>> L2Variables() const override;

  Conv3dOptions options;
  torch::Tensor weights;
  torch::Tensor biases;
  BatchNorm batch_norm{nullptr};
};
TORCH_MODULE(Conv3d);

// slim.max_pool3d (TF-Slim's default: stride 2, 'VALID'); 'SAME' pads with
// -inf, so padded cells never win.
torch::Tensor MaxPool3d(const torch::Tensor& x, Extent3d kernel,
                        Extent3d stride = {2, 2, 2},
                        Padding padding = Padding::kValid);

// slim.avg_pool3d (default stride 2, 'VALID'); 'SAME' averages over the
// window's cells inside the input only, as TensorFlow.
torch::Tensor AvgPool3d(const torch::Tensor& x, Extent3d kernel,
                        Extent3d stride = {2, 2, 2},
                        Padding padding = Padding::kValid);

// TensorFlow's 'SAME' pads of a window `kernel` with `stride` on an input of
// `size` ([T, H, W]): {front, back, top, bottom, left, right}, the extra
// cell of an odd total at the back / bottom / right.
std::array<int64_t, 6> SamePadding3d(Extent3d size, Extent3d kernel,
                                     Extent3d stride);

}  // namespace nets
}  // namespace slimtorch
