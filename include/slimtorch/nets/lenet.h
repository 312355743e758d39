#pragma once
// LeNet as TF-Slim's nets/lenet.py (scope "LeNet", default 28x28):
//   conv1 5x5x32 SAME ReLU → pool1 max 2x2/2 → conv2 5x5x64 → pool2 →
//   Flatten (7*7*64 = 3136, NHWC order) → fc3 1024 ReLU → dropout3 (keep
//   0.5, training only) → fc4 = logits (no activation) → Predictions softmax.
// lenet_arg_scope: weights truncated_normal(0.1), biases zeros,
// l2_regularizer(weight_decay) on conv and fc weights.
// End points: conv1 pool1 conv2 pool2 Flatten fc3 dropout3 Logits Predictions.

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

class LeNetImpl : public torch::nn::Cloneable<LeNetImpl> {
 public:
  static constexpr const char* kScope = "LeNet";
  static constexpr int64_t kDefaultImageSize = 28;

  LeNetImpl(const NetOptions& options, double dropout_keep_prob = 0.5);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }

 private:
  NetOptions options_;
  double dropout_keep_prob_;
  Conv2d conv1_{nullptr};
  Conv2d conv2_{nullptr};
  FullyConnected fc3_{nullptr};
  FullyConnected fc4_{nullptr};
};
TORCH_MODULE(LeNet);

}  // namespace nets
}  // namespace slimtorch
