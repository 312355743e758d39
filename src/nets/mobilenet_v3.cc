#include "slimtorch/nets/mobilenet_v3.h"

#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/layer_trace.h"
#include "slimtorch/nets/mobilenet_v2.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace nets {
namespace {

// One expanded conv of a spec: mbv3_op / mbv3_op_se / mbv3_fused.
struct BlockDef {
  int64_t kernel, stride;
  double factor;  // expand_input_by_factor
  int64_t out;
  bool squeeze_excite, hard_swish;
  bool fused = false;
  bool residual = true;
};

// mobilenet_v3.py's V3_LARGE and V3_SMALL expanded convs; their
// _MINIMALISTIC twins have the same depths, expansions and strides with
// 3x3 kernels, no squeeze-excite and ReLU only (Minimalistic() below).
const std::vector<BlockDef>& LargeBlocks() {
  static const std::vector<BlockDef> blocks = {
      {3, 1, 1, 16, false, false},         {3, 2, 4, 24, false, false},
      {3, 1, 3, 24, false, false},         {5, 2, 3, 40, true, false},
      {5, 1, 3, 40, true, false},          {5, 1, 3, 40, true, false},
      {3, 2, 6, 80, false, true},          {3, 1, 2.5, 80, false, true},
      {3, 1, 184 / 80., 80, false, true},  {3, 1, 184 / 80., 80, false, true},
      {3, 1, 6, 112, true, true},          {3, 1, 6, 112, true, true},
      {5, 2, 6, 160, true, true},          {5, 1, 6, 160, true, true},
      {5, 1, 6, 160, true, true}};
  return blocks;
}

const std::vector<BlockDef>& SmallBlocks() {
  static const std::vector<BlockDef> blocks = {
      {3, 2, 1, 16, true, false},       {3, 2, 72 / 16., 24, false, false},
      {3, 1, 88 / 24., 24, false, false}, {5, 2, 4, 40, true, true},
      {5, 1, 6, 40, true, true},        {5, 1, 6, 40, true, true},
      {5, 1, 3, 48, true, true},        {5, 1, 3, 48, true, true},
      {5, 2, 6, 96, true, true},        {5, 1, 6, 96, true, true},
      {5, 1, 6, 96, true, true}};
  return blocks;
}

std::vector<BlockDef> Minimalistic(std::vector<BlockDef> blocks) {
  for (BlockDef& b : blocks) {
    b.kernel = 3;
    b.squeeze_excite = b.hard_swish = false;
  }
  return blocks;
}

// V3_EDGETPU: ReLU throughout, no squeeze-excite; fused blocks first.
std::vector<BlockDef> EdgeTpuBlocks() {
  auto fused = [](int64_t stride, double factor, int64_t out) {
    return BlockDef{3, stride, factor, out, false, false, true};
  };
  auto plain = [](int64_t kernel, int64_t stride, double factor,
                  int64_t out) {
    return BlockDef{kernel, stride, factor, out, false, false};
  };
  std::vector<BlockDef> b = {fused(1, 1, 16), fused(2, 8, 32)};
  for (int i = 0; i < 3; ++i) b.push_back(fused(1, 4, 32));
  b.push_back(fused(2, 8, 48));
  for (int i = 0; i < 3; ++i) b.push_back(fused(1, 4, 48));
  b.push_back(plain(3, 2, 8, 96));
  for (int i = 0; i < 3; ++i) b.push_back(plain(3, 1, 4, 96));
  b.push_back(plain(3, 1, 8, 96));
  b.back().residual = false;  // expanded_conv_13: residual=False
  for (int i = 0; i < 3; ++i) b.push_back(plain(3, 1, 4, 96));
  b.push_back(plain(5, 2, 8, 160));
  for (int i = 0; i < 3; ++i) b.push_back(plain(5, 1, 4, 160));
  b.push_back(plain(3, 1, 8, 192));
  return b;
}

// The spec's convs outside the expanded convs: "Conv" (stem), "Conv_1",
// and V3's "Conv_2" after reduce_to_1x1 (0: none, EdgeTPU).
struct SpecDef {
  std::vector<BlockDef> blocks;
  int64_t stem, conv_1, conv_2;
  bool hard_swish;  // in the stem and the head (else ReLU)
};

SpecDef Spec(MobileNetV3Spec spec) {
  switch (spec) {
    case MobileNetV3Spec::kLarge:
      return {LargeBlocks(), 16, 960, 1280, true};
    case MobileNetV3Spec::kSmall:
      return {SmallBlocks(), 16, 576, 1024, true};
    case MobileNetV3Spec::kLargeMinimalistic:
      return {Minimalistic(LargeBlocks()), 16, 960, 1280, false};
    case MobileNetV3Spec::kSmallMinimalistic:
      return {Minimalistic(SmallBlocks()), 16, 576, 1024, false};
    case MobileNetV3Spec::kEdgeTpu:
      return {EdgeTpuBlocks(), 32, 1280, 0, false};
  }
  SLIM_FAIL("MobileNet v3: unknown spec ", static_cast<int>(spec));
}

BatchNormOptions V3BatchNorm(int64_t channels) {
  return BatchNormOptions(channels).decay(0.997).epsilon(0.001).scale(true);
}

// training_scope's conv2d: truncated_normal(0.09), L2 `wd`; batch norm
// unless `batch_norm` is false (then zero biases). ReLU, or no activation
// when hard_swish follows (or none is wanted).
Conv2dOptions V3Conv(int64_t in, int64_t out, int64_t kernel, bool relu,
                     double wd, bool batch_norm = true) {
  Conv2dOptions o = Conv2dOptions(in, out, kernel)
                        .activation(relu ? Activation::kRelu
                                         : Activation::kNone)
                        .weights_init(Initializer::TruncatedNormal(0.09))
                        .weight_decay(wd);
  if (batch_norm) o.batch_norm(V3BatchNorm(out));
  return o;
}

}  // namespace

