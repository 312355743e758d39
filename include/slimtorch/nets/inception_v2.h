#pragma once
// Inception v2 (BN-Inception) as TF-Slim's nets/inception_v2.py (scope
// "InceptionV2", default 224x224, 1001 classes for Google's checkpoints).
//
// Conv2d_1a_7x7: separable conv 7x7/2 64 with depth multiplier 8 (biases,
// ReLU, no batch norm, truncated_normal(1.0), as slim.separable_conv2d falls
// outside the arg scope's normalizer) → MaxPool_2a_3x3 /2 → Conv2d_2b_1x1 64
// → Conv2d_2c_3x3 192 → MaxPool_3a_3x3 /2 → Mixed_3b, 3c, 4a (/2), 4b..4e,
// 5a (/2), 5b, 5c (InceptionMixed blocks, all 'SAME'; see inception_v2.cc).
// Convs: batch norm (decay 0.9997, epsilon 0.001, no gamma) + ReLU, L2 of
// NetOptions::weight_decay.
// Head ("Logits"): AvgPool_1a_7x7 (VALID, stride 2; smaller maps shrink the
// kernel) → Dropout_1b (keep 0.8) → Conv2d_1c_1x1 (biases) → squeezed →
// Predictions. num_classes == 0 returns the pooled features [N, 1024, 1, 1].
// Image sizes: up to 256 (Mixed_5c at most 8x8, so the pool leaves 1x1);
// any with NetOptions::global_pool (end point "global_pool").

#include <string>
#include <vector>

#include "slimtorch/nets/inception_v3.h"

namespace slimtorch {
namespace nets {

class InceptionV2Impl : public torch::nn::Cloneable<InceptionV2Impl> {
 public:
  static constexpr const char* kScope = "InceptionV2";
  static constexpr int64_t kDefaultImageSize = 224;

  explicit InceptionV2Impl(const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;

 private:
  NetOptions options_;
  SeparableConv2d conv1a_{nullptr};
  Conv2d conv2b_{nullptr}, conv2c_{nullptr};
  std::vector<std::pair<std::string, InceptionMixed>> mixed_;
  Conv2d logits_{nullptr};
};
TORCH_MODULE(InceptionV2);

}  // namespace nets
}  // namespace slimtorch
