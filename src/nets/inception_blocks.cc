#include "slimtorch/nets/inception_blocks.h"

#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

using Kind = InceptionOp::Kind;

namespace {

// One op on x; `a` (and `second` for a split) are the op's convs.
torch::Tensor ApplyOp(const InceptionOp& op, Conv2d& a, Conv2d& second,
                      const torch::Tensor& x) {
  switch (op.kind) {
    case Kind::kMaxPool:
      return MaxPool2d(x, op.kh, op.stride, op.padding);
    case Kind::kAvgPool:
      return AvgPool2d(x, op.kh, op.stride, op.padding);
    case Kind::kConv:
      return a(x);
    case Kind::kSplit:
      return Concat({a(x), second(x)});
  }
  return x;
}

}  // namespace

InceptionOp InceptionConv(const std::string& scope, int64_t out, int64_t kh,
                          int64_t kw, int64_t stride, Padding padding) {
  InceptionOp op;
  op.scope = scope;
  op.out = out;
  op.kh = kh;
  op.kw = kw;
  op.stride = stride;
  op.padding = padding;
  return op;
}

InceptionOp InceptionPool(Kind kind, const std::string& scope, int64_t k,
                          int64_t stride, Padding padding) {
  InceptionOp op;
  op.kind = kind;
  op.scope = scope;
  op.kh = op.kw = k;
  op.stride = stride;
  op.padding = padding;
  return op;
}

InceptionOp InceptionSplit(const std::string& scope_1x3,
                           const std::string& scope_3x1, int64_t out) {
  InceptionOp op = InceptionConv(scope_1x3, out, 1, 3);
  op.kind = Kind::kSplit;
  op.scope2 = scope_3x1;
  op.kh2 = 3;
  op.kw2 = 1;
  return op;
}

Conv2dOptions InceptionConvStyle::Conv(int64_t in, int64_t out, int64_t kh,
                                       int64_t kw) const {
  return Conv2dOptions(in, out, kh)
      .kernel_w(kw)
      .weights_init(weights_init)
      .weight_decay(weight_decay)
      .batch_norm(BatchNormOptions(out).decay(bn_decay).epsilon(bn_epsilon));
}

InceptionMixedImpl::InceptionMixedImpl(int64_t in_channels,
                                       std::vector<InceptionBranch> branches,
                                       InceptionConvStyle style,
                                       c10::optional<InceptionResidual> residual)
    : in_(in_channels), branches_(std::move(branches)), style_(style),
      residual_(residual) {
  reset();
}

void InceptionMixedImpl::reset() {
  convs_.clear();
  out_ = 0;
  for (size_t b = 0; b < branches_.size(); ++b) {
    NamedModules items;
    std::vector<std::pair<Conv2d, Conv2d>> convs;
    int64_t c = in_;
    for (const InceptionOp& op : branches_[b]) {
      if (op.kind == Kind::kMaxPool || op.kind == Kind::kAvgPool) {
        convs.emplace_back(nullptr, nullptr);
        continue;
      }
      Conv2dOptions opts = style_.Conv(c, op.out, op.kh, op.kw)
                               .stride(op.stride)
                               .padding(op.padding);
      if (op.init_stddev > 0) {
        opts.weights_init(Initializer::TruncatedNormal(op.init_stddev));
      }
      Conv2d a(opts);
      items.emplace_back(op.scope, a.ptr());
      Conv2d second{nullptr};
      if (op.kind == Kind::kSplit) {
        second = Conv2d(style_.Conv(c, op.out, op.kh2, op.kw2));
        items.emplace_back(op.scope2, second.ptr());
      }
      convs.emplace_back(a, second);
      c = op.kind == Kind::kSplit ? 2 * op.out : op.out;
    }
    register_module("Branch_" + std::to_string(b), Scope(items));
    convs_.push_back(std::move(convs));
    out_ += c;
  }
  up_ = nullptr;
  if (residual_) {
    up_ = Conv2d(Conv2dOptions(out_, in_, 1)
                     .activation(Activation::kNone)
                     .weights_init(style_.weights_init)
                     .weight_decay(style_.weight_decay)
                     .bias_decay(style_.regularize_biases ? style_.weight_decay
                                                          : 0.0));
    register_module("Conv2d_1x1", up_);
    out_ = in_;
  }
}

torch::Tensor InceptionMixedImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> outs;
  for (size_t b = 0; b < branches_.size(); ++b) {
    torch::Tensor y = x;
    for (size_t i = 0; i < branches_[b].size(); ++i) {
      y = ApplyOp(branches_[b][i], convs_[b][i].first, convs_[b][i].second, y);
    }
    outs.push_back(y);
  }
  torch::Tensor mixed = Concat(outs);
  if (!residual_) return mixed;
  // up_'s output and the sum are fresh tensors read by nothing else: scaled
  // and activated in place outside export (as before the graph ops existed).
  torch::Tensor net = Add(x, ScaleInPlace(up_(mixed), residual_->scale));
  return residual_->activation ? ReluInPlace(net) : net;
}

