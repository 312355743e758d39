#pragma once
// Inception-ResNet-v2 as TF-Slim's nets/inception_resnet_v2.py (scope
// "InceptionResnetV2", default 299x299, 1001 classes for Google's checkpoint;
// output_stride 16, align_feature_maps False).
//
// Stem ('VALID' unless noted): Conv2d_1a_3x3 32 /2 → Conv2d_2a_3x3 32 →
// Conv2d_2b_3x3 64 'SAME' → MaxPool_3a_3x3 /2 → Conv2d_3b_1x1 80 →
// Conv2d_4a_3x3 192 → MaxPool_5a_3x3 /2 → Mixed_5b (35x35x320 at 299). Then
// 10 x block35 (scale 0.17; variables "Repeat/block35_1" .. "_10"), Mixed_6a
// (17x17x1088), 20 x block17 (scale 0.10, "Repeat_1/block17_i") → end point
// PreAuxLogits, Mixed_7a (8x8x2080), 9 x block8 (scale 0.20,
// "Repeat_2/block8_i"), "Block8" (scale 1, no activation), Conv2d_7b_1x1 1536.
// A block: branches concatenated → "Conv2d_1x1" back to the input depth
// (biases, no batch norm / activation) → net + scale * that → ReLU.
// Every other conv: batch norm (decay 0.9997, epsilon 0.001, no gamma) + ReLU,
// slim's default xavier weights; L2 of NetOptions::weight_decay on weights
// and biases (inception_resnet_v2_arg_scope).
// AuxLogits (from PreAuxLogits, when num_classes > 0): "Conv2d_1a_3x3" (an
// average pool 5x5 /3 VALID) → Conv2d_1b_1x1 128 → Conv2d_2a_5x5 768 VALID
// with a kernel as large as the map (5x5 at 299: its shape follows
// NetOptions::image_size) → flatten → Logits (fully connected, biases) →
// NetOutput::aux_logits.
// Logits: AvgPool_1a_8x8 (VALID, kernel = the whole map) → global_pool
// [N, 1536, 1, 1] → flatten → Dropout (keep 0.8) → PreLogitsFlatten →
// Logits (fully connected num_classes) → Predictions.
// num_classes == 0 returns global_pool and no aux logits.
// Image sizes: any from 75 when num_classes is 0; with logits, at least 107
// and only the size the net was built for (NetOptions::image_size).

#include <string>
#include <vector>

#include "slimtorch/nets/inception_blocks.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

class InceptionResnetV2Impl
    : public torch::nn::Cloneable<InceptionResnetV2Impl> {
 public:
  static constexpr const char* kScope = "InceptionResnetV2";
  static constexpr int64_t kDefaultImageSize = 299;

  explicit InceptionResnetV2Impl(const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;

 private:
  // The auxiliary head on the `pre_aux` channels of PreAuxLogits and the
  // logits on the last `c`; none without classes.
  void ResetHeads(int64_t pre_aux, int64_t c, const InceptionConvStyle& style);

  NetOptions options_;
  int64_t image_size_;
  // In order, with their end-point names ("" for blocks that have none).
  InceptionChain stem_;
  std::vector<std::pair<std::string, InceptionMixed>> blocks_;
  Conv2d conv_7b_{nullptr};
  InceptionAuxHead aux_{nullptr};
  FullyConnected logits_{nullptr};
};
TORCH_MODULE(InceptionResnetV2);

}  // namespace nets
}  // namespace slimtorch
