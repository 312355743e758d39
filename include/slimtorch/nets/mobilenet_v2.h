#pragma once
// MobileNet v2 as TF-Slim's nets/mobilenet/mobilenet_v2.py (scope
// "MobilenetV2", default 224x224, 1001 classes for Google's checkpoints),
// registered as mobilenet_v2 (depth multiplier 1), mobilenet_v2_140 (1.4)
// and mobilenet_v2_035 (0.35, finegrain_classification_mode: the last
// layer keeps its 1280 channels).
//
// V2_DEF: "Conv" 3x3/2 32 → 17 expanded convs ("expanded_conv",
// "expanded_conv_1" .. "_16") with (expansion, outputs, stride):
// (1,16,1) (6,24,2) (6,24,1) (6,32,2) (6,32,1)x2 (6,64,2) (6,64,1)x3
// (6,96,1)x3 (6,160,2) (6,160,1)x2 (6,320,1) → "Conv_1" 1x1 1280.
// Depths: _make_divisible(d * multiplier, 8) (at least 8, never below 90%
// of d * multiplier). An expanded conv: "expand" 1x1 to expansion * input
// depth (skipped when that is not larger than the input) → "depthwise" 3x3
// with the stride → "project" 1x1 (linear) → + input when the stride is 1 and
// the depths match. Every conv: 'SAME', batch norm (decay 0.997, epsilon
// 0.001, gamma and beta) + ReLU6 (none after project), truncated_normal(0.09)
// weights, L2 of NetOptions::weight_decay except on depthwise weights
// (training_scope).
// Head ("Logits"): global average pool (end point global_pool [N, C, 1, 1])
// → Dropout (keep 0.8) → Conv2d_1c_1x1 num_classes (biases, no batch norm)
// → squeezed → Predictions. num_classes == 0 returns global_pool.
// End points: layer_1 .. layer_19 (each op's output), layer_k/
// expansion_output, layer_k/depthwise_output and layer_k/output of expanded
// convs, global_pool, Logits, Predictions.
// Image sizes: any (the head pools the whole map).

#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

// One expanded_conv (inverted residual) block.
class ExpandedConvImpl : public torch::nn::Cloneable<ExpandedConvImpl> {
 public:
  // `expansion`: the expansion layer's depth (<= in: no expansion layer).
  ExpandedConvImpl(int64_t in, int64_t expansion, int64_t out, int64_t stride,
                   double weight_decay);
  void reset() override;
  // x: [N, in, H, W]. Appends "<prefix>/expansion_output" (when expanded),
  // "<prefix>/depthwise_output" and "<prefix>/output" to `end_points`.
  torch::Tensor forward(
      const torch::Tensor& x, const std::string& prefix,
      EndPoints& end_points);

 private:
  int64_t in_, expansion_, out_, stride_;
  double weight_decay_;
  Conv2d expand_{nullptr}, depthwise_{nullptr}, project_{nullptr};
};
TORCH_MODULE(ExpandedConv);

class MobileNetV2Impl : public torch::nn::Cloneable<MobileNetV2Impl> {
 public:
  static constexpr const char* kScope = "MobilenetV2";
  static constexpr int64_t kDefaultImageSize = 224;

  // finegrain: finegrain_classification_mode (Conv_1 keeps 1280 channels
  // when the multiplier is below 1).
  MobileNetV2Impl(double depth_multiplier, bool finegrain,
                  const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;

 private:
  double multiplier_;
  bool finegrain_;
  NetOptions options_;
  Conv2d conv_{nullptr}, conv_1_{nullptr}, logits_{nullptr};
  std::vector<ExpandedConv> blocks_;
};
TORCH_MODULE(MobileNetV2);

// mobilenet's _make_divisible(v, divisor, min_value): v rounded to the
// nearest multiple of `divisor` (at least min_value, default divisor), plus
// one divisor when that falls below 90% of v.
int64_t MakeDivisible(double v, int64_t divisor = 8, int64_t min_value = 0);

// mobilenet.py's logits layer "Logits/Conv2d_1c_1x1" (MobileNet v2 and v3):
// a 1x1 conv from `features` to `num_classes` channels, zero biases,
// truncated_normal(0.09) weights, L2 `weight_decay`, registered on `net`;
// null when num_classes is 0.
Conv2d RegisterMobileNetLogits(torch::nn::Module& net, int64_t features,
                               int64_t num_classes, double weight_decay);

// mobilenet.py's head on the last map x [N, C, H, W]: end point
// global_pool, then with `logits` Dropout (keep 0.8 when `training`), the
// logits squeezed to [N, classes], Logits and Predictions; without,
// out.logits = global_pool [N, C, 1, 1].
void MobileNetHead(const torch::Tensor& x, Conv2d logits, bool training,
                   NetOutput& out);

}  // namespace nets
}  // namespace slimtorch
