#include "slimtorch/nets/resnet.h"

#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"

namespace slimtorch {
namespace nets {
namespace {

// resnet_arg_scope's batch norm.
BatchNormOptions ResNetBatchNorm(int64_t channels) {
  return BatchNormOptions(channels).decay(0.997).epsilon(1e-5).scale(true);
}

// A conv under resnet_arg_scope: variance-scaling weights, L2, ReLU, batch
// norm (unless `plain`: biases, no batch norm, no activation).
Conv2dOptions ResNetConv(int64_t in, int64_t out, int64_t kernel, double wd,
                         bool plain = false) {
  Conv2dOptions o = Conv2dOptions(in, out, kernel)
                        .weights_init(Initializer::VarianceScaling())
                        .weight_decay(wd);
  if (plain) return o.activation(Activation::kNone);
  return o.batch_norm(ResNetBatchNorm(out));
}

// resnet_utils.conv2d_same's padding for `stride`.
Padding ConvSamePadding(int64_t stride) {
  return stride == 1 ? Padding::kSame : Padding::kFixed;
}

std::pair<int, std::vector<int>> VariantOf(const std::string& name) {
  const std::string prefixes[] = {"resnet_v1_", "resnet_v2_"};
  for (int v = 1; v <= 2; ++v) {
    const std::string& p = prefixes[v - 1];
    if (name.compare(0, p.size(), p) != 0) continue;
    const std::string depth = name.substr(p.size());
    if (depth == "50") return {v, {3, 4, 6, 3}};
    if (depth == "101") return {v, {3, 4, 23, 3}};
    if (depth == "152") return {v, {3, 8, 36, 3}};
    if (depth == "200") return {v, {3, 24, 36, 3}};
  }
  SLIM_FAIL("unknown ResNet '", name,
            "' (expected resnet_v1_ or resnet_v2_ with 50, 101, 152 or 200)");
}

}  // namespace

BottleneckImpl::BottleneckImpl(int version, int64_t in_channels, int64_t depth,
                               int64_t depth_bottleneck, int64_t stride,
                               double weight_decay)
    : version_(version),
      in_(in_channels),
      depth_(depth),
      bottleneck_(depth_bottleneck),
      stride_(stride),
      weight_decay_(weight_decay) {
  reset();
}

void BottleneckImpl::reset() {
  const double wd = weight_decay_;
  const bool v2 = version_ == 2;
  preact_ = nullptr;
  if (v2) preact_ = register_module("preact", BatchNorm(ResNetBatchNorm(in_)));
  shortcut_ = nullptr;
  if (depth_ != in_) {
    shortcut_ = register_module(
        "shortcut",
        Conv2d(ResNetConv(in_, depth_, 1, wd, /*plain=*/v2)
                   .stride(stride_)
                   .activation(Activation::kNone)));
  }
  conv1_ = register_module("conv1",
                           Conv2d(ResNetConv(in_, bottleneck_, 1, wd)));
  conv2_ = register_module(
      "conv2", Conv2d(ResNetConv(bottleneck_, bottleneck_, 3, wd)
                          .stride(stride_)
                          .padding(ConvSamePadding(stride_))));
  conv3_ = register_module(
      "conv3", Conv2d(ResNetConv(bottleneck_, depth_, 1, wd, /*plain=*/v2)
                          .activation(Activation::kNone)));
}

torch::Tensor BottleneckImpl::forward(
    const torch::Tensor& x, const std::string& scope,
    EndPoints* ep) {
  const torch::Tensor in = preact_ ? BatchNormRelu(*preact_, x) : x;
  torch::Tensor shortcut;
  if (shortcut_) {
    shortcut = shortcut_(in);
    ep->emplace_back(scope + "/shortcut", shortcut);
  } else {
    // resnet_utils.subsample of the unit's input (not the pre-activation).
    shortcut = stride_ == 1 ? x : MaxPool2d(x, 1, stride_, Padding::kSame);
  }
  torch::Tensor r = conv1_(in);
  ep->emplace_back(scope + "/conv1", r);
  r = conv2_(r);
  ep->emplace_back(scope + "/conv2", r);
  r = conv3_(r);
  ep->emplace_back(scope + "/conv3", r);
  torch::Tensor out = preact_ ? Add(shortcut, r) : AddRelu(shortcut, r);
  ep->emplace_back(scope, out);
  return out;
}

ResNetImpl::ResNetImpl(std::string name, const NetOptions& options)
    : name_(std::move(name)), version_(VariantOf(name_).first),
      options_(options) {
  reset();
}

void ResNetImpl::reset() {
  const double wd = options_.weight_decay();
  const bool v2 = version_ == 2;
  const std::vector<int> units = VariantOf(name_).second;
  // v2's root conv has no batch norm or activation (the first unit's
  // pre-activation follows).
  conv1_ = register_module(
      "conv1", Conv2d(ResNetConv(options_.input_channels(), 64, 7, wd, v2)
                          .stride(2)
                          .padding(Padding::kFixed)));
  blocks_.clear();
  int64_t in = 64;
  const std::string unit_scope = v2 ? "bottleneck_v2" : "bottleneck_v1";
  for (int b = 0; b < 4; ++b) {
    const int64_t base = int64_t{64} << b;
    const int64_t stride = b < 3 ? 2 : 1;
    std::vector<Bottleneck> block;
    NamedModules items;
    for (int u = 0; u < units[b]; ++u) {
      Bottleneck unit(version_, in, 4 * base, base,
                      u + 1 == units[b] ? stride : 1, wd);
      items.emplace_back("unit_" + std::to_string(u + 1),
                         Scope({{unit_scope, unit.ptr()}}).ptr());
      block.push_back(unit);
      in = 4 * base;
    }
    register_module("block" + std::to_string(b + 1), Scope(items));
    blocks_.push_back(std::move(block));
  }
  postnorm_ = nullptr;
  if (v2) postnorm_ = register_module("postnorm", BatchNorm(ResNetBatchNorm(in)));
  logits_ = nullptr;
  if (options_.num_classes() > 0) {
    logits_ = register_module(
        "logits",
        Conv2d(ResNetConv(in, options_.num_classes(), 1, wd, /*plain=*/true)));
  }
}

void ResNetImpl::CheckImageSize(int64_t size) const {
  SLIM_CHECK(size > 0, name_, ": image size must be positive, got ", size);
  // Without global_pool the logits conv runs on the final map (stride 32,
  // 'SAME'), which TF-Slim's squeeze needs to be 1x1.
  const int64_t final_map = (size + 31) / 32;
  SLIM_CHECK(options_.global_pool().value_or(true) ||
                 !options_.spatial_squeeze() || options_.num_classes() <= 0 ||
                 final_map == 1,
             name_, " without global_pool cannot take ", size, "x", size,
             " images: its final map would be ", final_map, "x", final_map,
             " and spatial_squeeze needs 1x1 (sizes up to 32)");
}

NetOutput ResNetImpl::forward(const torch::Tensor& images) {
  SLIM_CHECK(images.dim() == 4 && images.size(1) == options_.input_channels(),
             name_, " expects [N, ", options_.input_channels(),
             ", H, W] images, got ", images.sizes());
  NetOutput out;
  auto& ep = out.end_points;
  torch::Tensor net = conv1_(images);
  ep.emplace_back(name_ + "/conv1", net);
  net = MaxPool2d(net, 3, 2, Padding::kSame);
  const std::string unit_scope =
      version_ == 2 ? "/bottleneck_v2" : "/bottleneck_v1";
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const std::string block = name_ + "/block" + std::to_string(b + 1);
    for (size_t u = 0; u < blocks_[b].size(); ++u) {
      net = blocks_[b][u]->forward(
          net, block + "/unit_" + std::to_string(u + 1) + unit_scope, &ep);
    }
    ep.emplace_back(block, net);
  }
  if (postnorm_) net = BatchNormRelu(*postnorm_, net);
  if (options_.global_pool().value_or(true)) {
    net = SpatialMean(net);
  }
  if (!logits_) {
    out.logits = net;
    return out;
  }
  net = logits_(net);
  ep.emplace_back(name_ + "/logits", net);
  ep.emplace_back("predictions", torch::softmax(net, 1));
  out.logits = SqueezeSpatial(net, options_);
  return out;
}

#define SLIMTORCH_REGISTER_RESNET(name)                        \
  SLIM_REGISTER_NET_WITH_FACTS(                                \
      name,                                                    \
      [](const NetOptions& o) -> std::shared_ptr<Net> {        \
        return std::make_shared<ModuleNet<ResNetImpl>>(        \
            std::make_shared<ResNetImpl>(name, o), name, 224); \
      },                                                       \
      NetFacts().CpuChannelsLast().Preprocessing("vgg"))
SLIMTORCH_REGISTER_RESNET("resnet_v1_50");
SLIMTORCH_REGISTER_RESNET("resnet_v1_101");
SLIMTORCH_REGISTER_RESNET("resnet_v1_152");
SLIMTORCH_REGISTER_RESNET("resnet_v1_200");
SLIMTORCH_REGISTER_RESNET("resnet_v2_50");
SLIMTORCH_REGISTER_RESNET("resnet_v2_101");
SLIMTORCH_REGISTER_RESNET("resnet_v2_152");
SLIMTORCH_REGISTER_RESNET("resnet_v2_200");

}  // namespace nets
}  // namespace slimtorch
