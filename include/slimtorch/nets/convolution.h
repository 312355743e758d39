#pragma once
// slim.conv2d (with depthwise and batch-norm variants) and
// slim.separable_conv2d. Variables: "weights" [out, in, kh, kw] (TF: [kh, kw,
// in, out]), "biases" [out] (checkpoint keys; do not change).

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "slimtorch/nets/batch_norm.h"
#include "slimtorch/nets/initializers.h"
#include "slimtorch/nets/layer_common.h"

namespace slimtorch {
namespace nets {

class Quantizer;  // nets/quantize.h

struct Conv2dOptions {
  Conv2dOptions(int64_t in, int64_t out, int64_t kernel)
      : in_channels_(in),
        out_channels_(out),
        kernel_h_(kernel),
        kernel_w_(kernel) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, kernel_h);
  TORCH_ARG(int64_t, kernel_w);
  // Default 1.
  TORCH_ARG(int64_t, stride) = 1;
  // Default 'SAME', as slim.conv2d.
  TORCH_ARG(Padding, padding) = Padding::kSame;
  // Default ReLU, as slim.conv2d.
  TORCH_ARG(Activation, activation) = Activation::kRelu;
  // Default true; false when a normalizer follows.
  TORCH_ARG(bool, use_bias) = true;
  // Default xavier_initializer(), as slim.conv2d.
  TORCH_ARG(Initializer, weights_init) = Initializer::XavierUniform();
  TORCH_ARG(Initializer, biases_init) = Initializer::Zeros();
  // L2 coefficient on the weights; 0 = no regularizer.
  TORCH_ARG(double, weight_decay) = 0.0;
  // L2 coefficient on the biases (an arg scope's biases_regularizer, as
  // inception_resnet_v2's); 0 = none.
  TORCH_ARG(double, bias_decay) = 0.0;
  // slim.separable_conv2d(num_outputs=None, depth_multiplier=1): one 3x3
  // filter per channel (out_channels == in_channels), variable
  // "depthwise_weights" [C, 1, kh, kw] (TF: [kh, kw, C, 1]; do not change).
  TORCH_ARG(bool, depthwise) = false;
  // slim.conv2d's normalizer_fn=batch_norm: a child "BatchNorm" between the
  // convolution and the activation, and no biases.
  TORCH_ARG(c10::optional<BatchNormOptions>, batch_norm) = c10::nullopt;
};

// slim.conv2d. Input/output NCHW float.
class Conv2dImpl : public torch::nn::Cloneable<Conv2dImpl>, public Regularized {
 public:
  explicit Conv2dImpl(const Conv2dOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  // forward() of a quantized net (nets/quantize.h).
  torch::Tensor QuantizedForward(Quantizer& q, const torch::Tensor& x);
  std::vector<std::pair<torch::Tensor, double>> L2Variables() const override;

  Conv2dOptions options;
  torch::Tensor weights;
  torch::Tensor biases;
  BatchNorm batch_norm{nullptr};
};
TORCH_MODULE(Conv2d);

struct SeparableConv2dOptions {
  SeparableConv2dOptions(int64_t in, int64_t out, int64_t kernel,
                         int64_t depth_multiplier)
      : in_channels_(in),
        out_channels_(out),
        kernel_(kernel),
        depth_multiplier_(depth_multiplier) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, kernel);
  TORCH_ARG(int64_t, depth_multiplier);
  TORCH_ARG(int64_t, stride) = 1;
  TORCH_ARG(Padding, padding) = Padding::kSame;
  TORCH_ARG(Activation, activation) = Activation::kRelu;
  // Both weights' initializer (slim.separable_conv2d's weights_initializer).
  TORCH_ARG(Initializer, weights_init) = Initializer::XavierUniform();
  TORCH_ARG(double, weight_decay) = 0.0;
  // Default true; false for an arg scope's biases_initializer=None (NASNet,
  // PNASNet): no "biases" variable.
  TORCH_ARG(bool, use_bias) = true;
};

// slim.separable_conv2d(num_outputs) without a normalizer: a depthwise conv
// (depth_multiplier filters per input channel, with the stride) then a 1x1
// pointwise conv, biases and the activation. Variables (checkpoint keys; do
// not change): "depthwise_weights" [in * mult, 1, k, k] (TF: [k, k, in,
// mult]; channel c * mult + m is TF's [.., c, m]), "pointwise_weights"
// [out, in * mult, 1, 1] (TF: [1, 1, in * mult, out]), "biases" [out]. L2
// applies to both weights.
class SeparableConv2dImpl : public torch::nn::Cloneable<SeparableConv2dImpl>,
                            public Regularized {
 public:
  explicit SeparableConv2dImpl(const SeparableConv2dOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  std::vector<std::pair<torch::Tensor, double>> L2Variables() const override;

  SeparableConv2dOptions options;
  torch::Tensor depthwise_weights;
  torch::Tensor pointwise_weights;
  torch::Tensor biases;
};
TORCH_MODULE(SeparableConv2d);

// Whether 3 x 3 stride-1 float32 CPU convolutions (16 input channels or
// more, outputs of 8 x 8 or more) run through oneDNN's Winograd kernels
// when the build has them (default true; SLIMTORCH_WINOGRAD=0 for a whole
// process), else through LibTorch's convolution. Winograd's transforms
// round differently from a direct convolution: values and gradients agree
// to ~1e-6 of their largest (Conv2dTest.WinogradEqualsTheDirectConvolution).
// Returns whether the build has them.
bool SetDnnlWinograd(bool enabled);

}  // namespace nets
}  // namespace slimtorch
