#pragma once
// ResNet v1 and v2 as tf_slim's nets/resnet_v1.py and nets/resnet_v2.py
// (scopes "resnet_v1_50", _101, _152, _200 and "resnet_v2_50", ...; default
// 224x224; 1000 classes for v1's Caffe-converted checkpoints, 1001 for v2).
//
// Blocks block1..block4 of bottleneck units (depth 4·base, bottleneck base =
// 64, 128, 256, 512; units 3-4-6-3, 3-4-23-3, 3-8-36-3, 3-24-36-3; the
// stride 2 of blocks 1-3 in their last unit); conv2 of a unit is
// resnet_utils.conv2d_same (fixed padding for strides > 1). A shortcut is
// the input subsampled (1x1 max pool with the stride) when the depth is
// unchanged, else a 1x1 conv with the stride.
// v1: root conv1 7x7/2 (conv2d_same) + batch norm + ReLU → pool1 max 3x3/2
//   'SAME'; unit (unit_i/bottleneck_v1): shortcut conv + batch norm, conv1
//   1x1, conv2 3x3, conv3 1x1 (no activation), each with batch norm, output
//   ReLU(shortcut + residual).
// v2 (pre-activation): root conv1 7x7/2 with biases, no batch norm or
//   activation → pool1; unit (unit_i/bottleneck_v2): preact = batch norm +
//   ReLU of the input; shortcut conv (on preact, biases, no batch norm);
//   conv1 1x1 and conv2 3x3 on preact with batch norm + ReLU; conv3 1x1 with
//   biases, no batch norm; output shortcut + residual; after the blocks
//   "postnorm" (batch norm + ReLU).
// Head: global average pool → logits conv 1x1 (biases, no batch norm, no
// activation) → predictions (softmax).
// resnet_arg_scope: batch norm decay 0.997, epsilon 1e-5, gamma and beta;
// variance-scaling weights; L2 of NetOptions::weight_decay on every conv.
// End points (tf_slim's): "<scope>/conv1", each unit's shortcut (when a
// conv), conv1, conv2, conv3 and output ("<scope>/blockB/unit_U/
// bottleneck_vV[/...]"), each block's output, "<scope>/logits"
// ([N, classes, 1, 1]) and "predictions" (its softmax); logits are returned
// squeezed to [N, classes]. num_classes == 0 returns the pooled features
// [N, 2048, 1, 1]. Any image size works (global pooling).

#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

class BottleneckImpl : public torch::nn::Cloneable<BottleneckImpl> {
 public:
  // version: 1 (bottleneck_v1) or 2 (bottleneck_v2).
  BottleneckImpl(int version, int64_t in_channels, int64_t depth,
                 int64_t depth_bottleneck, int64_t stride,
                 double weight_decay);
  void reset() override;
  // Appends the unit's end points, named under `scope`.
  torch::Tensor forward(const torch::Tensor& x, const std::string& scope,
                        EndPoints* ep);

 private:
  int version_;
  int64_t in_, depth_, bottleneck_, stride_;
  double weight_decay_;
  BatchNorm preact_{nullptr};  // v2
  Conv2d shortcut_{nullptr}, conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
};
TORCH_MODULE(Bottleneck);

class ResNetImpl : public torch::nn::Cloneable<ResNetImpl> {
 public:
  // `name`: resnet_v1_50 ... resnet_v2_200.
  ResNetImpl(std::string name, const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  // Any positive size (global pooling).
  void CheckImageSize(int64_t size) const;

 private:
  std::string name_;
  int version_;
  NetOptions options_;
  Conv2d conv1_{nullptr};
  // Per block: its units.
  std::vector<std::vector<Bottleneck>> blocks_;
  BatchNorm postnorm_{nullptr};  // v2
  Conv2d logits_{nullptr};
};
TORCH_MODULE(ResNet);

}  // namespace nets
}  // namespace slimtorch
