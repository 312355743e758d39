#pragma once
// Inception v4 as TF-Slim's nets/inception_v4.py (scope "InceptionV4",
// default 299x299, 1001 classes for Google's checkpoint), after Szegedy et
// al. 2016, "Inception-v4, Inception-ResNet and the Impact of Residual
// Connections on Learning".
//
// Stem ('VALID' unless noted): Conv2d_1a_3x3 32 /2 → Conv2d_2a_3x3 32 →
// Conv2d_2b_3x3 64 'SAME' → Mixed_3a (max pool /2 | conv 96 /2) → Mixed_4a
// (1x1 64 → 3x3 96 | 1x1 64 → 1x7 64 → 7x1 64 → 3x3 96) → Mixed_5a (conv 192
// /2 | max pool /2): 35x35x384 at 299. Then 4 Inception-A blocks
// (Mixed_5b..5e, 384 channels), Reduction-A (Mixed_6a → 17x17x1024), 7
// Inception-B blocks (Mixed_6b..6h), Reduction-B (Mixed_7a → 8x8x1536), 3
// Inception-C blocks (Mixed_7b..7d). Branch tables in inception_v4.cc.
// Every conv: batch norm (decay 0.9997, epsilon 0.001, no gamma) + ReLU,
// variance-scaling weights, L2 of NetOptions::weight_decay
// (inception_v4_arg_scope = inception_arg_scope).
// AuxLogits (from Mixed_6h, when num_classes > 0): AvgPool_1a_5x5 /3 VALID →
// Conv2d_1b_1x1 128 → Conv2d_2a 768 VALID with a kernel as large as the map
// (5x5 at 299: its shape follows NetOptions::image_size) → flatten →
// Aux_logits (fully connected, biases) → NetOutput::aux_logits.
// Logits: AvgPool_1a (VALID, kernel = the whole map) → end point
// global_pool [N, 1536, 1, 1] → flatten (PreLogitsFlatten) → Dropout_1b
// (keep 0.8) → Logits (fully connected num_classes, biases) → Predictions.
// Fully-connected layers: variance-scaling weights and L2 too.
// num_classes == 0 returns global_pool and no aux logits.
// Image sizes: any from 75 (the VALID stem and reductions) when num_classes
// is 0; with logits, at least 107 (Mixed_6h must be 5x5 or larger for
// AuxLogits) and only the size the net was built for (NetOptions::image_size).

#include <string>
#include <vector>

#include "slimtorch/nets/inception_blocks.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

class InceptionV4Impl : public torch::nn::Cloneable<InceptionV4Impl> {
 public:
  static constexpr const char* kScope = "InceptionV4";
  static constexpr int64_t kDefaultImageSize = 299;

  explicit InceptionV4Impl(const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;

 private:
  NetOptions options_;
  int64_t image_size_;
  InceptionChain stem_;
  std::vector<std::pair<std::string, InceptionMixed>> mixed_;
  InceptionAuxHead aux_{nullptr};
  FullyConnected logits_{nullptr};
};
TORCH_MODULE(InceptionV4);

}  // namespace nets
}  // namespace slimtorch
