#pragma once
// MobileNet v1 as TF-Slim's nets/mobilenet_v1.py (scope "MobilenetV1",
// default 224x224, 1001 classes for Google's checkpoints), registered as
// mobilenet_v1 / _075 / _050 / _025 (depth multiplier 1, 0.75, 0.5, 0.25;
// depth(d) = max(int(d * multiplier), 8)).
//
// Conv2d_0: conv 3x3/2 32; then Conv2d_i (i = 1..13) = depthwise 3x3
// ("Conv2d_i_depthwise", one filter per channel, the stride) + pointwise 1x1
// ("Conv2d_i_pointwise") with (stride, depth): (1,64) (2,128) (1,128)
// (2,256) (1,256) (2,512) (1,512)x5 (2,1024) (1,1024). Every conv: 'SAME',
// batch norm (decay 0.9997, epsilon 0.001, gamma and beta) + ReLU6,
// truncated_normal(0.09) weights, L2 of NetOptions::weight_decay on the full
// and pointwise convs, not the depthwise ones (regularize_depthwise=False).
// Head ("Logits"): AvgPool_1a (7x7 VALID /2, or the map's size when smaller)
// → Dropout_1b (keep 0.999) → Conv2d_1c_1x1 num_classes (biases, no batch
// norm, no activation) → squeezed → Predictions.
// Variables: "MobilenetV1/Conv2d_0/weights", "MobilenetV1/Conv2d_1_depthwise/
// depthwise_weights" (TF [3, 3, C, 1], ours [C, 1, 3, 3]), ".../BatchNorm/
// gamma" ...; end points Conv2d_0, Conv2d_i_depthwise, Conv2d_i_pointwise,
// AvgPool_1a, Logits, Predictions. num_classes == 0 returns AvgPool_1a.
// Image sizes (any with NetOptions::global_pool, whose end point
// "global_pool" replaces AvgPool_1a): those leaving a map of at most 8x8 at
// Conv2d_13 (<= 256),
// so that AvgPool_1a gives 1x1 as TF-Slim's squeeze needs.

#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

class MobileNetV1Impl : public torch::nn::Cloneable<MobileNetV1Impl> {
 public:
  MobileNetV1Impl(double depth_multiplier, const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  void CheckImageSize(int64_t size) const;
  int64_t input_channels() const { return options_.input_channels(); }

 private:
  double multiplier_;
  NetOptions options_;
  // Conv2d_0, then depthwise / pointwise pairs, with their scope names.
  std::vector<std::pair<std::string, Conv2d>> layers_;
  Conv2d logits_{nullptr};
};
TORCH_MODULE(MobileNetV1);

}  // namespace nets
}  // namespace slimtorch
