#include "slimtorch/nets/mobilenet_v2.h"

#include <algorithm>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"

namespace slimtorch {
namespace nets {
namespace {

struct BlockDef {
  int64_t expansion, out, stride;
};
// V2_DEF's expanded convs.
const BlockDef kBlocks[17] = {
    {1, 16, 1},  {6, 24, 2},  {6, 24, 1},  {6, 32, 2},  {6, 32, 1},
    {6, 32, 1},  {6, 64, 2},  {6, 64, 1},  {6, 64, 1},  {6, 64, 1},
    {6, 96, 1},  {6, 96, 1},  {6, 96, 1},  {6, 160, 2}, {6, 160, 1},
    {6, 160, 1}, {6, 320, 1}};

// training_scope's conv: batch norm (0.997, 0.001, gamma), ReLU6,
// truncated_normal(0.09), L2.
Conv2dOptions V2Conv(int64_t in, int64_t out, int64_t kernel, double wd) {
  return Conv2dOptions(in, out, kernel)
      .activation(Activation::kRelu6)
      .weights_init(Initializer::TruncatedNormal(0.09))
      .weight_decay(wd)
      .batch_norm(
          BatchNormOptions(out).decay(0.997).epsilon(0.001).scale(true));
}

}  // namespace

int64_t MakeDivisible(double v, int64_t divisor, int64_t min_value) {
  if (min_value <= 0) min_value = divisor;
  const int64_t rounded =
      static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor;
  int64_t new_v = std::max(min_value, rounded);
  if (new_v < 0.9 * v) new_v += divisor;
  return new_v;
}

ExpandedConvImpl::ExpandedConvImpl(int64_t in, int64_t expansion, int64_t out,
                                   int64_t stride, double weight_decay)
    : in_(in), expansion_(expansion), out_(out), stride_(stride),
      weight_decay_(weight_decay) {
  reset();
}

void ExpandedConvImpl::reset() {
  expand_ = nullptr;
  int64_t inner = in_;
  if (expansion_ > in_) {
    expand_ = register_module("expand",
                              Conv2d(V2Conv(in_, expansion_, 1, weight_decay_)));
    inner = expansion_;
  }
  depthwise_ = register_module(
      "depthwise", Conv2d(V2Conv(inner, inner, 3, /*wd=*/0.0)
                              .depthwise(true)
                              .stride(stride_)));
  project_ = register_module(
      "project", Conv2d(V2Conv(inner, out_, 1, weight_decay_)
                            .activation(Activation::kNone)));
}

torch::Tensor ExpandedConvImpl::forward(
    const torch::Tensor& x, const std::string& prefix,
    EndPoints& end_points) {
  torch::Tensor net = x;
  if (expand_) {
    net = expand_(net);
    end_points.emplace_back(prefix + "/expansion_output", net);
  }
  net = depthwise_(net);
  end_points.emplace_back(prefix + "/depthwise_output", net);
  net = project_(net);
  if (stride_ == 1 && in_ == out_) net = Add(net, x);
  end_points.emplace_back(prefix + "/output", net);
  return net;
}

MobileNetV2Impl::MobileNetV2Impl(double depth_multiplier, bool finegrain,
                                 const NetOptions& options)
    : multiplier_(depth_multiplier), finegrain_(finegrain), options_(options) {
  SLIM_CHECK(multiplier_ > 0, "MobileNet v2: depth_multiplier must be "
                              "positive, got ", multiplier_);
  reset();
}

void MobileNetV2Impl::reset() {
  const double wd = options_.weight_decay();
  auto depth = [this](double d) { return MakeDivisible(d * multiplier_); };
  int64_t c = depth(32);
  conv_ = register_module(
      "Conv", Conv2d(V2Conv(options_.input_channels(), c, 3, wd).stride(2)));
  blocks_.clear();
  for (int i = 0; i < 17; ++i) {
    const BlockDef& b = kBlocks[i];
    // expand_input_by_factor(n): _make_divisible(input depth * n, 8); the
    // first block's factor 1 uses divisor 1 (no expansion either way).
    const int64_t expansion =
        MakeDivisible(c * static_cast<double>(b.expansion),
                      b.expansion == 1 ? 1 : 8);
    const int64_t out = depth(b.out);
    ExpandedConv block(c, expansion, out, b.stride, wd);
    register_module(i == 0 ? "expanded_conv"
                           : "expanded_conv_" + std::to_string(i),
                    block);
    blocks_.push_back(block);
    c = out;
  }
  const double last = finegrain_ && multiplier_ < 1.0 ? 1280 / multiplier_
                                                      : 1280;
  const int64_t features = depth(last);
  conv_1_ = register_module("Conv_1", Conv2d(V2Conv(c, features, 1, wd)));
  logits_ =
      RegisterMobileNetLogits(*this, features, options_.num_classes(), wd);
}

Conv2d RegisterMobileNetLogits(torch::nn::Module& net, int64_t features,
                               int64_t num_classes, double weight_decay) {
  if (num_classes <= 0) return nullptr;
  Conv2d logits(Conv2dOptions(features, num_classes, 1)
                    .activation(Activation::kNone)
                    .weights_init(Initializer::TruncatedNormal(0.09))
                    .weight_decay(weight_decay));
  net.register_module("Logits", Scope({{"Conv2d_1c_1x1", logits.ptr()}}));
  return logits;
}

void MobileNetHead(const torch::Tensor& x, Conv2d logits, bool training,
                   NetOutput& out) {
  torch::Tensor net = GlobalPool(x, out.end_points);
  if (!logits) {
    out.logits = net;
    return;
  }
  net = torch::dropout(net, 1.0 - 0.8, training);
  SetLogits(out, SqueezeHw(logits(net)));
}

void MobileNetV2Impl::CheckImageSize(int64_t size) const {
  SLIM_CHECK(size > 0, "MobilenetV2 cannot take ", size, "x", size,
             " images");
}

NetOutput MobileNetV2Impl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, kScope, options_.input_channels());
  NetOutput out;
  auto& ep = out.end_points;
  torch::Tensor net = conv_(images);
  ep.emplace_back("layer_1", net);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const std::string name = "layer_" + std::to_string(i + 2);
    net = blocks_[i]->forward(net, name, ep);
    ep.emplace_back(name, net);
  }
  net = conv_1_(net);
  ep.emplace_back("layer_19", net);
  MobileNetHead(net, logits_, is_training(), out);
  return out;
}

#define SLIMTORCH_REGISTER_MOBILENET_V2(name, multiplier, finegrain)      \
  SLIM_REGISTER_NET_WITH_FACTS(                                           \
      name,                                                               \
      [](const NetOptions& o) -> std::shared_ptr<Net> {                   \
        return std::make_shared<ModuleNet<MobileNetV2Impl>>(              \
            std::make_shared<MobileNetV2Impl>(multiplier, finegrain, o),  \
            MobileNetV2Impl::kScope, MobileNetV2Impl::kDefaultImageSize); \
      },                                                                  \
      NetFacts().CpuChannelsLast().Preprocessing("inception"))
SLIMTORCH_REGISTER_MOBILENET_V2("mobilenet_v2", 1.0, false);
SLIMTORCH_REGISTER_MOBILENET_V2("mobilenet_v2_140", 1.4, false);
SLIMTORCH_REGISTER_MOBILENET_V2("mobilenet_v2_035", 0.35, true);

}  // namespace nets
}  // namespace slimtorch
