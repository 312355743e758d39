#pragma once
// Inception v1 (GoogLeNet) as TF-Slim's nets/inception_v1.py (scope
// "InceptionV1", default 224x224, 1001 classes for Google's checkpoints).
//
// Base (stride 1, 'SAME' unless noted; every conv is conv + batch norm +
// ReLU with truncated_normal(0.01) weights): Conv2d_1a_7x7 64 /2 →
// MaxPool_2a_3x3 /2 → Conv2d_2b_1x1 64 → Conv2d_2c_3x3 192 → MaxPool_3a_3x3
// /2 → Mixed_3b, Mixed_3c → MaxPool_4a_3x3 /2 → Mixed_4b..4f →
// MaxPool_5a_2x2 /2 → Mixed_5b, Mixed_5c. A Mixed block concatenates
// Branch_0 (1x1), Branch_1 (1x1 → 3x3), Branch_2 (1x1 → 3x3) and Branch_3
// (3x3 max pool → 1x1) along the channels.
// Head ("Logits"): AvgPool_0a_7x7 (VALID) → Dropout_0b (keep 0.8) →
// Conv2d_0c_1x1 num_classes (variance-scaling weights, biases, no batch
// norm, no activation) → squeezed → Predictions.
// inception_arg_scope: L2 of NetOptions::weight_decay on every conv's
// weights; batch norm decay 0.9997, epsilon 0.001, beta only (no gamma).
// End points: the base's layer names, then Logits and Predictions.
// num_classes == 0 returns the average-pooled features [N, 1024, 1, 1].
// Image sizes: those that leave Mixed_5c 7x7 (193..224); any with
// NetOptions::global_pool (the mean over Mixed_5c, end point "global_pool").

#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

// One Mixed block of Inception v1.
class InceptionV1MixedImpl : public torch::nn::Cloneable<InceptionV1MixedImpl> {
 public:
  struct Depths {
    int64_t b0, b1a, b1b, b2a, b2b, b3;
  };
  // `b2b_scope`: the scope of Branch_2's 3x3 conv ("Conv2d_0b_3x3", but
  // "Conv2d_0a_3x3" in Mixed_5b, as TF-Slim names it).
  InceptionV1MixedImpl(int64_t in_channels, Depths depths,
                       std::string b2b_scope, double weight_decay);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  int64_t out_channels() const {
    return d_.b0 + d_.b1b + d_.b2b + d_.b3;
  }

 private:
  int64_t in_;
  Depths d_;
  std::string b2b_scope_;
  double weight_decay_;
  Conv2d b0_{nullptr}, b1a_{nullptr}, b1b_{nullptr}, b2a_{nullptr},
      b2b_{nullptr}, b3_{nullptr};
};
TORCH_MODULE(InceptionV1Mixed);

class InceptionV1Impl : public torch::nn::Cloneable<InceptionV1Impl> {
 public:
  static constexpr const char* kScope = "InceptionV1";
  static constexpr int64_t kDefaultImageSize = 224;

  explicit InceptionV1Impl(const NetOptions& options,
                           double dropout_keep_prob = 0.8);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;

 private:
  NetOptions options_;
  double dropout_keep_prob_;
  Conv2d conv1a_{nullptr}, conv2b_{nullptr}, conv2c_{nullptr};
  std::vector<std::pair<std::string, InceptionV1Mixed>> mixed_;
  Conv2d logits_{nullptr};
};
TORCH_MODULE(InceptionV1);

}  // namespace nets
}  // namespace slimtorch
