#include "slimtorch/nets/inception_v2.h"

#include <algorithm>
#include <utility>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace nets {
namespace {

using Kind = InceptionOp::Kind;

InceptionOp Conv(const std::string& scope, int64_t out, int64_t k,
                 double init_stddev = 0.0, int64_t stride = 1) {
  InceptionOp op;
  op.scope = scope;
  op.out = out;
  op.kh = op.kw = k;
  op.stride = stride;
  op.init_stddev = init_stddev;
  return op;
}
InceptionOp Pool(Kind kind, const std::string& scope, int64_t stride = 1) {
  InceptionOp op;
  op.kind = kind;
  op.scope = scope;
  op.kh = op.kw = 3;
  op.stride = stride;
  return op;
}

// A regular block: Branch_0 1x1; Branch_1 1x1 → 3x3; Branch_2 1x1 → 3x3 →
// 3x3; Branch_3 3x3 pool → 1x1 (the 1x1s after branches 1, 2 start with
// truncated_normal(0.09), branch 3's with truncated_normal(0.1)).
std::vector<InceptionBranch> Block(int64_t b0, int64_t b1a, int64_t b1b,
                                   int64_t b2a, int64_t b2b, int64_t b3,
                                   Kind pool = Kind::kAvgPool) {
  return {{Conv("Conv2d_0a_1x1", b0, 1)},
          {Conv("Conv2d_0a_1x1", b1a, 1, 0.09), Conv("Conv2d_0b_3x3", b1b, 3)},
          {Conv("Conv2d_0a_1x1", b2a, 1, 0.09), Conv("Conv2d_0b_3x3", b2b, 3),
           Conv("Conv2d_0c_3x3", b2b, 3)},
          {Pool(pool, pool == Kind::kAvgPool ? "AvgPool_0a_3x3" : "MaxPool_0a_3x3"),
           Conv("Conv2d_0b_1x1", b3, 1, 0.1)}};
}

// A grid-reduction block (stride 2 'SAME').
std::vector<InceptionBranch> Reduction(int64_t b0a, int64_t b0b, int64_t b1a,
                                       int64_t b1b) {
  return {{Conv("Conv2d_0a_1x1", b0a, 1, 0.09),
           Conv("Conv2d_1a_3x3", b0b, 3, 0.0, 2)},
          {Conv("Conv2d_0a_1x1", b1a, 1, 0.09), Conv("Conv2d_0b_3x3", b1b, 3),
           Conv("Conv2d_1a_3x3", b1b, 3, 0.0, 2)},
          {Pool(Kind::kMaxPool, "MaxPool_1a_3x3", 2)}};
}

int64_t FinalMapSize(int64_t size) {
  for (int i = 0; i < 5; ++i) size = (size + 1) / 2;
  return size;
}

}  // namespace

InceptionV2Impl::InceptionV2Impl(const NetOptions& options)
    : options_(options) {
  reset();
}

void InceptionV2Impl::reset() {
  const double wd = options_.weight_decay();
  conv1a_ = register_module(
      "Conv2d_1a_7x7",
      SeparableConv2d(SeparableConv2dOptions(options_.input_channels(), 64, 7,
                                             /*depth_multiplier=*/8)
                          .stride(2)
                          .weights_init(Initializer::TruncatedNormal(1.0))));
  auto conv = [wd](int64_t in, int64_t out, int64_t k) {
    return Conv2dOptions(in, out, k)
        .weights_init(Initializer::VarianceScaling())
        .weight_decay(wd)
        .batch_norm(BatchNormOptions(out).decay(0.9997).epsilon(0.001));
  };
  conv2b_ = register_module(
      "Conv2d_2b_1x1",
      Conv2d(conv(64, 64, 1).weights_init(Initializer::TruncatedNormal(0.1))));
  conv2c_ = register_module("Conv2d_2c_3x3", Conv2d(conv(64, 192, 3)));
  const std::pair<const char*, std::vector<InceptionBranch>> blocks[] = {
      {"Mixed_3b", Block(64, 64, 64, 64, 96, 32)},
      {"Mixed_3c", Block(64, 64, 96, 64, 96, 64)},
      {"Mixed_4a", Reduction(128, 160, 64, 96)},
      {"Mixed_4b", Block(224, 64, 96, 96, 128, 128)},
      {"Mixed_4c", Block(192, 96, 128, 96, 128, 128)},
      {"Mixed_4d", Block(160, 128, 160, 128, 160, 96)},
      {"Mixed_4e", Block(96, 128, 192, 160, 192, 96)},
      {"Mixed_5a", Reduction(128, 192, 192, 256)},
      {"Mixed_5b", Block(352, 192, 320, 160, 224, 128)},
      {"Mixed_5c", Block(352, 192, 320, 192, 224, 128, Kind::kMaxPool)},
  };
  mixed_.clear();
  int64_t c = 192;
  for (const auto& [name, branches] : blocks) {
    InceptionConvStyle style;
    style.weight_decay = wd;
    InceptionMixed m(c, branches, style);
    register_module(name, m);
    mixed_.emplace_back(name, m);
    c = m->out_channels();
  }
  logits_ = nullptr;
  if (options_.num_classes() > 0) {
    logits_ = Conv2d(Conv2dOptions(c, options_.num_classes(), 1)
                         .activation(Activation::kNone)
                         .weights_init(Initializer::VarianceScaling())
                         .weight_decay(wd));
    register_module("Logits", Scope({{"Conv2d_1c_1x1", logits_.ptr()}}));
  }
}

void InceptionV2Impl::CheckImageSize(int64_t size) const {
  const int64_t f = FinalMapSize(size);
  SLIM_CHECK(size > 0 && (f <= 8 || options_.global_pool().value_or(false)),
             "InceptionV2 cannot take ", size, "x", size,
             " images: Mixed_5c would be ", f, "x", f,
             ", and AvgPool_1a (7x7 VALID, stride 2) must leave 1x1 for "
             "TF-Slim's squeeze (sizes up to 256 work, any with global_pool; "
             "default 224)");
}

NetOutput InceptionV2Impl::forward(const torch::Tensor& images) {
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
    net = block(net);
    ep.emplace_back(name, net);
  }
  if (options_.global_pool().value_or(false)) {
    net = GlobalPool(net, ep);
  } else {
    net = AvgPool2d(net, std::min<int64_t>(7, net.size(2)), 2,
                    Padding::kValid);
  }
  if (!logits_) {
    out.logits = net;
    return out;
  }
  net = torch::dropout(net, 1.0 - 0.8, is_training());
  SetLogits(out, SqueezeSpatial(logits_(net), options_));
  return out;
}

SLIM_REGISTER_NET_WITH_FACTS(
    "inception_v2", MakeModuleNet<InceptionV2Impl>,
    NetFacts().CpuChannelsLast().Preprocessing("inception"));

}  // namespace nets
}  // namespace slimtorch
