#include "slimtorch/nets/inception_v3.h"

#include <algorithm>
#include <utility>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace nets {
namespace {

using Kind = InceptionOp::Kind;

InceptionOp Conv(const std::string& scope, int64_t out, int64_t kh, int64_t kw,
                 int64_t stride = 1, Padding padding = Padding::kSame) {
  return InceptionConv(scope, out, kh, kw, stride, padding);
}
InceptionOp Pool(Kind kind, const std::string& scope, int64_t k,
                 int64_t stride = 1, Padding padding = Padding::kSame) {
  return InceptionPool(kind, scope, k, stride, padding);
}
const auto& Split = InceptionSplit;

const Padding kValid = Padding::kValid;

// inception_v3_base's Mixed blocks (depth_multiplier 1).
std::vector<std::pair<std::string, std::vector<InceptionBranch>>> Blocks() {
  auto b5 = [](int64_t pool_depth, const char* b1a, const char* b1b) {
    return std::vector<InceptionBranch>{
        {Conv("Conv2d_0a_1x1", 64, 1, 1)},
        {Conv(b1a, 48, 1, 1), Conv(b1b, 64, 5, 5)},
        {Conv("Conv2d_0a_1x1", 64, 1, 1), Conv("Conv2d_0b_3x3", 96, 3, 3),
         Conv("Conv2d_0c_3x3", 96, 3, 3)},
        {Pool(Kind::kAvgPool, "AvgPool_0a_3x3", 3),
         Conv("Conv2d_0b_1x1", pool_depth, 1, 1)}};
  };
  auto b6 = [](int64_t d) {
    return std::vector<InceptionBranch>{
        {Conv("Conv2d_0a_1x1", 192, 1, 1)},
        {Conv("Conv2d_0a_1x1", d, 1, 1), Conv("Conv2d_0b_1x7", d, 1, 7),
         Conv("Conv2d_0c_7x1", 192, 7, 1)},
        {Conv("Conv2d_0a_1x1", d, 1, 1), Conv("Conv2d_0b_7x1", d, 7, 1),
         Conv("Conv2d_0c_1x7", d, 1, 7), Conv("Conv2d_0d_7x1", d, 7, 1),
         Conv("Conv2d_0e_1x7", 192, 1, 7)},
        {Pool(Kind::kAvgPool, "AvgPool_0a_3x3", 3),
         Conv("Conv2d_0b_1x1", 192, 1, 1)}};
  };
  auto b7 = [](const char* b1_3x1) {
    return std::vector<InceptionBranch>{
        {Conv("Conv2d_0a_1x1", 320, 1, 1)},
        {Conv("Conv2d_0a_1x1", 384, 1, 1),
         Split("Conv2d_0b_1x3", b1_3x1, 384)},
        {Conv("Conv2d_0a_1x1", 448, 1, 1), Conv("Conv2d_0b_3x3", 384, 3, 3),
         Split("Conv2d_0c_1x3", "Conv2d_0d_3x1", 384)},
        {Pool(Kind::kAvgPool, "AvgPool_0a_3x3", 3),
         Conv("Conv2d_0b_1x1", 192, 1, 1)}};
  };
  return {
      {"Mixed_5b", b5(32, "Conv2d_0a_1x1", "Conv2d_0b_5x5")},
      {"Mixed_5c", b5(64, "Conv2d_0b_1x1", "Conv_1_0c_5x5")},
      {"Mixed_5d", b5(64, "Conv2d_0a_1x1", "Conv2d_0b_5x5")},
      {"Mixed_6a",
       {{Conv("Conv2d_1a_1x1", 384, 3, 3, 2, kValid)},
        {Conv("Conv2d_0a_1x1", 64, 1, 1), Conv("Conv2d_0b_3x3", 96, 3, 3),
         Conv("Conv2d_1a_1x1", 96, 3, 3, 2, kValid)},
        {Pool(Kind::kMaxPool, "MaxPool_1a_3x3", 3, 2, kValid)}}},
      {"Mixed_6b", b6(128)},
      {"Mixed_6c", b6(160)},
      {"Mixed_6d", b6(160)},
      {"Mixed_6e", b6(192)},
      {"Mixed_7a",
       {{Conv("Conv2d_0a_1x1", 192, 1, 1),
         Conv("Conv2d_1a_3x3", 320, 3, 3, 2, kValid)},
        {Conv("Conv2d_0a_1x1", 192, 1, 1), Conv("Conv2d_0b_1x7", 192, 1, 7),
         Conv("Conv2d_0c_7x1", 192, 7, 1),
         Conv("Conv2d_1a_3x3", 192, 3, 3, 2, kValid)},
        {Pool(Kind::kMaxPool, "MaxPool_1a_3x3", 3, 2, kValid)}}},
      {"Mixed_7b", b7("Conv2d_0b_3x1")},
      {"Mixed_7c", b7("Conv2d_0c_3x1")},
  };
}

// inception_v3_arg_scope: batch norm 0.9997 / 0.001 without gamma, ReLU,
// variance-scaling weights, L2.
Conv2dOptions V3Conv(int64_t in, int64_t out, int64_t kh, int64_t kw,
                     double wd) {
  InceptionConvStyle style;
  style.weight_decay = wd;
  return style.Conv(in, out, kh, kw);
}

}  // namespace

