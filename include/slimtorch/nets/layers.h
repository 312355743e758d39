#pragma once
// Slim-like layers: TF-Slim's variable names, TensorFlow's 'SAME'/'VALID'
// padding and initializers, on LibTorch's NCHW layout.
//
// Variable names and layouts (checkpoint keys; do not change):
//   Conv2d:          "weights" [out, in, kh, kw] (TF: [kh, kw, in, out]),
//                    "biases"  [out]
//   FullyConnected:  "weights" [out, in] (TF: [in, out]), "biases" [out]
// A layer's module name is its TF-Slim scope ("conv1"), so the net's
// variables come out as "<NetScope>/conv1/weights".

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "slimtorch/nets/layer_cost.h"

namespace slimtorch {
namespace nets {

// kSame / kValid: TensorFlow's 'SAME' / 'VALID'. kFixed: resnet_utils'
// conv2d_same for strides > 1: (k - 1) / 2 zeros before, the rest after, then
// 'VALID' (unlike 'SAME', independent of the input size).
enum class Padding { kSame, kValid, kFixed };
enum class Activation { kNone, kRelu, kRelu6 };

// Weight initializers, as TensorFlow's.
struct Initializer {
  enum class Kind {
    kZeros,
    kConstant,         // value
    kTruncatedNormal,  // stddev; resampled beyond 2 stddev
    kXavierUniform,    // slim's xavier_initializer() (glorot uniform)
    // slim.variance_scaling_initializer(factor, 'FAN_IN', uniform=False):
    // truncated normal with stddev sqrt(1.3 * factor / fan_in).
    kVarianceScaling,
  } kind = Kind::kZeros;
  double value = 0.0;

