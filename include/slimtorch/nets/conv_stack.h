#pragma once
// The plain convolutional classifiers of TF-Slim: alexnet_v2
// (nets/alexnet.py), overfeat (nets/overfeat.py) and vgg_a / vgg_16 /
// vgg_19 (nets/vgg.py). Each is a stack of conv / max-pool layers followed by
// fully-connected layers written as convolutions, as in TF-Slim:
//   fc6 conv kxk (VALID) ReLU → dropout6 → fc7 conv 1x1 ReLU → dropout7 →
//   fc8 conv 1x1 num_classes (no activation) → squeezed to [N, classes].
// No batch norm. Every conv (fc8 included) has biases and an L2 regularizer
// of NetOptions::weight_decay (the arg scopes' weights_regularizer); weights
// are xavier-initialised except where a net overrides it (alexnet_v2 and
// overfeat: fc6-fc8 truncated_normal(0.005)).
//
// Variable names are TF-Slim's ("vgg_16/conv1/conv1_1/weights",
// "alexnet_v2/fc6/biases"); end points are keyed by full scope names as
// TF-Slim's end_points_collection does ("vgg_16/conv3/conv3_2",
// "vgg_16/pool3", "vgg_16/fc8"); there is no "Predictions" end point.
// num_classes == 0 returns fc7's output ([N, 4096, 1, 1], NCHW of TF's
// [N, 1, 1, 4096]) without dropout7/fc8.
//
// Image sizes: any size for which every VALID window fits and fc6 leaves a
// 1x1 map (TF-Slim's spatial_squeeze fails otherwise), or any larger one
// with NetOptions::global_pool (fc7 averaged, end point "global_pool");
// CheckImageSize()
// says which sizes work before any work is done.

#include <memory>
#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

struct ConvStackSpec {
  struct Layer {
    // "conv1/conv1_1" (a repeat block's layer) or "conv1"; "poolN" for a
    // max pool.
    std::string name;
    bool pool = false;
    int64_t out_channels = 0;  // conv only
    int64_t kernel = 3;
    int64_t stride = 1;
    Padding padding = Padding::kSame;
  };
  std::string scope;
  int64_t default_image_size = 224;
  std::vector<Layer> features;
  int64_t fc6_channels = 4096;
  int64_t fc6_kernel = 7;
  int64_t fc7_channels = 4096;
  // Initializers of the feature convs and of fc6/fc7 (fc8: head weights,
  // zero biases).
  Initializer conv_weights = Initializer::XavierUniform();
  Initializer conv_biases = Initializer::Zeros();
  Initializer head_weights = Initializer::XavierUniform();
  Initializer head_biases = Initializer::Zeros();
  double dropout_keep_prob = 0.5;
};

// The specs of the registered nets (see conv_stack.cc for each one's source).
ConvStackSpec AlexNetV2Spec();
ConvStackSpec OverFeatSpec();
ConvStackSpec VggSpec(const std::string& name);  // vgg_a, vgg_16, vgg_19

class ConvStackNetImpl : public torch::nn::Cloneable<ConvStackNetImpl> {
 public:
  ConvStackNetImpl(ConvStackSpec spec, const NetOptions& options);
  void reset() override;
  // images: [N, input_channels, S, S] float with S accepted by
  // CheckImageSize.
  NetOutput forward(const torch::Tensor& images);

  // Throws, naming the net and the layer, unless `size` x `size` images go
  // through every layer and leave fc6 with a 1x1 map.
  void CheckImageSize(int64_t size) const;

  const ConvStackSpec& spec() const { return spec_; }
  int64_t input_channels() const { return options_.input_channels(); }

 private:
  ConvStackSpec spec_;
  NetOptions options_;
  // One entry per spec_.features layer; null for pools.
  std::vector<Conv2d> features_;
  Conv2d fc6_{nullptr};
  Conv2d fc7_{nullptr};
  Conv2d fc8_{nullptr};
};
TORCH_MODULE(ConvStackNet);

}  // namespace nets
}  // namespace slimtorch
