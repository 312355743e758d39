#include "slimtorch/nets/i3d.h"

#include <algorithm>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"

namespace slimtorch {
namespace nets {
namespace {

// i3d_arg_scope / s3dg_arg_scope's batch norm: decay 0.999, epsilon 0.001,
// no gamma (not fused: the moving variance TensorFlow keeps is the biased
// batch variance; ours, as every slimtorch batch norm, the Bessel-corrected
// one, which differs by a factor N*T*H*W / (N*T*H*W - 1)).
BatchNormOptions VideoBatchNorm(int64_t channels) {
  return BatchNormOptions(channels).decay(0.999).epsilon(0.001);
}

// slim.conv3d in s3dg_base's arg scope: truncated_normal(0.01) weights,
// batch norm, ReLU.
Conv3d BaseConv(int64_t in, int64_t out, Extent3d kernel, Extent3d stride,
                double wd) {
  return Conv3d(Conv3dOptions(in, out, kernel)
                    .stride(stride)
                    .weights_init(Initializer::TruncatedNormal(0.01))
                    .weight_decay(wd)
                    .batch_norm(VideoBatchNorm(out)));
}

// conv3d_spatiotemporal (+ self_gating when `gated`): a [kt, kh, kw] conv,
// split into [1, kh, kw] and a temporal [kt, 1, 1] one when the net is
// separable and kt > 1 (strides split alike).
SpatioTemporalConv MakeConv(int64_t in, int64_t out, Extent3d kernel,
                            const VideoNetConfig& config, double wd, bool gated,
                            Extent3d stride = {1, 1, 1}) {
  SpatioTemporalConv c;
  if (config.separable && kernel[0] != 1) {
    c.conv = BaseConv(in, out, {1, kernel[1], kernel[2]},
                      {1, stride[1], stride[2]}, wd);
    c.temporal = Conv3d(Conv3dOptions(out, out, {kernel[0], 1, 1})
                            .stride({stride[0], 1, 1})
                            .center_init(true)
                            .weight_decay(wd));
  } else {
    c.conv = BaseConv(in, out, kernel, stride, wd);
  }
  if (gated) {
    c.gate = Conv3d(Conv3dOptions(out, out, {1, 1, 1})
                        .activation(Activation::kNone)
                        .use_bias(false)
                        .weights_init(Initializer::TruncatedNormal(0.01))
                        .weight_decay(wd));
  }
  return c;
}

// Output size of the 'SAME' stride-2 steps along H and W.
int64_t Mixed5cSize(int64_t size) {
  for (int i = 0; i < 5; ++i) size = (size + 1) / 2;
  return size;
}

}  // namespace

torch::Tensor SpatioTemporalConv::operator()(const torch::Tensor& x) {
  torch::Tensor y = conv(x);
  if (temporal) y = temporal(y);
  if (!gate) return y;
  // s3dg.self_gating: the mean over T, H and W (TensorFlow: a [T, W, H]
  // 'VALID' average pool, tiled back) weighs each channel.
  return Mul(y, Sigmoid(gate(SpatiotemporalMean(y))));
}

NamedModules SpatioTemporalConv::Named(const std::string& scope) const {
  NamedModules m = {{scope, conv.ptr()}};
  if (temporal) m.emplace_back(scope + "/temporal", temporal.ptr());
  if (gate) m.emplace_back(scope + "/self_gating/transformer_W", gate.ptr());
  return m;
}

I3dMixedImpl::I3dMixedImpl(int64_t in_channels, Depths depths,
                           VideoNetConfig config, double weight_decay)
    : in_(in_channels),
      d_(depths),
      config_(config),
      weight_decay_(weight_decay) {
  reset();
}

void I3dMixedImpl::reset() {
  const double wd = weight_decay_;
  const VideoNetConfig& c = config_;
  const bool g = c.gating;
  b0_ = MakeConv(in_, d_.b0, {1, 1, 1}, c, wd, g);
  b1a_ = MakeConv(in_, d_.b1a, {1, 1, 1}, c, wd, false);
  b1b_ = MakeConv(d_.b1a, d_.b1b, {3, 3, 3}, c, wd, g);
  b2a_ = MakeConv(in_, d_.b2a, {1, 1, 1}, c, wd, false);
  b2b_ = MakeConv(d_.b2a, d_.b2b, {3, 3, 3}, c, wd, g);
  b3_ = MakeConv(in_, d_.b3, {1, 1, 1}, c, wd, g);
  auto join = [](NamedModules a, const NamedModules& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  register_module("Branch_0", Scope(b0_.Named("Conv2d_0a_1x1")));
  register_module("Branch_1", Scope(join(b1a_.Named("Conv2d_0a_1x1"),
                                         b1b_.Named("Conv2d_0b_3x3"))));
  register_module("Branch_2", Scope(join(b2a_.Named("Conv2d_0a_1x1"),
                                         b2b_.Named("Conv2d_0b_3x3"))));
  register_module("Branch_3", Scope(b3_.Named("Conv2d_0b_1x1")));
}

torch::Tensor I3dMixedImpl::forward(const torch::Tensor& x) {
  torch::Tensor branch0 = b0_(x);
  torch::Tensor branch1 = b1b_(b1a_(x));
  torch::Tensor branch2 = b2b_(b2a_(x));
  torch::Tensor branch3 =
      b3_(MaxPool3d(x, {3, 3, 3}, {1, 1, 1}, Padding::kSame));
  return Concat({branch0, branch1, branch2, branch3});
}

I3dImpl::I3dImpl(const NetOptions& options, VideoNetConfig config,
                 double dropout_keep_prob)
    : options_(options),
      config_(config),
      dropout_keep_prob_(dropout_keep_prob) {
  reset();
}

void I3dImpl::reset() {
  const double wd = options_.weight_decay();
  const VideoNetConfig& c = config_;
  auto add = [this](const std::string& scope, const SpatioTemporalConv& conv) {
    for (const auto& [name, module] : conv.Named(scope)) {
      register_module(name, module);
    }
  };
  // TF-Slim never splits the first conv (separable=False).
  conv1a_ = SpatioTemporalConv{BaseConv(options_.input_channels(), 64,
                                        {c.first_temporal_kernel, 7, 7},
                                        {2, 2, 2}, wd)};
  add("Conv2d_1a_7x7", conv1a_);
  conv2b_ = MakeConv(64, 64, {1, 1, 1}, c, wd, false);
  add("Conv2d_2b_1x1", conv2b_);
  conv2c_ = MakeConv(64, 192, {3, 3, 3}, c, wd, c.gating);
  add("Conv2d_2c_3x3", conv2c_);
  struct Block {
    const char* name;
    I3dMixedImpl::Depths d;
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
    I3dMixed m(channels, b.d, c, wd);
    register_module(b.name, m);
    channels = m->out_channels();
    mixed_.emplace_back(b.name, m);
  }
  logits_ = nullptr;
  if (options_.num_classes() > 0) {
    // Outside s3dg_base's arg scope: slim.conv3d's default xavier weights.
    logits_ = Conv3d(Conv3dOptions(channels, options_.num_classes(), {1, 1, 1})
                         .activation(Activation::kNone)
                         .weight_decay(wd));
    register_module("Logits", Scope({{"Conv2d_0c_1x1", logits_.ptr()}}));
  }
}

void I3dImpl::CheckClips(const torch::Tensor& clips) const {
  SLIM_CHECK(clips.dim() == 5 && clips.size(1) == options_.input_channels() &&
                 clips.size(2) > 0,
             kScope, " (a video net) expects clips [N, ",
             options_.input_channels(), ", T, H, W], got ", clips.sizes());
  SLIM_CHECK(!config_.gating || clips.size(3) == clips.size(4), kScope,
             " with self-gating expects square frames (TF-Slim's gating pools "
             "a [T, W, H] window), got ",
             clips.size(3), "x", clips.size(4));
  CheckImageSize(std::max(clips.size(3), clips.size(4)));
}

NetOutput I3dImpl::forward(const torch::Tensor& clips) {
  CheckClips(clips);
  NetOutput out;
  auto& ep = out.end_points;
  torch::Tensor net = conv1a_(clips);
  ep.emplace_back("Conv2d_1a_7x7", net);
  net = MaxPool3d(net, {1, 3, 3}, {1, 2, 2}, Padding::kSame);
  ep.emplace_back("MaxPool_2a_3x3", net);
  net = conv2b_(net);
  ep.emplace_back("Conv2d_2b_1x1", net);
  net = conv2c_(net);
  ep.emplace_back("Conv2d_2c_3x3", net);
  net = MaxPool3d(net, {1, 3, 3}, {1, 2, 2}, Padding::kSame);
  ep.emplace_back("MaxPool_3a_3x3", net);
  for (auto& [name, block] : mixed_) {
    if (name == "Mixed_4b") {
      net = MaxPool3d(net, {3, 3, 3}, {2, 2, 2}, Padding::kSame);
      ep.emplace_back("MaxPool_4a_3x3", net);
    } else if (name == "Mixed_5b") {
      net = MaxPool3d(net, {2, 2, 2}, {2, 2, 2}, Padding::kSame);
      ep.emplace_back("MaxPool_5a_2x2", net);
    }
    net = block(net);
    ep.emplace_back(name, net);
  }
  Head(net, out);
  return out;
}

// AvgPool_0a_7x7 (its window shrunk to the map: reduced_kernel_size_3d),
// dropout, the 1x1x1 logits conv, then the mean over time; with H and W
// pooled to 1 that is the mean over T, H and W.
torch::Tensor I3dImpl::Head(torch::Tensor net, NetOutput& out) {
  net = AvgPool3d(
      net,
      {std::min<int64_t>(2, net.size(2)), std::min<int64_t>(7, net.size(3)),
       std::min<int64_t>(7, net.size(4))},
      {1, 1, 1}, Padding::kValid);
  if (!logits_) {
    out.logits = net;
    return net;
  }
  net = torch::dropout(net, 1.0 - dropout_keep_prob_, is_training());
  torch::Tensor logits = SpatiotemporalMean(logits_(net));
  if (options_.spatial_squeeze()) {
    logits = SqueezeThw(logits);
  } else {
    // TF-Slim's [N, 1, 1, C] without the squeeze: ours [N, C, 1, 1].
    logits = logits.squeeze(2);
  }
  SetLogits(out, logits);
  return logits;
}

void I3dImpl::CheckImageSize(int64_t size) const {
  SLIM_CHECK(size > 0 && Mixed5cSize(size) <= 7, kScope, " cannot take ", size,
             "x", size, " frames: Mixed_5c would be ", Mixed5cSize(size), "x",
             Mixed5cSize(size),
             ", and the head's squeeze needs its [min(2, T), min(7, H), min(7, "
             "W)] 'VALID' average pool to give 1x1 (sizes 1 to 224 work; "
             "default 224)");
}

namespace {

std::shared_ptr<Net> MakeVideoNet(const NetOptions& options,
                                  VideoNetConfig config) {
  return std::make_shared<ModuleNet<I3dImpl>>(
      std::make_shared<I3dImpl>(options, config), I3dImpl::kScope,
      I3dImpl::kDefaultImageSize);
}

}  // namespace

// i3d: s3dg_base(first_temporal_kernel_size=7, gating_startat=None) in
// i3d_arg_scope (separable_conv3d=False).
SLIM_REGISTER_NET_WITH_FACTS(
    "i3d",
    [](const NetOptions& o) {
      return MakeVideoNet(o, VideoNetConfig{7, false, false});
    },
    NetFacts().NumFrames(I3dImpl::kDefaultNumFrames));
// s3dg: s3dg's defaults (first_temporal_kernel_size=3, gating from
// Conv2d_2c_3x3) in s3dg_arg_scope (separable=True).
SLIM_REGISTER_NET_WITH_FACTS(
    "s3dg",
    [](const NetOptions& o) {
      return MakeVideoNet(o, VideoNetConfig{3, true, true});
    },
    NetFacts().NumFrames(I3dImpl::kDefaultNumFrames));

}  // namespace nets
}  // namespace slimtorch
