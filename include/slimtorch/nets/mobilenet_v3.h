#pragma once
// MobileNet v3 and MobileNet-EdgeTPU as TF-Slim's
// nets/mobilenet/mobilenet_v3.py (on mobilenet.py's conv-def machinery and
// conv_blocks.py's expanded_conv / squeeze_excite), registered with
// nets_factory's names:
//   mobilenet_v3_large, mobilenet_v3_small,
//   mobilenet_v3_large_minimalistic, mobilenet_v3_small_minimalistic
//     (scope "MobilenetV3"),
//   mobilenet_edgetpu, mobilenet_edgetpu_075 (scope "MobilenetEdgeTPU";
//     _075: depth multiplier 0.75 with finegrain_classification_mode, so
//     the last layer keeps its 1280 channels).
// Default 224x224, 1001 classes for Google's checkpoints.
//
// The spec (mobilenet_v3.cc's tables): "Conv" 3x3/2 → expanded convs
// ("expanded_conv", "expanded_conv_1", ...) → "Conv_1" 1x1 (batch norm) →
// V3 only: "AvgPool2D" (reduce_to_1x1: a k x k VALID average pool, k = H
// for square maps, else 7) and "Conv_2" 1x1 (biases, no batch norm).
// Output depths: _make_divisible(d * multiplier, 8). An expanded conv of
// input depth C, expansion E = _make_divisible(C * factor, 8):
//   "expand" 1x1 (k x k with the stride in EdgeTPU's fused blocks; only
//   when E > C) → "depthwise" k x k with the stride (not in fused blocks)
//   → V3's "squeeze_excite" (spatial mean → "Conv" 1x1 to
//   _make_divisible(E / 4, 8), biases, ReLU → "Conv_1" 1x1 to E, biases,
//   gate relu6(x + 3) * 0.16667 → times its input) → "project" 1x1
//   (linear) → + input when the stride is 1, the depths match and the block
//   is residual (EdgeTPU's expanded_conv_13 is not).
// Activations: ReLU, or hard_swish x * relu6(x + 3) * (1/6) where the spec
// says so (V3 large / small). Every conv but the squeeze-excite ones,
// Conv_2 and the logits: batch norm (decay 0.997, epsilon 0.001, gamma and
// beta). training_scope: truncated_normal(0.09) weights, zero biases, L2 of
// NetOptions::weight_decay on every conv2d (squeeze-excite, Conv_2 and
// logits included) but not on depthwise weights; dropout keep 0.8.
// Head ("Logits"): global average pool (end point global_pool [N, C, 1, 1])
// → Dropout → Conv2d_1c_1x1 num_classes (biases, no batch norm) → squeezed
// → Predictions. num_classes == 0 returns global_pool.
// End points, in TF-Slim's order: layer_1 .. layer_N (each spec op's
// output; N = 19 large, 15 small, 24 EdgeTPU), then layer_k/
// expansion_output, layer_k/depthwise_output and layer_k/output of the
// expanded convs that have them, then global_pool, Logits, Predictions.
// Image sizes: any square size; non-square images as TF-Slim (the 7x7
// reduce_to_1x1 window must fit the last map).

#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

// mobilenet_v3's hard_swish, x * relu6(x + 3) * (1/6). While a layer trace
// takes the ops or a quantizer is active (nets/quantize.h): those ops
// (AddConstant, Relu6, Mul, Scale); otherwise one LibTorch op (the same
// values within a float rounding).
torch::Tensor HardSwish(const torch::Tensor& x);

// One V3 expanded conv's settings (its input and output depths included).
struct V3BlockOptions {
  int64_t in = 0, expansion = 0, out = 0, kernel = 3, stride = 1;
  bool hard_swish = false;  // else ReLU in the expansion and depthwise
  bool squeeze_excite = false;
  bool fused = false;  // EdgeTPU: a k x k expansion, no depthwise
  bool residual = true;
  double weight_decay = 0;
};

// conv_blocks.squeeze_excite with mobilenet_v3's settings (squeeze factor
// 4, ReLU inside, hard-sigmoid gate relu6(x + 3) * 0.16667).
class SqueezeExciteImpl : public torch::nn::Cloneable<SqueezeExciteImpl> {
 public:
  SqueezeExciteImpl(int64_t channels, double weight_decay);
  void reset() override;
  // x: [N, channels, H, W] → x times its per-channel gate.
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t channels_;
  double weight_decay_;
  Conv2d squeeze_{nullptr}, excite_{nullptr};
};
TORCH_MODULE(SqueezeExcite);

// One expanded_conv of a V3 spec.
class V3ExpandedConvImpl : public torch::nn::Cloneable<V3ExpandedConvImpl> {
 public:
  explicit V3ExpandedConvImpl(const V3BlockOptions& options);
  void reset() override;
  // x: [N, in, H, W]. Appends "<prefix>/expansion_output" (when
  // expanded), "<prefix>/depthwise_output" (when not fused) and
  // "<prefix>/output" to `outputs`.
  torch::Tensor forward(
      const torch::Tensor& x, const std::string& prefix,
      std::vector<std::pair<std::string, torch::Tensor>>& outputs);

 private:
  torch::Tensor Activate(torch::Tensor x) const;

  V3BlockOptions o_;
  Conv2d expand_{nullptr}, depthwise_{nullptr}, project_{nullptr};
  SqueezeExcite se_{nullptr};
};
TORCH_MODULE(V3ExpandedConv);

// Which of mobilenet_v3.py's conv defs.
enum class MobileNetV3Spec {
  kLarge,
  kSmall,
  kLargeMinimalistic,
  kSmallMinimalistic,
  kEdgeTpu
};

class MobileNetV3Impl : public torch::nn::Cloneable<MobileNetV3Impl> {
 public:
  static constexpr int64_t kDefaultImageSize = 224;

  // finegrain: finegrain_classification_mode (the last spec op keeps its
  // depth whatever the multiplier).
  MobileNetV3Impl(MobileNetV3Spec spec, double depth_multiplier,
                  bool finegrain, const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;
  // "MobilenetV3" or "MobilenetEdgeTPU".
  const char* scope() const;

 private:
  void BuildHead(int64_t c);
  torch::Tensor HeadConv(Conv2d conv, const torch::Tensor& x) const;
  torch::Tensor ReduceTo1x1(const torch::Tensor& x) const;

  MobileNetV3Spec spec_;
  double multiplier_;
  bool finegrain_;
  NetOptions options_;
  bool head_hard_swish_ = false;
  Conv2d conv_{nullptr}, conv_1_{nullptr}, conv_2_{nullptr},
      logits_{nullptr};
  std::vector<V3ExpandedConv> blocks_;
};
TORCH_MODULE(MobileNetV3);

}  // namespace nets
}  // namespace slimtorch