int64_t InceptionChain::Build(torch::nn::Module& parent, int64_t in_channels,
                              InceptionBranch ops,
                              const InceptionConvStyle& style) {
  ops_ = std::move(ops);
  convs_.clear();
  int64_t c = in_channels;
  for (const InceptionOp& op : ops_) {
    SLIM_CHECK(op.kind != Kind::kSplit, "InceptionChain: no split ops");
    if (op.kind != Kind::kConv) {
      convs_.emplace_back(nullptr);
      continue;
    }
    Conv2d conv(style.Conv(c, op.out, op.kh, op.kw)
                    .stride(op.stride)
                    .padding(op.padding));
    parent.register_module(op.scope, conv);
    convs_.push_back(conv);
    c = op.out;
  }
  return c;
}

torch::Tensor InceptionChain::Forward(const torch::Tensor& x,
                                      EndPoints& end_points) {
  torch::Tensor y = x;
  Conv2d none{nullptr};
  for (size_t i = 0; i < ops_.size(); ++i) {
    y = ApplyOp(ops_[i], convs_[i], none, y);
    end_points.emplace_back(ops_[i].scope, y);
  }
  return y;
}

InceptionBranch InceptionStem() {
  const Padding valid = Padding::kValid;
  return {InceptionConv("Conv2d_1a_3x3", 32, 3, 3, 2, valid),
          InceptionConv("Conv2d_2a_3x3", 32, 3, 3, 1, valid),
          InceptionConv("Conv2d_2b_3x3", 64, 3, 3),
          InceptionPool(Kind::kMaxPool, "MaxPool_3a_3x3", 3, 2, valid),
          InceptionConv("Conv2d_3b_1x1", 80, 1, 1, 1, valid),
          InceptionConv("Conv2d_4a_3x3", 192, 3, 3, 1, valid),
          InceptionPool(Kind::kMaxPool, "MaxPool_5a_3x3", 3, 2, valid)};
}

std::pair<int64_t, int64_t> InceptionGridSizes(int64_t size) {
  int64_t m = ValidSize(ValidSize(size, 3, 2), 3, 1);  // Conv2d_2a_3x3
  m = ValidSize(m, 3, 2);  // MaxPool_3a_3x3 (v4: Mixed_3a)
  m = ValidSize(m, 3, 1);  // Conv2d_4a_3x3 (v4: Mixed_4a)
  m = ValidSize(m, 3, 2);  // MaxPool_5a_3x3 (v4: Mixed_5a)
  const int64_t m17 = ValidSize(m, 3, 2);
  return {m17, ValidSize(m17, 3, 2)};
}

int64_t InceptionAuxImageSize(const NetOptions& options,
                              const std::string& net, const std::string& grid) {
  const int64_t size = options.image_size() > 0 ? options.image_size() : 299;
  SLIM_CHECK(options.num_classes() <= 0 || InceptionGridSizes(size).first >= 5,
             net, " cannot be built for ", size, "x", size,
             " images: AuxLogits' 5x5 pool needs ", grid,
             " to be at least 5x5 (images of 107 or more; default 299)");
  return size;
}

void CheckInceptionAuxNetSize(const NetOptions& options, const std::string& net,
                              const std::string& aux_conv, int64_t built,
                              int64_t size) {
  SLIM_CHECK(InceptionGridSizes(size).second >= 1, net, " cannot take ", size,
             "x", size, " images: its VALID stem and reductions need at "
             "least 75x75 (default 299)");
  SLIM_CHECK(options.num_classes() <= 0 || size == built, net,
             " was built for ", built, "x", built, " images (AuxLogits/",
             aux_conv, "'s kernel is sized from them) and cannot take ", size,
             "x", size, "; build it with that image size (--train_image_size "
             "/ --eval_image_size)");
}

InceptionAuxHeadImpl::InceptionAuxHeadImpl(
    int64_t in_channels, int64_t map_size, int64_t num_classes,
    InceptionConvStyle style, Initializer fc_init, std::string conv_scope,
    std::string logits_scope)
    : in_(in_channels), map_size_(map_size), num_classes_(num_classes),
      style_(style), fc_init_(fc_init), conv_scope_(std::move(conv_scope)),
      logits_scope_(std::move(logits_scope)) {
  reset();
}

void InceptionAuxHeadImpl::reset() {
  const int64_t k = ValidSize(map_size_, 5, 3);
  SLIM_CHECK(k >= 1, "the aux head needs a map of at least 5x5, got ",
             map_size_, "x", map_size_);
  conv1_ = register_module("Conv2d_1b_1x1",
                           Conv2d(style_.Conv(in_, 128, 1, 1)));
  conv2_ = register_module(
      conv_scope_, Conv2d(style_.Conv(128, 768, k, k).padding(Padding::kValid)));
  logits_ = register_module(
      logits_scope_,
      FullyConnected(FullyConnectedOptions(768, num_classes_)
                         .activation(Activation::kNone)
                         .weights_init(fc_init_)
                         .weight_decay(style_.weight_decay)
                         .bias_decay(style_.regularize_biases
                                         ? style_.weight_decay
                                         : 0.0)));
}

torch::Tensor InceptionAuxHeadImpl::forward(const torch::Tensor& x) {
  torch::Tensor aux = AvgPool2d(x, 5, 3, Padding::kValid);
  return logits_(FlattenNhwc(conv2_(conv1_(aux))));
}

}  // namespace nets
}  // namespace slimtorch