torch::Tensor HardSwish(const torch::Tensor& x) {
  // An exported or quantized pass takes TensorFlow's ops: the graph records
  // them, and contrib.quantize quantizes the ReLU6 and both products.
  if (!TracingOps() && !ActiveQuantizer()) return torch::hardswish(x);
  return Scale(Mul(x, Relu6(AddConstant(x, 3.0))), 1.0 / 6.0);
}

// ---- squeeze_excite ----

SqueezeExciteImpl::SqueezeExciteImpl(int64_t channels, double weight_decay)
    : channels_(channels), weight_decay_(weight_decay) {
  reset();
}

void SqueezeExciteImpl::reset() {
  // _make_divisible(input_channels / squeeze_factor, 8): 72 → 24, not 18.
  const int64_t squeezed = MakeDivisible(channels_ / 4.0);
  squeeze_ = register_module(
      "Conv", Conv2d(V3Conv(channels_, squeezed, 1, /*relu=*/true,
                            weight_decay_, /*batch_norm=*/false)));
  excite_ = register_module(
      "Conv_1", Conv2d(V3Conv(squeezed, channels_, 1, /*relu=*/false,
                              weight_decay_, /*batch_norm=*/false)));
}

torch::Tensor SqueezeExciteImpl::forward(const torch::Tensor& x) {
  torch::Tensor gate = excite_(squeeze_(SpatialMean(x)));
  // mobilenet_v3's gating_fn: relu6(x + 3) * 0.16667, that literal (not
  // 1/6: the gate reaches 1.00002).
  gate = Scale(Relu6(AddConstant(gate, 3.0)), 0.16667);
  return Mul(x, gate);
}

// ---- expanded_conv ----

V3ExpandedConvImpl::V3ExpandedConvImpl(const V3BlockOptions& options)
    : o_(options) {
  reset();
}

void V3ExpandedConvImpl::reset() {
  expand_ = depthwise_ = nullptr;
  se_ = nullptr;
  const bool relu = !o_.hard_swish;
  int64_t inner = o_.in;
  if (o_.expansion > o_.in) {
    // A fused block's expansion is the k x k conv with the stride.
    const int64_t k = o_.fused ? o_.kernel : 1;
    expand_ = register_module(
        "expand",
        Conv2d(V3Conv(o_.in, o_.expansion, k, relu, o_.weight_decay)
                   .stride(o_.fused ? o_.stride : 1)));
    inner = o_.expansion;
  }
  if (!o_.fused) {
    depthwise_ = register_module(
        "depthwise", Conv2d(V3Conv(inner, inner, o_.kernel, relu, 0.0)
                                .depthwise(true)
                                .stride(o_.stride)));
  }
  if (o_.squeeze_excite) {
    se_ = register_module("squeeze_excite",
                          SqueezeExcite(inner, o_.weight_decay));
  }
  project_ = register_module(
      "project",
      Conv2d(V3Conv(inner, o_.out, 1, /*relu=*/false, o_.weight_decay)));
}

