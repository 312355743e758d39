#include "slimtorch/nets/inception_v4.h"

#include <utility>


namespace slimtorch {
namespace nets {
namespace {

using Kind = InceptionOp::Kind;
const Padding kValid = Padding::kValid;

InceptionOp Conv(const std::string& scope, int64_t out, int64_t kh, int64_t kw,
                 int64_t stride = 1, Padding padding = Padding::kSame) {
  return InceptionConv(scope, out, kh, kw, stride, padding);
}
InceptionOp MaxPoolS2(const std::string& scope) {
  return InceptionPool(Kind::kMaxPool, scope, 3, 2, kValid);
}
InceptionOp AvgPool3(const std::string& scope) {
  return InceptionPool(Kind::kAvgPool, scope, 3);
}

std::vector<InceptionBranch> BlockA() {
  return {{Conv("Conv2d_0a_1x1", 96, 1, 1)},
          {Conv("Conv2d_0a_1x1", 64, 1, 1), Conv("Conv2d_0b_3x3", 96, 3, 3)},
          {Conv("Conv2d_0a_1x1", 64, 1, 1), Conv("Conv2d_0b_3x3", 96, 3, 3),
           Conv("Conv2d_0c_3x3", 96, 3, 3)},
          {AvgPool3("AvgPool_0a_3x3"), Conv("Conv2d_0b_1x1", 96, 1, 1)}};
}
std::vector<InceptionBranch> BlockB() {
  return {{Conv("Conv2d_0a_1x1", 384, 1, 1)},
          {Conv("Conv2d_0a_1x1", 192, 1, 1), Conv("Conv2d_0b_1x7", 224, 1, 7),
           Conv("Conv2d_0c_7x1", 256, 7, 1)},
          {Conv("Conv2d_0a_1x1", 192, 1, 1), Conv("Conv2d_0b_7x1", 192, 7, 1),
           Conv("Conv2d_0c_1x7", 224, 1, 7), Conv("Conv2d_0d_7x1", 224, 7, 1),
           Conv("Conv2d_0e_1x7", 256, 1, 7)},
          {AvgPool3("AvgPool_0a_3x3"), Conv("Conv2d_0b_1x1", 128, 1, 1)}};
}
std::vector<InceptionBranch> BlockC() {
  return {{Conv("Conv2d_0a_1x1", 256, 1, 1)},
          {Conv("Conv2d_0a_1x1", 384, 1, 1),
           InceptionSplit("Conv2d_0b_1x3", "Conv2d_0c_3x1", 256)},
          {Conv("Conv2d_0a_1x1", 384, 1, 1), Conv("Conv2d_0b_3x1", 448, 3, 1),
           Conv("Conv2d_0c_1x3", 512, 1, 3),
           InceptionSplit("Conv2d_0d_1x3", "Conv2d_0e_3x1", 256)},
          {AvgPool3("AvgPool_0a_3x3"), Conv("Conv2d_0b_1x1", 256, 1, 1)}};
}

// inception_v4_base after Conv2d_2b_3x3.
std::vector<std::pair<std::string, std::vector<InceptionBranch>>> Blocks() {
  std::vector<std::pair<std::string, std::vector<InceptionBranch>>> blocks = {
      {"Mixed_3a",
       {{MaxPoolS2("MaxPool_0a_3x3")},
        {Conv("Conv2d_0a_3x3", 96, 3, 3, 2, kValid)}}},
      {"Mixed_4a",
       {{Conv("Conv2d_0a_1x1", 64, 1, 1),
         Conv("Conv2d_1a_3x3", 96, 3, 3, 1, kValid)},
        {Conv("Conv2d_0a_1x1", 64, 1, 1), Conv("Conv2d_0b_1x7", 64, 1, 7),
         Conv("Conv2d_0c_7x1", 64, 7, 1),
         Conv("Conv2d_1a_3x3", 96, 3, 3, 1, kValid)}}},
      {"Mixed_5a",
       {{Conv("Conv2d_1a_3x3", 192, 3, 3, 2, kValid)},
        {MaxPoolS2("MaxPool_1a_3x3")}}}};
  for (const char* n : {"Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_5e"}) {
    blocks.emplace_back(n, BlockA());
  }
  blocks.push_back(
      {"Mixed_6a",
       {{Conv("Conv2d_1a_3x3", 384, 3, 3, 2, kValid)},
        {Conv("Conv2d_0a_1x1", 192, 1, 1), Conv("Conv2d_0b_3x3", 224, 3, 3),
         Conv("Conv2d_1a_3x3", 256, 3, 3, 2, kValid)},
        {MaxPoolS2("MaxPool_1a_3x3")}}});
  for (const char* n : {"Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e",
                        "Mixed_6f", "Mixed_6g", "Mixed_6h"}) {
    blocks.emplace_back(n, BlockB());
  }
  blocks.push_back(
      {"Mixed_7a",
       {{Conv("Conv2d_0a_1x1", 192, 1, 1),
         Conv("Conv2d_1a_3x3", 192, 3, 3, 2, kValid)},
        {Conv("Conv2d_0a_1x1", 256, 1, 1), Conv("Conv2d_0b_1x7", 256, 1, 7),
         Conv("Conv2d_0c_7x1", 320, 7, 1),
         Conv("Conv2d_1a_3x3", 320, 3, 3, 2, kValid)},
        {MaxPoolS2("MaxPool_1a_3x3")}}});
  for (const char* n : {"Mixed_7b", "Mixed_7c", "Mixed_7d"}) {
    blocks.emplace_back(n, BlockC());
  }
  return blocks;
}

}  // namespace

InceptionV4Impl::InceptionV4Impl(const NetOptions& options)
    : options_(options),
      image_size_(InceptionAuxImageSize(options, kScope, "Mixed_6h")) {
  reset();
}

void InceptionV4Impl::reset() {
  InceptionConvStyle style;
  style.weight_decay = options_.weight_decay();
  InceptionBranch stem = InceptionStem();
  stem.resize(3);  // Conv2d_1a_3x3, Conv2d_2a_3x3, Conv2d_2b_3x3
  int64_t c = stem_.Build(*this, options_.input_channels(), stem, style);
  mixed_.clear();
  int64_t mixed_6h = 0;
  for (auto& [name, branches] : Blocks()) {
    InceptionMixed m(c, branches, style);
    register_module(name, m);
    mixed_.emplace_back(name, m);
    c = m->out_channels();
    if (name == "Mixed_6h") mixed_6h = c;
  }
  aux_ = nullptr;
  logits_ = nullptr;
  if (options_.num_classes() <= 0) return;
  aux_ = register_module(
      "AuxLogits",
      InceptionAuxHead(mixed_6h, InceptionGridSizes(image_size_).first,
                       options_.num_classes(), style,
                       Initializer::VarianceScaling(), "Conv2d_2a",
                       "Aux_logits"));
  logits_ = FullyConnected(FullyConnectedOptions(c, options_.num_classes())
                               .activation(Activation::kNone)
                               .weights_init(Initializer::VarianceScaling())
                               .weight_decay(style.weight_decay));
  register_module("Logits", Scope({{"Logits", logits_.ptr()}}));
}

void InceptionV4Impl::CheckImageSize(int64_t size) const {
  CheckInceptionAuxNetSize(options_, kScope, "Conv2d_2a", image_size_, size);
}

NetOutput InceptionV4Impl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, kScope, options_.input_channels());
  CheckImageSize(images.size(2));
  NetOutput out;
  auto& ep = out.end_points;
  torch::Tensor net = stem_.Forward(images, ep);
  torch::Tensor mixed_6h;
  for (auto& [name, block] : mixed_) {
    net = block(net);
    ep.emplace_back(name, net);
    if (name == "Mixed_6h") mixed_6h = net;
  }
  if (aux_) {
    out.aux_logits = aux_(mixed_6h);
    ep.emplace_back("AuxLogits", out.aux_logits);
  }
  net = GlobalPool(net, ep);  // AvgPool_1a*: VALID, the whole map
  if (!logits_) {
    out.logits = net;
    return out;
  }
  net = FlattenNhwc(net);
  ep.emplace_back("PreLogitsFlatten", net);
  net = torch::dropout(net, 1.0 - 0.8, is_training());
  SetLogits(out, logits_(net));
  return out;
}

SLIM_REGISTER_NET_WITH_FACTS(
    "inception_v4", MakeModuleNet<InceptionV4Impl>,
    NetFacts().CpuChannelsLast().Preprocessing("inception"));

}  // namespace nets
}  // namespace slimtorch
