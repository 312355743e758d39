#include "slimtorch/nets/inception_resnet_v2.h"

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

std::vector<InceptionBranch> Mixed5b() {
  return {{Conv("Conv2d_1x1", 96, 1, 1)},
          {Conv("Conv2d_0a_1x1", 48, 1, 1), Conv("Conv2d_0b_5x5", 64, 5, 5)},
          {Conv("Conv2d_0a_1x1", 64, 1, 1), Conv("Conv2d_0b_3x3", 96, 3, 3),
           Conv("Conv2d_0c_3x3", 96, 3, 3)},
          {InceptionPool(Kind::kAvgPool, "AvgPool_0a_3x3", 3),
           Conv("Conv2d_0b_1x1", 64, 1, 1)}};
}
std::vector<InceptionBranch> Block35() {
  return {{Conv("Conv2d_1x1", 32, 1, 1)},
          {Conv("Conv2d_0a_1x1", 32, 1, 1), Conv("Conv2d_0b_3x3", 32, 3, 3)},
          {Conv("Conv2d_0a_1x1", 32, 1, 1), Conv("Conv2d_0b_3x3", 48, 3, 3),
           Conv("Conv2d_0c_3x3", 64, 3, 3)}};
}
std::vector<InceptionBranch> Mixed6a() {
  return {{Conv("Conv2d_1a_3x3", 384, 3, 3, 2, kValid)},
          {Conv("Conv2d_0a_1x1", 256, 1, 1), Conv("Conv2d_0b_3x3", 256, 3, 3),
           Conv("Conv2d_1a_3x3", 384, 3, 3, 2, kValid)},
          {MaxPoolS2("MaxPool_1a_3x3")}};
}
std::vector<InceptionBranch> Block17() {
  return {{Conv("Conv2d_1x1", 192, 1, 1)},
          {Conv("Conv2d_0a_1x1", 128, 1, 1), Conv("Conv2d_0b_1x7", 160, 1, 7),
           Conv("Conv2d_0c_7x1", 192, 7, 1)}};
}
std::vector<InceptionBranch> Mixed7a() {
  return {{Conv("Conv2d_0a_1x1", 256, 1, 1),
           Conv("Conv2d_1a_3x3", 384, 3, 3, 2, kValid)},
          {Conv("Conv2d_0a_1x1", 256, 1, 1),
           Conv("Conv2d_1a_3x3", 288, 3, 3, 2, kValid)},
          {Conv("Conv2d_0a_1x1", 256, 1, 1), Conv("Conv2d_0b_3x3", 288, 3, 3),
           Conv("Conv2d_1a_3x3", 320, 3, 3, 2, kValid)},
          {MaxPoolS2("MaxPool_1a_3x3")}};
}
std::vector<InceptionBranch> Block8() {
  return {{Conv("Conv2d_1x1", 192, 1, 1)},
          {Conv("Conv2d_0a_1x1", 192, 1, 1), Conv("Conv2d_0b_1x3", 224, 1, 3),
           Conv("Conv2d_0c_3x1", 256, 3, 1)}};
}

}  // namespace

InceptionResnetV2Impl::InceptionResnetV2Impl(const NetOptions& options)
    : options_(options),
      image_size_(InceptionAuxImageSize(options, kScope, "PreAuxLogits")) {
  reset();
}

