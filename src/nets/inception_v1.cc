#include "slimtorch/nets/inception_v1.h"

#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"

namespace slimtorch {
namespace nets {
namespace {

// inception_arg_scope's batch norm: decay 0.9997, epsilon 0.001, no gamma.
BatchNormOptions InceptionBatchNorm(int64_t channels) {
  return BatchNormOptions(channels).decay(0.9997).epsilon(0.001);
}

// A base conv: conv + batch norm + ReLU, truncated_normal(0.01) weights.
Conv2d BaseConv(int64_t in, int64_t out, int64_t kernel, double wd,
                int64_t stride = 1) {
  return Conv2d(Conv2dOptions(in, out, kernel)
                    .stride(stride)
                    .weights_init(Initializer::TruncatedNormal(0.01))
                    .weight_decay(wd)
                    .batch_norm(InceptionBatchNorm(out)));
}

// Output size of the stride-2 'SAME' steps of the base.
int64_t Mixed5cSize(int64_t size) {
  for (int i = 0; i < 5; ++i) size = (size + 1) / 2;
  return size;
}

}  // namespace

InceptionV1MixedImpl::InceptionV1MixedImpl(int64_t in_channels, Depths depths,
                                           std::string b2b_scope,
                                           double weight_decay)
    : in_(in_channels),
      d_(depths),
      b2b_scope_(std::move(b2b_scope)),
      weight_decay_(weight_decay) {
  reset();
}

void InceptionV1MixedImpl::reset() {
  const double wd = weight_decay_;
  b0_ = BaseConv(in_, d_.b0, 1, wd);
  b1a_ = BaseConv(in_, d_.b1a, 1, wd);
  b1b_ = BaseConv(d_.b1a, d_.b1b, 3, wd);
  b2a_ = BaseConv(in_, d_.b2a, 1, wd);
  b2b_ = BaseConv(d_.b2a, d_.b2b, 3, wd);
  b3_ = BaseConv(in_, d_.b3, 1, wd);
  register_module("Branch_0", Scope({{"Conv2d_0a_1x1", b0_.ptr()}}));
  register_module("Branch_1", Scope({{"Conv2d_0a_1x1", b1a_.ptr()},
                                     {"Conv2d_0b_3x3", b1b_.ptr()}}));
  register_module("Branch_2", Scope({{"Conv2d_0a_1x1", b2a_.ptr()},
                                     {b2b_scope_, b2b_.ptr()}}));
  register_module("Branch_3", Scope({{"Conv2d_0b_1x1", b3_.ptr()}}));
}

torch::Tensor InceptionV1MixedImpl::forward(const torch::Tensor& x) {
  torch::Tensor branch0 = b0_(x);
  torch::Tensor branch1 = b1b_(b1a_(x));
  torch::Tensor branch2 = b2b_(b2a_(x));
  torch::Tensor branch3 = b3_(MaxPool2d(x, 3, 1, Padding::kSame));
  return Concat({branch0, branch1, branch2, branch3});
}

InceptionV1Impl::InceptionV1Impl(const NetOptions& options,
                                 double dropout_keep_prob)
    : options_(options), dropout_keep_prob_(dropout_keep_prob) {
  reset();
}

void InceptionV1Impl::reset() {
  const double wd = options_.weight_decay();
  conv1a_ = register_module(
      "Conv2d_1a_7x7", BaseConv(options_.input_channels(), 64, 7, wd, 2));
  conv2b_ = register_module("Conv2d_2b_1x1", BaseConv(64, 64, 1, wd));
  conv2c_ = register_module("Conv2d_2c_3x3", BaseConv(64, 192, 3, wd));
  // (name, Branch_0, Branch_1 1x1 → 3x3, Branch_2 1x1 → 3x3, Branch_3)
  struct Block {
    const char* name;
    InceptionV1MixedImpl::Depths d;
  };
  const Block blocks[] = {
      {"Mixed_3b", {64, 96, 128, 16, 32, 32}},
      {"Mixed_3c", {128, 128, 192, 32, 96, 64}},
      {"Mixed_4b", {192, 96, 208, 16, 48, 64}},
      {"Mixed_4c", {160, 112, 224, 24, 64, 64}},
      {"Mixed_4d", {128, 128, 256, 24, 64, 64}},
      {"Mixed_4e", {112, 144, 288, 32, 64, 64}},
      {"Mixed_4f", {256, 160, 320, 32, 128, 128}},
      {"Mixed_5b", {256, 160, 320, 32, 128, 128}},
      {"Mixed_5c", {384, 192, 384, 48, 128, 128}},
  };
  mixed_.clear();
  int64_t channels = 192;
  for (const Block& b : blocks) {
    const std::string name = b.name;
    InceptionV1Mixed m(channels, b.d,
                       name == "Mixed_5b" ? "Conv2d_0a_3x3" : "Conv2d_0b_3x3",
                       wd);
    register_module(name, m);
    channels = m->out_channels();
    mixed_.emplace_back(name, m);
  }
  logits_ = nullptr;
  if (options_.num_classes() > 0) {
    logits_ = Conv2d(Conv2dOptions(channels, options_.num_classes(), 1)
                         .activation(Activation::kNone)
                         .weights_init(Initializer::VarianceScaling())
                         .weight_decay(wd));
    register_module("Logits", Scope({{"Conv2d_0c_1x1", logits_.ptr()}}));
  }
}

NetOutput InceptionV1Impl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, kScope, options_.input_channels());
  CheckImageSize(images.size(2));
  NetOutput out;
  auto& ep = out.end_points;
  torch::Tensor net = conv1a_(images);
  ep.emplace_back("Conv2d_1a_7x7", net);
  net = MaxPool2d(net, 3, 2, Padding::kSame);
  ep.emplace_back("MaxPool_2a_3x3", net);
  net = conv2b_(net);
  ep.emplace_back("Conv2d_2b_1x1", net);
  net = conv2c_(net);
  ep.emplace_back("Conv2d_2c_3x3", net);
  net = MaxPool2d(net, 3, 2, Padding::kSame);
  ep.emplace_back("MaxPool_3a_3x3", net);
  for (auto& [name, block] : mixed_) {
    if (name == "Mixed_4b") {
      net = MaxPool2d(net, 3, 2, Padding::kSame);
      ep.emplace_back("MaxPool_4a_3x3", net);
    } else if (name == "Mixed_5b") {
      net = MaxPool2d(net, 2, 2, Padding::kSame);
      ep.emplace_back("MaxPool_5a_2x2", net);
    }
    net = block(net);
    ep.emplace_back(name, net);
  }
  if (options_.global_pool().value_or(false)) {
    net = GlobalPool(net, ep);
  } else {
    net = AvgPool2d(net, 7, 1, Padding::kValid);
  }
  if (!logits_) {
    out.logits = net;
    return out;
  }
  net = torch::dropout(net, 1.0 - dropout_keep_prob_, is_training());
  SetLogits(out, SqueezeSpatial(logits_(net), options_));
  return out;
}

void InceptionV1Impl::CheckImageSize(int64_t size) const {
  if (options_.global_pool().value_or(false)) {
    SLIM_CHECK(size > 0, "InceptionV1 cannot take ", size, "x", size,
               " images");
    return;
  }
  SLIM_CHECK(Mixed5cSize(size) == 7, "InceptionV1 cannot take ", size, "x",
             size, " images: Mixed_5c would be ", Mixed5cSize(size), "x",
             Mixed5cSize(size), ", and the head's 7x7 VALID average pool needs "
             "7x7 to give [N, classes] (sizes 193 to 224 work, any with "
             "global_pool; default 224)");
}

SLIM_REGISTER_NET_WITH_FACTS(
    "inception_v1", MakeModuleNet<InceptionV1Impl>,
    NetFacts().CpuChannelsLast().Preprocessing("inception"));

}  // namespace nets
}  // namespace slimtorch