  static Initializer Zeros() { return {Kind::kZeros, 0.0}; }
  static Initializer Constant(double v) { return {Kind::kConstant, v}; }
  static Initializer TruncatedNormal(double stddev) {
    return {Kind::kTruncatedNormal, stddev};
  }
  static Initializer XavierUniform() { return {Kind::kXavierUniform, 0.0}; }
  static Initializer VarianceScaling(double factor = 2.0) {
    return {Kind::kVarianceScaling, factor};
  }
};

// Fills `t` in place. fan_in/fan_out follow TensorFlow's convention
// (conv: kh*kw*in and kh*kw*out). Uses torch's default generator.
void Initialize(torch::Tensor& t, const Initializer& init, int64_t fan_in,
                int64_t fan_out);

// Samples TensorFlow's truncated normal (values beyond 2 stddev redrawn).
torch::Tensor TruncatedNormal(torch::IntArrayRef shape, double stddev);

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

// slim.batch_norm's settings (an arg scope's batch_norm_params).
struct BatchNormOptions {
  explicit BatchNormOptions(int64_t channels) : channels_(channels) {}
  TORCH_ARG(int64_t, channels);
  // moving = decay * moving + (1 - decay) * batch; slim's default 0.999.
  TORCH_ARG(double, decay) = 0.999;
  // Added to the variance; slim's default 0.001. Values below 1.001e-5 act
  // as 1.001e-5, as in TensorFlow's fused batch norm (which slim uses for
  // 4-D inputs).
  TORCH_ARG(double, epsilon) = 0.001;
  // beta (default true) and gamma (default false, as slim.batch_norm).
  TORCH_ARG(bool, center) = true;
  TORCH_ARG(bool, scale) = false;
};

// slim.batch_norm on NCHW input. Variables (checkpoint keys; do not change):
// "beta" and "gamma" [C] (trainable, when center / scale), "moving_mean" and
// "moving_variance" [C] (buffers). Training mode normalises with the batch
// statistics and updates the moving ones (the variance Bessel-corrected, as
// TF's fused kernel); eval mode uses the moving statistics.
//
// On CPU float32 input in NCHW or channels-last order the normalisation and
// the activation that follows it run as one fused kernel per pass (batch
// statistics, normalise + activate; backward: sums, input gradient), unless
// a layer trace takes the ops (layer_trace.h: a graph being exported);
// elsewhere LibTorch's batch_norm then the activation. Both give the same
// values within float rounding.
class BatchNormImpl : public torch::nn::Cloneable<BatchNormImpl> {
 public:
  explicit BatchNormImpl(const BatchNormOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  // Batch norm then `activation`, recorded (when exporting) as
  // "<layer scope>/Relu" or ".../Relu6" of `layer`.
  torch::Tensor ForwardActivated(const torch::Tensor& x, Activation activation,
                                 const torch::nn::Module* layer);

  BatchNormOptions options;
  torch::Tensor beta;
  torch::Tensor gamma;
  torch::Tensor moving_mean;
  torch::Tensor moving_variance;
  // false: always LibTorch's batch_norm + activation (the reference the
  // fused kernels are tested against).
  bool fused_kernels = true;

 private:
  // The fused path's output, or an undefined tensor where it does not apply.
  torch::Tensor Fused(const torch::Tensor& x, Activation activation);
  torch::Tensor Unfused(const torch::Tensor& x);
};
TORCH_MODULE(BatchNorm);

// Whether BatchNorm layers may use the fused kernels, CPU and CUDA (default
// true; each layer's fused_kernels must also be true), and AddRelu its CUDA
// kernel. For benchmarks and checks: false runs LibTorch's batch_norm +
// activation (and add + ReLU) everywhere.
void SetFusedBatchNorm(bool enabled);

// Whether the fused batch norm trains channels-last CPU tensors (ReLU or
// none after it) through oneDNN's kernels when the build has them (default
// true; SLIMTORCH_DNNL_BATCH_NORM=0 for a whole process), else through
// slimtorch's own — float32, and bfloat16 (--precision=bf16's convolution
// outputs), which otherwise takes LibTorch's batch_norm + activation. Returns
// whether the build has them.
bool SetDnnlBatchNorm(bool enabled);

// Whether 3 x 3 stride-1 float32 CPU convolutions (16 input channels or
// more, outputs of 8 x 8 or more) run through oneDNN's Winograd kernels
// when the build has them (default true; SLIMTORCH_WINOGRAD=0 for a whole
// process), else through LibTorch's convolution. Winograd's transforms
// round differently from a direct convolution: values and gradients agree
// to ~1e-6 of their largest (Conv2dTest.WinogradEqualsTheDirectConvolution).
// Returns whether the build has them.
bool SetDnnlWinograd(bool enabled);

// Whether max pooling of channels-last CPU bfloat16 tensors
// (--precision=bf16) runs through oneDNN's pooling when the build has it
// (default true; SLIMTORCH_DNNL_POOLING=0 for a whole process), else
// through LibTorch's max_pool2d. The same values, and the same argmax (the
// first maximum in row-major window order) for the gradient; unlike
// LibTorch's, a NaN among finite values in a window is not propagated (a
// window of NaNs gives -inf), as in TensorFlow's oneDNN pooling. Returns
// whether the build has it.
bool SetDnnlPooling(bool enabled);

// Relu(bn(x)) as graph_ops' Relu names it when exporting; otherwise the
// fused batch norm + ReLU where it applies.
torch::Tensor BatchNormRelu(BatchNormImpl& bn, const torch::Tensor& x);

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
  std::vector<std::pair<torch::Tensor, double>> L2Variables() const override;

