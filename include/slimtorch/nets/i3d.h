#pragma once
// The video nets I3D and S3D-G as TF-Slim's nets/i3d.py and nets/s3dg.py on
// i3d_utils.py (one base, s3dg_base; scope "InceptionV1", default 224x224,
// 1000 classes: nets_factory's names "i3d" and "s3dg").
//
// Input: clips [N, C, T, H, W] (TF-Slim: [N, T, H, W, C]); TF-Slim's code
// sets no default frame count: ours is 64, its tests' (NetOptions::
// num_frames chooses another). Every conv is slim.conv3d + batch norm (decay
// 0.999, epsilon 0.001, beta only) + ReLU with truncated_normal(0.01)
// weights, stride 1 and 'SAME' unless noted; L2 of NetOptions::weight_decay
// (TF-Slim's arg scopes: 1e-7) on every conv's weights.
// Base: Conv2d_1a_7x7 64 [t, 7, 7] /2 along every axis (I3D t = 7, S3D-G 3)
// → MaxPool_2a_3x3 [1, 3, 3] /[1, 2, 2] → Conv2d_2b_1x1 64 → Conv2d_2c_3x3
// 192 [3, 3, 3] → MaxPool_3a_3x3 [1, 3, 3] /[1, 2, 2] → Mixed_3b, 3c →
// MaxPool_4a_3x3 [3, 3, 3] /2 → Mixed_4b..4f → MaxPool_5a_2x2 [2, 2, 2] /2 →
// Mixed_5b, 5c (64 frames at 224: [N, 1024, 8, 7, 7]). A Mixed block
// concatenates Branch_0 (Conv2d_0a_1x1), Branch_1 and Branch_2
// (Conv2d_0a_1x1 → Conv2d_0b_3x3 [3, 3, 3]) and Branch_3 (MaxPool_0a_3x3
// [3, 3, 3] → Conv2d_0b_1x1).
// S3D-G from Conv2d_2c_3x3 on: every [3, k, k] conv is separable, a [1, k, k]
// conv (batch norm, ReLU) then "<scope>/temporal" [3, 1, 1] (biases, no
// batch norm, ReLU, weights the identity at the centre tap); and
// Conv2d_2c_3x3 and each branch's last conv are self-gated: the mean over
// T, H and W → "<scope>/self_gating/transformer_W" 1x1x1 C → C (no biases,
// truncated_normal(0.01)) → sigmoid → times the input.
// Head ("Logits"): AvgPool_0a_7x7 [min(2, T), min(7, H), min(7, W)] 'VALID'
// → Dropout_0b (keep 0.8) → Conv2d_0c_1x1 num_classes (xavier weights,
// biases, no batch norm, no activation) → the mean over time → squeezed →
// Predictions. num_classes == 0 returns the pooled features
// [N, 1024, T', 1, 1].
// End points: the base's layer names, then Logits and Predictions.
// Sizes: square clips of 1..224 pixels (the head's squeeze needs Mixed_5c at
// 7x7 or less; S3D-G's gating pools a [T, W, H] window, which TensorFlow
// builds for square clips only), any number of frames.

#include <string>
#include <utility>
#include <vector>

#include "slimtorch/nets/convolution3d.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

// What tells I3D and S3D-G apart (s3dg_base's arguments as each calls it).
struct VideoNetConfig {
  int64_t first_temporal_kernel;  // Conv2d_1a_7x7's kt
  bool separable;                 // [3, k, k] convs split in two
  bool gating;                    // self-gating from Conv2d_2c_3x3 on
};

// One conv3d_spatiotemporal of the base, with its self-gating: the conv
// (batch norm, ReLU), the separable conv's temporal half and the gate's
// transformer, the latter two null where absent.
struct SpatioTemporalConv {
  Conv3d conv{nullptr}, temporal{nullptr}, gate{nullptr};
  torch::Tensor operator()(const torch::Tensor& x);
  // Its modules under TF-Slim's names for a conv scoped `scope`.
  NamedModules Named(const std::string& scope) const;
};

// One Mixed block of I3D / S3D-G (i3d_utils.inception_block_v1_3d).
class I3dMixedImpl : public torch::nn::Cloneable<I3dMixedImpl> {
 public:
  struct Depths {
    int64_t b0, b1a, b1b, b2a, b2b, b3;
  };
  I3dMixedImpl(int64_t in_channels, Depths depths, VideoNetConfig config,
               double weight_decay);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  int64_t out_channels() const { return d_.b0 + d_.b1b + d_.b2b + d_.b3; }

 private:
  int64_t in_;
  Depths d_;
  VideoNetConfig config_;
  double weight_decay_;
  SpatioTemporalConv b0_, b1a_, b1b_, b2a_, b2b_, b3_;
};
TORCH_MODULE(I3dMixed);

class I3dImpl : public torch::nn::Cloneable<I3dImpl> {
 public:
  static constexpr const char* kScope = "InceptionV1";
  static constexpr int64_t kDefaultImageSize = 224;
  // The frames a clip has unless NetOptions::num_frames says otherwise.
  static constexpr int64_t kDefaultNumFrames = 64;

  I3dImpl(const NetOptions& options, VideoNetConfig config,
          double dropout_keep_prob = 0.8);
  void reset() override;
  // clips: [N, C, T, H, W].
  NetOutput forward(const torch::Tensor& clips);
  int64_t input_channels() const { return options_.input_channels(); }
  int64_t num_frames() const {
    return options_.num_frames() > 0 ? options_.num_frames()
                                     : kDefaultNumFrames;
  }
  void CheckImageSize(int64_t size) const;

 private:
  void CheckClips(const torch::Tensor& clips) const;
  torch::Tensor Head(torch::Tensor net, NetOutput& out);

  NetOptions options_;
  VideoNetConfig config_;
  double dropout_keep_prob_;
  SpatioTemporalConv conv1a_, conv2b_, conv2c_;
  std::vector<std::pair<std::string, I3dMixed>> mixed_;
  Conv3d logits_{nullptr};
};
TORCH_MODULE(I3d);

}  // namespace nets
}  // namespace slimtorch