InceptionV3Impl::InceptionV3Impl(const NetOptions& options)
    : options_(options) {
  const int64_t size =
      options.image_size() > 0 ? options.image_size() : kDefaultImageSize;
  if (options_.num_classes() > 0) {
    // AuxLogits: a 5x5 /3 VALID pool on Mixed_6e, then a conv of
    // _reduced_kernel_size_for_small_input(map, [5, 5]) that TF-Slim then
    // squeezes, so the pooled map must be at most 5x5.
    const int64_t m6 = InceptionGridSizes(size).first;
    const int64_t aux = ValidSize(m6, 5, 3);
    SLIM_CHECK(m6 >= 5 && aux <= 5, "InceptionV3 cannot be built for ", size,
               "x", size, " images: AuxLogits needs Mixed_6e between 5x5 and "
               "19x19 (it would be ", m6, "x", m6,
               "); sizes 107 to 330 work (default 299)");
    aux_kernel_ = aux;
  }
  reset();
}

void InceptionV3Impl::reset() {
  const double wd = options_.weight_decay();
  InceptionConvStyle style;
  style.weight_decay = wd;
  int64_t c = stem_.Build(*this, options_.input_channels(), InceptionStem(), style);
  mixed_.clear();
  int64_t mixed_6e = 0;
  for (auto& [name, branches] : Blocks()) {
    InceptionMixed m(c, branches, style);
    register_module(name, m);
    mixed_.emplace_back(name, m);
    c = m->out_channels();
    if (name == "Mixed_6e") mixed_6e = c;
  }
  aux_conv1_ = aux_conv2_ = aux_logits_ = logits_ = nullptr;
  if (options_.num_classes() <= 0) return;
  aux_conv1_ = Conv2d(V3Conv(mixed_6e, 128, 1, 1, wd));
  aux_conv2_ = Conv2d(V3Conv(128, 768, aux_kernel_, aux_kernel_, wd)
                          .padding(kValid)
                          .weights_init(Initializer::TruncatedNormal(0.01)));
  aux_logits_ = Conv2d(Conv2dOptions(768, options_.num_classes(), 1)
                           .activation(Activation::kNone)
                           .weights_init(Initializer::TruncatedNormal(0.001))
                           .weight_decay(wd));
  register_module("AuxLogits", Scope({{"Conv2d_1b_1x1", aux_conv1_.ptr()},
                                      // 'Conv2d_2a_{}x{}'.format(*kernel)
                                      {"Conv2d_2a_" + std::to_string(aux_kernel_) +
                                           "x" + std::to_string(aux_kernel_),
                                       aux_conv2_.ptr()},
                                      {"Conv2d_2b_1x1", aux_logits_.ptr()}}));
  logits_ = Conv2d(Conv2dOptions(c, options_.num_classes(), 1)
                       .activation(Activation::kNone)
                       .weights_init(Initializer::VarianceScaling())
                       .weight_decay(wd));
  register_module("Logits", Scope({{"Conv2d_1c_1x1", logits_.ptr()}}));
}

void InceptionV3Impl::CheckImageSize(int64_t size) const {
  const auto [m6, m7] = InceptionGridSizes(size);
  const int64_t aux = ValidSize(m6, 5, 3);
  SLIM_CHECK(m7 >= 1, "InceptionV3 cannot take ", size, "x", size,
             " images: its VALID stem and reductions need at least 75x75 "
             "(default 299)");
  const bool global_pool = options_.global_pool().value_or(false);
  SLIM_CHECK(m7 <= 9 || global_pool, "InceptionV3 cannot take ", size, "x",
             size, " images: the 8x8 average pool must leave a 1x1 map for "
             "TF-Slim's squeeze (Mixed_7c would be ", m7, "x", m7,
             "); sizes up to 330 work, any with global_pool (default 299)");
  SLIM_CHECK(options_.num_classes() <= 0 || aux == aux_kernel_,
             "InceptionV3 was built for images whose AuxLogits map is ",
             aux_kernel_, "x", aux_kernel_, " (its Conv2d_2a_5x5 kernel) and "
             "cannot take ", size, "x", size, " (Mixed_6e would be ", m6, "x",
             m6, "); build it with that image size (--train_image_size / "
             "--eval_image_size)");
}

NetOutput InceptionV3Impl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, kScope, options_.input_channels());
  CheckImageSize(images.size(2));
  NetOutput out;
  auto& ep = out.end_points;
  torch::Tensor net = stem_.Forward(images, ep);
  torch::Tensor mixed_6e;
  for (auto& [name, block] : mixed_) {
    net = block(net);
    ep.emplace_back(name, net);
    if (name == "Mixed_6e") mixed_6e = net;
  }
  if (aux_logits_) {
    torch::Tensor aux = AvgPool2d(mixed_6e, 5, 3, kValid);
    aux = aux_conv2_(aux_conv1_(aux));
    out.aux_logits = SqueezeSpatial(aux_logits_(aux), options_);
    ep.emplace_back("AuxLogits", out.aux_logits);
  }
  if (options_.global_pool().value_or(false)) {
    net = GlobalPool(net, ep);
  } else {
    net = AvgPool2d(net, std::min<int64_t>(8, net.size(2)), 2, kValid);
  }
  net = torch::dropout(net, 1.0 - 0.8, is_training());
  ep.emplace_back("PreLogits", net);
  if (!logits_) {
    out.logits = net;
    return out;
  }
  SetLogits(out, SqueezeSpatial(logits_(net), options_));
  return out;
}

SLIM_REGISTER_NET_WITH_FACTS(
    "inception_v3", MakeModuleNet<InceptionV3Impl>,
    NetFacts().CpuChannelsLast().Preprocessing("inception"));

}  // namespace nets
}  // namespace slimtorch