  Conv2dOptions options;
  torch::Tensor weights;
  torch::Tensor biases;
  BatchNorm batch_norm{nullptr};
};
TORCH_MODULE(Conv2d);

struct FullyConnectedOptions {
  FullyConnectedOptions(int64_t in, int64_t out)
      : in_features_(in), out_features_(out) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  // Default ReLU, as slim.fully_connected.
  TORCH_ARG(Activation, activation) = Activation::kRelu;
  TORCH_ARG(bool, use_bias) = true;
  TORCH_ARG(Initializer, weights_init) = Initializer::XavierUniform();
  TORCH_ARG(Initializer, biases_init) = Initializer::Zeros();
  TORCH_ARG(double, weight_decay) = 0.0;
  // L2 coefficient on the biases; 0 = none.
  TORCH_ARG(double, bias_decay) = 0.0;
};

// slim.fully_connected. Input [N, in] float, output [N, out].
class FullyConnectedImpl : public torch::nn::Cloneable<FullyConnectedImpl>,
                           public Regularized {
 public:
  explicit FullyConnectedImpl(const FullyConnectedOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  std::vector<std::pair<torch::Tensor, double>> L2Variables() const override;

  FullyConnectedOptions options;
  torch::Tensor weights;
  torch::Tensor biases;
};
TORCH_MODULE(FullyConnected);

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

// Pads an NCHW tensor for TensorFlow's 'SAME' on a window of kh x kw with
// the given stride: total = max((ceil(in/s) - 1) * s + k - in, 0), the extra
// pixel (odd totals) going to the bottom/right. Returns
// {top, bottom, left, right}.
std::array<int64_t, 4> SamePadding(int64_t in_h, int64_t in_w, int64_t kh,
                                   int64_t kw, int64_t stride);

// slim.max_pool2d (default stride 2, 'VALID'); 'SAME' pads with -inf.
torch::Tensor MaxPool2d(const torch::Tensor& x, int64_t kernel,
                        int64_t stride = 2, Padding padding = Padding::kValid);

// slim.avg_pool2d (default stride 2, 'VALID'); 'SAME' averages over the
// window's pixels inside the image only, as TensorFlow.
torch::Tensor AvgPool2d(const torch::Tensor& x, int64_t kernel,
                        int64_t stride = 2, Padding padding = Padding::kValid);

// slim.flatten on an NCHW tensor, in TensorFlow's NHWC element order, so
// that the following fully-connected weights map one to one to TF-Slim's.
torch::Tensor FlattenNhwc(const torch::Tensor& x);

// tf.nn.lrn (local response normalization across channels) with
// TensorFlow's parameterisation, on NCHW input:
//   sqr_sum[n, c, h, w] = sum over c' in [c - depth_radius, c + depth_radius]
//                         (clipped to the channels) of x[n, c', h, w]^2
//   out = x / (bias + alpha * sqr_sum)^beta
// (LibTorch's LocalResponseNorm(size, alpha', beta, k) is the same with
// size = 2 * depth_radius + 1 and alpha' = alpha * size.) Defaults are
// tf.nn.lrn's. Differentiable. CPU float32 contiguous input runs the fused
// kernel (LocalResponseNormFused), anything else the composite of LibTorch
// ops (LocalResponseNormComposite).
torch::Tensor LocalResponseNorm(const torch::Tensor& x,
                                int64_t depth_radius = 5, double bias = 1.0,
                                double alpha = 1.0, double beta = 0.5);

// LocalResponseNorm from LibTorch ops (the window's sum of squares as one
// matrix product with a band matrix): any device, floating dtype and
// memory order, differentiable to any order.
torch::Tensor LocalResponseNormComposite(const torch::Tensor& x,
                                         int64_t depth_radius, double bias,
                                         double alpha, double beta);

// LocalResponseNorm as one hand-written CPU pass forward and one backward
// (TensorFlow's LRN gradient), threaded with at::parallel_for over the
// N*H*W positions. Precondition: x is a CPU float32 tensor [N, C, H, W]
// (made contiguous if it is not). First-order gradients only: the backward
// pass is not itself differentiable (no double backward).
torch::Tensor LocalResponseNormFused(const torch::Tensor& x,
                                     int64_t depth_radius, double bias,
                                     double alpha, double beta);

}  // namespace nets
}  // namespace slimtorch