torch::Tensor V3ExpandedConvImpl::Activate(torch::Tensor x) const {
  return o_.hard_swish ? HardSwish(x) : x;  // ReLU ran in the conv
}

torch::Tensor V3ExpandedConvImpl::forward(
    const torch::Tensor& x, const std::string& prefix,
    std::vector<std::pair<std::string, torch::Tensor>>& outputs) {
  torch::Tensor net = x;
  if (expand_) {
    net = Activate(expand_(net));
    outputs.emplace_back(prefix + "/expansion_output", net);
  }
  if (depthwise_) {
    net = Activate(depthwise_(net));
    outputs.emplace_back(prefix + "/depthwise_output", net);
  }
  if (se_) net = se_(net);
  net = project_(net);
  if (o_.residual && o_.stride == 1 && o_.in == o_.out) net = Add(net, x);
  outputs.emplace_back(prefix + "/output", net);
  return net;
}

// ---- the net ----

MobileNetV3Impl::MobileNetV3Impl(MobileNetV3Spec spec, double depth_multiplier,
                                 bool finegrain, const NetOptions& options)
    : spec_(spec),
      multiplier_(depth_multiplier),
      finegrain_(finegrain),
      options_(options) {
  SLIM_CHECK(multiplier_ > 0, scope(), ": depth_multiplier must be positive, "
             "got ", multiplier_);
  reset();
}

const char* MobileNetV3Impl::scope() const {
  return spec_ == MobileNetV3Spec::kEdgeTpu ? "MobilenetEdgeTPU"
                                            : "MobilenetV3";
}

void MobileNetV3Impl::reset() {
  const SpecDef def = Spec(spec_);
  const double wd = options_.weight_decay();
  head_hard_swish_ = def.hard_swish;
  auto depth = [this](int64_t d) { return MakeDivisible(d * multiplier_, 8, 8); };
  int64_t c = depth(def.stem);
  conv_ = register_module(
      "Conv", Conv2d(V3Conv(options_.input_channels(), c, 3, !def.hard_swish,
                            wd)
                         .stride(2)));
  blocks_.clear();
  for (size_t i = 0; i < def.blocks.size(); ++i) {
    const BlockDef& b = def.blocks[i];
    V3BlockOptions o;
    o.in = c;
    o.expansion = MakeDivisible(c * b.factor, 8);
    o.out = depth(b.out);
    o.kernel = b.kernel;
    o.stride = b.stride;
    o.hard_swish = b.hard_swish;
    o.squeeze_excite = b.squeeze_excite;
    o.fused = b.fused;
    o.residual = b.residual;
    o.weight_decay = wd;
    V3ExpandedConv block(o);
    register_module(i == 0 ? "expanded_conv"
                           : "expanded_conv_" + std::to_string(i),
                    block);
    blocks_.push_back(block);
    c = o.out;
  }
  BuildHead(c);
}

// Conv_1 (batch norm), V3's Conv_2 (biases, no batch norm) and the logits;
// finegrain_classification_mode leaves the last spec op's depth unscaled.
void MobileNetV3Impl::BuildHead(int64_t c) {
  const SpecDef def = Spec(spec_);
  const double wd = options_.weight_decay();
  auto depth = [this](int64_t d, bool last) {
    return finegrain_ && last ? d : MakeDivisible(d * multiplier_, 8, 8);
  };
  const bool relu = !def.hard_swish;
  const int64_t conv_1 = depth(def.conv_1, def.conv_2 == 0);
  conv_1_ = register_module("Conv_1", Conv2d(V3Conv(c, conv_1, 1, relu, wd)));
  int64_t features = conv_1;
  conv_2_ = nullptr;
  if (def.conv_2 > 0) {
    features = depth(def.conv_2, true);
    conv_2_ = register_module(
        "Conv_2", Conv2d(V3Conv(conv_1, features, 1, relu, wd,
                                /*batch_norm=*/false)));
  }
  logits_ =
      RegisterMobileNetLogits(*this, features, options_.num_classes(), wd);
}

