#pragma once
// The building blocks shared by the Inception family (inception_v2, v3, v4,
// inception_resnet_v2): a "Mixed" block is branches "Branch_0", "Branch_1",
// ... on the same input, each a chain of convs and pools, concatenated along
// channels; an Inception-ResNet block also projects the concatenation back to
// the input's depth with a 1x1 conv ("Conv2d_1x1", biases, no batch norm or
// activation), adds it scaled to the input and applies the activation.
// Blocks are data: tables of InceptionOp with TF-Slim's scope names.

#include <string>
#include <utility>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

// One op of a branch.
struct InceptionOp {
  enum class Kind { kConv, kMaxPool, kAvgPool, kSplit } kind = Kind::kConv;
  std::string scope;
  int64_t out = 0;
  int64_t kh = 1, kw = 1;
  int64_t stride = 1;
  Padding padding = Padding::kSame;
  // > 0: truncated_normal(init_stddev) weights; 0: the family's initializer.
  double init_stddev = 0.0;
  // kSplit: a second conv on the same input (scope2, kh2 x kw2), the two
  // outputs concatenated (inception_v3/v4's 1x3 | 3x1 pairs).
  std::string scope2;
  int64_t kh2 = 1, kw2 = 1;
};
using InceptionBranch = std::vector<InceptionOp>;

// A conv op: `out` channels, kh x kw, stride, padding.
InceptionOp InceptionConv(const std::string& scope, int64_t out, int64_t kh,
                          int64_t kw, int64_t stride = 1,
                          Padding padding = Padding::kSame);
// A kMaxPool / kAvgPool op with a k x k window.
InceptionOp InceptionPool(InceptionOp::Kind kind, const std::string& scope,
                          int64_t k, int64_t stride = 1,
                          Padding padding = Padding::kSame);
// A 1x3 conv `scope_1x3` and a 3x1 conv `scope_3x1` on the same input, `out`
// channels each, concatenated (2 * out channels).
InceptionOp InceptionSplit(const std::string& scope_1x3,
                           const std::string& scope_3x1, int64_t out);

// A family's arg scope for its convs: every conv has batch norm (beta only)
// and ReLU, no biases.
struct InceptionConvStyle {
  // inception_arg_scope: variance_scaling_initializer(); inception_resnet_v2
  // keeps slim's xavier_initializer().
  Initializer weights_init = Initializer::VarianceScaling();
  double bn_decay = 0.9997;
  double bn_epsilon = 0.001;
  // L2 on conv weights (and, with regularize_biases, on the biases of the
  // Inception-ResNet projections and the fully-connected logits).
  double weight_decay = 0.0;
  bool regularize_biases = false;

  // The options of a kh x kw conv from `in` to `out` channels.
  Conv2dOptions Conv(int64_t in, int64_t out, int64_t kh, int64_t kw) const;
};

// The residual part of an Inception-ResNet block: net + scale * up, then
// ReLU unless `activation` is false (the last Block8).
struct InceptionResidual {
  double scale = 1.0;
  bool activation = true;
};

class InceptionMixedImpl : public torch::nn::Cloneable<InceptionMixedImpl> {
 public:
  InceptionMixedImpl(int64_t in_channels, std::vector<InceptionBranch> branches,
                     InceptionConvStyle style,
                     c10::optional<InceptionResidual> residual = c10::nullopt);
  void reset() override;
  // x: [N, in_channels, H, W] → [N, out_channels(), H', W'].
  torch::Tensor forward(const torch::Tensor& x);
  int64_t out_channels() const { return out_; }

 private:
  int64_t in_;
  std::vector<InceptionBranch> branches_;
  InceptionConvStyle style_;
  c10::optional<InceptionResidual> residual_;
  int64_t out_ = 0;
  // Per branch, per op: the conv(s) (null for pools; two for a split).
  std::vector<std::vector<std::pair<Conv2d, Conv2d>>> convs_;
  Conv2d up_{nullptr};
};
TORCH_MODULE(InceptionMixed);

// A plain chain of convs and pools registered straight on a net (its stem),
// each op's output an end point named after its scope.
class InceptionChain {
 public:
  // Registers the convs of `ops` on `parent` under their scopes; returns the
  // output depth.
  int64_t Build(torch::nn::Module& parent, int64_t in_channels,
                InceptionBranch ops, const InceptionConvStyle& style);
  // Appends every op's output to `end_points`.
  torch::Tensor Forward(const torch::Tensor& x, EndPoints& end_points);

 private:
  InceptionBranch ops_;
  std::vector<Conv2d> convs_;  // null for pools
};

// inception_v3's and inception_resnet_v2's stem: Conv2d_1a_3x3 32 /2,
// Conv2d_2a_3x3 32, Conv2d_2b_3x3 64 'SAME', MaxPool_3a_3x3 /2,
// Conv2d_3b_1x1 80, Conv2d_4a_3x3 192, MaxPool_5a_3x3 /2 ('VALID' unless
// noted). inception_v4's is its first three convs.
InceptionBranch InceptionStem();

// Inception v4's and Inception-ResNet-v2's auxiliary head on a
// [N, in_channels, m, m] map: an average pool 5x5 /3 'VALID' (scope
// `pool_scope`, no variables) → Conv2d_1b_1x1 128 → a 768 'VALID' conv as
// large as the pooled map (scope `conv_scope`; kernel = ValidSize(m, 5, 3))
// → flatten → fully connected num_classes (scope `logits_scope`, biases).
class InceptionAuxHeadImpl : public torch::nn::Cloneable<InceptionAuxHeadImpl> {
 public:
  InceptionAuxHeadImpl(int64_t in_channels, int64_t map_size,
                       int64_t num_classes, InceptionConvStyle style,
                       Initializer fc_init, std::string conv_scope,
                       std::string logits_scope);
  void reset() override;
  // x: [N, in_channels, map_size, map_size] → [N, num_classes].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t in_, map_size_, num_classes_;
  InceptionConvStyle style_;
  Initializer fc_init_;
  std::string conv_scope_, logits_scope_;
  Conv2d conv1_{nullptr}, conv2_{nullptr};
  FullyConnected logits_{nullptr};
};
TORCH_MODULE(InceptionAuxHead);

// TensorFlow's output size of a 'VALID' window k / stride s on `in` pixels
// (0 when the window does not fit).
inline int64_t ValidSize(int64_t in, int64_t k, int64_t s) {
  return in < k ? 0 : (in - k) / s + 1;
}

// For nets with InceptionAuxHead (inception_v4, inception_resnet_v2): the
// image size the net is built for (NetOptions::image_size, or 299), after
// checking that its aux head fits (the "17x17" grid, named `grid`, at least
// 5x5: images of 107 or more). `net` is the scope, for messages.
int64_t InceptionAuxImageSize(const NetOptions& options,
                              const std::string& net, const std::string& grid);
// Throws unless such a net, built for `built` x `built` images, takes
// size x size ones: the VALID stem and reductions fit, and with logits, the
// size is the one the aux head (its conv scope `aux_conv`) was built for.
void CheckInceptionAuxNetSize(const NetOptions& options, const std::string& net,
                              const std::string& aux_conv, int64_t built,
                              int64_t size);

// Sizes of the "17x17" and "8x8" grids (at 299) of inception_v3, v4 and
// inception_resnet_v2 for size x size images: their VALID stems make 35x35
// at 299, then two VALID 3x3 /2 reductions. 0 when a window does not fit.
std::pair<int64_t, int64_t> InceptionGridSizes(int64_t size);

}  // namespace nets
}  // namespace slimtorch
