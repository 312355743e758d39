#pragma once
// Inception v3 as TF-Slim's nets/inception_v3.py (scope "InceptionV3",
// default 299x299, 1001 classes for Google's checkpoints).
//
// Stem (stride 1, 'VALID' unless noted): Conv2d_1a_3x3 32 /2 → Conv2d_2a_3x3
// 32 → Conv2d_2b_3x3 64 'SAME' → MaxPool_3a_3x3 /2 → Conv2d_3b_1x1 80 →
// Conv2d_4a_3x3 192 → MaxPool_5a_3x3 /2; then Mixed_5b..5d, 6a..6e, 7a..7c
// ('SAME' unless noted), each a concat of branches of convs and pools
// (kInceptionV3Blocks in inception_v3.cc, with TF-Slim's scope names and
// quirks: Mixed_5c/Branch_1/Conv_1_0c_5x5, Mixed_6a's 3x3 "Conv2d_1a_1x1",
// Mixed_7b/7c's split 1x3 / 3x1 convs). Every conv: batch norm (decay
// 0.9997, epsilon 0.001, no gamma) + ReLU, variance-scaling weights, L2 of
// NetOptions::weight_decay.
// AuxLogits (from Mixed_6e, when num_classes > 0): AvgPool_1a_5x5 /3 VALID →
// Conv2d_1b_1x1 128 → Conv2d_2a_5x5 768 VALID (truncated_normal(0.01); the
// kernel shrinks to a smaller map: its shape, and its scope's name
// "Conv2d_2a_KxK", follow NetOptions::image_size) → Conv2d_2b_1x1 num_classes (biases, no
// batch norm / activation, truncated_normal(0.001)) → squeezed; returned as
// NetOutput::aux_logits (train_image_classifier adds it to the loss with
// weight 0.4).
// Logits: AvgPool_1a_8x8 (VALID, stride 2; the kernel shrinks to a smaller
// map) → Dropout_1b (keep 0.8) → end point PreLogits → Conv2d_1c_1x1
// num_classes (biases) → squeezed → Predictions.
// num_classes == 0 returns PreLogits [N, 2048, 1, 1] and no aux logits.
// Image sizes: at least 75 (the stem's VALID convs) and at most 330 so that
// the final average pool leaves 1x1 for TF-Slim's squeeze (any larger with
// NetOptions::global_pool); with logits, 107 to 330 (AuxLogits), and only
// sizes giving the aux map the net was built for (NetOptions::image_size:
// 299 to 330 for the default).

#include <string>
#include <vector>

#include "slimtorch/nets/inception_blocks.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

class InceptionV3Impl : public torch::nn::Cloneable<InceptionV3Impl> {
 public:
  static constexpr const char* kScope = "InceptionV3";
  static constexpr int64_t kDefaultImageSize = 299;

  explicit InceptionV3Impl(const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;

 private:
  NetOptions options_;
  // AuxLogits/Conv2d_2a_5x5's kernel: 5, or the pooled map's size when
  // smaller (from NetOptions::image_size).
  int64_t aux_kernel_ = 5;
  InceptionChain stem_;
  std::vector<std::pair<std::string, InceptionMixed>> mixed_;
  Conv2d aux_conv1_{nullptr}, aux_conv2_{nullptr}, aux_logits_{nullptr};
  Conv2d logits_{nullptr};
};
TORCH_MODULE(InceptionV3);

}  // namespace nets
}  // namespace slimtorch