void MobileNetV3Impl::CheckImageSize(int64_t size) const {
  SLIM_CHECK(size > 0, scope(), " cannot take ", size, "x", size, " images");
}

torch::Tensor MobileNetV3Impl::HeadConv(Conv2d conv,
                                        const torch::Tensor& x) const {
  torch::Tensor y = conv(x);
  return head_hard_swish_ ? HardSwish(y) : y;
}

// reduce_to_1x1: a VALID average pool of the whole map when it is square,
// else of 7x7 windows (the head's global pool then averages what is left).
torch::Tensor MobileNetV3Impl::ReduceTo1x1(const torch::Tensor& x) const {
  const int64_t h = x.size(2), w = x.size(3);
  const int64_t k = h == w ? h : 7;
  SLIM_CHECK(h >= k && w >= k, scope(), ": the last map of non-square ",
             "images is ", h, "x", w, ", smaller than reduce_to_1x1's 7x7 ",
             "VALID window (as in TF-Slim)");
  return AvgPool2d(x, k, /*stride=*/1, Padding::kValid);
}

NetOutput MobileNetV3Impl::forward(const torch::Tensor& images) {
  SLIM_CHECK(images.dim() == 4 && images.size(1) == input_channels(), scope(),
             " expects [N, ", input_channels(), ", H, W] images, got ",
             images.sizes());
  NetOutput out;
  auto& ep = out.end_points;
  // TF-Slim lists the blocks' inner outputs after every layer_k.
  std::vector<std::pair<std::string, torch::Tensor>> inner;
  int layer = 0;
  auto next = [&layer] { return "layer_" + std::to_string(++layer); };
  torch::Tensor net = HeadConv(conv_, images);
  ep.emplace_back(next(), net);
  for (auto& block : blocks_) {
    const std::string name = next();
    net = block->forward(net, name, inner);
    ep.emplace_back(name, net);
  }
  net = HeadConv(conv_1_, net);
  ep.emplace_back(next(), net);
  if (conv_2_) {
    net = ReduceTo1x1(net);
    ep.emplace_back(next(), net);
    net = HeadConv(conv_2_, net);
    ep.emplace_back(next(), net);
  }
  for (auto& [key, value] : inner) ep.emplace_back(key, value);
  MobileNetHead(net, logits_, is_training(), out);
  return out;
}

#define SLIMTORCH_REGISTER_MOBILENET_V3(name, spec, multiplier, finegrain) \
  SLIM_REGISTER_NET_WITH_FACTS(                                            \
      name,                                                                \
      [](const NetOptions& o) -> std::shared_ptr<Net> {                    \
        auto impl = std::make_shared<MobileNetV3Impl>(                     \
            MobileNetV3Spec::spec, multiplier, finegrain, o);              \
        return std::make_shared<ModuleNet<MobileNetV3Impl>>(               \
            impl, impl->scope(), MobileNetV3Impl::kDefaultImageSize);      \
      },                                                                   \
      NetFacts().CpuChannelsLast().Preprocessing("inception"))
SLIMTORCH_REGISTER_MOBILENET_V3("mobilenet_v3_large", kLarge, 1.0, false);
SLIMTORCH_REGISTER_MOBILENET_V3("mobilenet_v3_small", kSmall, 1.0, false);
SLIMTORCH_REGISTER_MOBILENET_V3("mobilenet_v3_large_minimalistic",
                                kLargeMinimalistic, 1.0, false);
SLIMTORCH_REGISTER_MOBILENET_V3("mobilenet_v3_small_minimalistic",
                                kSmallMinimalistic, 1.0, false);
SLIMTORCH_REGISTER_MOBILENET_V3("mobilenet_edgetpu", kEdgeTpu, 1.0, false);
SLIMTORCH_REGISTER_MOBILENET_V3("mobilenet_edgetpu_075", kEdgeTpu, 0.75,
                                true);

}  // namespace nets
}  // namespace slimtorch