void InceptionResnetV2Impl::reset() {
  InceptionConvStyle style;
  style.weights_init = Initializer::XavierUniform();
  style.weight_decay = options_.weight_decay();
  style.regularize_biases = true;
  int64_t c = stem_.Build(*this, options_.input_channels(), InceptionStem(), style);
  blocks_.clear();
  // Blocks of a slim.repeat share one scope ("Repeat", "Repeat_1", ...).
  NamedModules repeat;
  auto add = [&](const std::string& end_point, const std::string& scope,
                 std::vector<InceptionBranch> branches,
                 c10::optional<InceptionResidual> residual) {
    InceptionMixed m(c, std::move(branches), style, residual);
    if (residual && scope != "Block8") {
      repeat.emplace_back(scope, m.ptr());
    } else {
      register_module(scope, m);
    }
    blocks_.emplace_back(end_point, m);
    c = m->out_channels();
  };
  auto close_repeat = [&](const std::string& scope) {
    register_module(scope, Scope(repeat));
    repeat.clear();
  };
  add("Mixed_5b", "Mixed_5b", Mixed5b(), c10::nullopt);
  for (int i = 1; i <= 10; ++i) {
    add("", "block35_" + std::to_string(i), Block35(),
        InceptionResidual{0.17, true});
  }
  close_repeat("Repeat");
  add("Mixed_6a", "Mixed_6a", Mixed6a(), c10::nullopt);
  for (int i = 1; i <= 20; ++i) {
    add(i == 20 ? "PreAuxLogits" : "", "block17_" + std::to_string(i),
        Block17(), InceptionResidual{0.10, true});
  }
  close_repeat("Repeat_1");
  const int64_t pre_aux = c;
  add("Mixed_7a", "Mixed_7a", Mixed7a(), c10::nullopt);
  for (int i = 1; i <= 9; ++i) {
    add("", "block8_" + std::to_string(i), Block8(),
        InceptionResidual{0.20, true});
  }
  close_repeat("Repeat_2");
  add("", "Block8", Block8(), InceptionResidual{1.0, false});
  conv_7b_ = Conv2d(style.Conv(c, 1536, 1, 1));
  register_module("Conv2d_7b_1x1", conv_7b_);
  ResetHeads(pre_aux, 1536, style);
}

void InceptionResnetV2Impl::ResetHeads(int64_t pre_aux, int64_t c,
                                       const InceptionConvStyle& style) {
  aux_ = nullptr;
  logits_ = nullptr;
  if (options_.num_classes() <= 0) return;
  aux_ = register_module(
      "AuxLogits",
      InceptionAuxHead(pre_aux, InceptionGridSizes(image_size_).first,
                       options_.num_classes(), style,
                       Initializer::XavierUniform(), "Conv2d_2a_5x5",
                       "Logits"));
  logits_ = FullyConnected(FullyConnectedOptions(c, options_.num_classes())
                               .activation(Activation::kNone)
                               .weight_decay(style.weight_decay)
                               .bias_decay(style.weight_decay));
  register_module("Logits", Scope({{"Logits", logits_.ptr()}}));
}

void InceptionResnetV2Impl::CheckImageSize(int64_t size) const {
  CheckInceptionAuxNetSize(options_, kScope, "Conv2d_2a_5x5", image_size_,
                           size);
}

NetOutput InceptionResnetV2Impl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, kScope, options_.input_channels());
  CheckImageSize(images.size(2));
  NetOutput out;
  auto& ep = out.end_points;
  torch::Tensor net = stem_.Forward(images, ep);
  torch::Tensor pre_aux;
  for (auto& [name, block] : blocks_) {
    net = block(net);
    if (!name.empty()) ep.emplace_back(name, net);
    if (name == "PreAuxLogits") pre_aux = net;
  }
  net = conv_7b_(net);
  ep.emplace_back("Conv2d_7b_1x1", net);
  if (aux_) {
    out.aux_logits = aux_(pre_aux);
    ep.emplace_back("AuxLogits", out.aux_logits);
  }
  net = GlobalPool(net, ep);  // AvgPool_1a*: VALID, the whole map
  if (!logits_) {
    out.logits = net;
    return out;
  }
  net = torch::dropout(FlattenNhwc(net), 1.0 - 0.8, is_training());
  ep.emplace_back("PreLogitsFlatten", net);
  SetLogits(out, logits_(net));
  return out;
}

SLIM_REGISTER_NET_WITH_FACTS(
    "inception_resnet_v2", MakeModuleNet<InceptionResnetV2Impl>,
    NetFacts().CpuChannelsLast().Preprocessing("inception"));

}  // namespace nets
}  // namespace slimtorch
