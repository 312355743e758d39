#include "slimtorch/nets/conv_stack.h"

#include <map>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace nets {
namespace {

// TensorFlow's output size of a window op; 0 when a VALID window does not
// fit.
int64_t OutputSize(int64_t in, int64_t kernel, int64_t stride,
                   Padding padding) {
  if (padding == Padding::kSame) return (in + stride - 1) / stride;
  if (in < kernel) return 0;
  return (in - kernel) / stride + 1;
}

ConvStackSpec::Layer Conv(std::string name, int64_t out, int64_t kernel,
                          int64_t stride = 1,
                          Padding padding = Padding::kSame) {
  ConvStackSpec::Layer l;
  l.name = std::move(name);
  l.out_channels = out;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}

ConvStackSpec::Layer Pool(std::string name, int64_t kernel, int64_t stride) {
  ConvStackSpec::Layer l;
  l.name = std::move(name);
  l.pool = true;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = Padding::kValid;
  return l;
}

std::shared_ptr<Net> MakeConvStack(ConvStackSpec spec,
                                   const NetOptions& options) {
  const std::string scope = spec.scope;
  const int64_t size = spec.default_image_size;
  return std::make_shared<ModuleNet<ConvStackNetImpl>>(
      std::make_shared<ConvStackNetImpl>(std::move(spec), options), scope,
      size);
}

}  // namespace

// nets/alexnet.py, alexnet_v2 + alexnet_v2_arg_scope: biases 0.1 everywhere
// but fc8 (zeros); fc6-fc8 weights truncated_normal(0.005).
ConvStackSpec AlexNetV2Spec() {
  ConvStackSpec s;
  s.scope = "alexnet_v2";
  s.default_image_size = 224;
  s.features = {Conv("conv1", 64, 11, 4, Padding::kValid),
                Pool("pool1", 3, 2),
                Conv("conv2", 192, 5),
                Pool("pool2", 3, 2),
                Conv("conv3", 384, 3),
                Conv("conv4", 384, 3),
                Conv("conv5", 256, 3),
                Pool("pool5", 3, 2)};
  s.fc6_channels = 4096;
  s.fc6_kernel = 5;
  s.fc7_channels = 4096;
  s.conv_biases = Initializer::Constant(0.1);
  s.head_weights = Initializer::TruncatedNormal(0.005);
  s.head_biases = Initializer::Constant(0.1);
  return s;
}

// nets/overfeat.py, overfeat + overfeat_arg_scope: biases zeros, fc6/fc7
// biases 0.1, fc6-fc8 weights truncated_normal(0.005).
ConvStackSpec OverFeatSpec() {
  ConvStackSpec s;
  s.scope = "overfeat";
  s.default_image_size = 231;
  s.features = {Conv("conv1", 64, 11, 4, Padding::kValid),
                Pool("pool1", 2, 2),
                Conv("conv2", 256, 5, 1, Padding::kValid),
                Pool("pool2", 2, 2),
                Conv("conv3", 512, 3),
                Conv("conv4", 1024, 3),
                Conv("conv5", 1024, 3),
                Pool("pool5", 2, 2)};
  s.fc6_channels = 3072;
  s.fc6_kernel = 6;
  s.fc7_channels = 4096;
  s.head_weights = Initializer::TruncatedNormal(0.005);
  s.head_biases = Initializer::Constant(0.1);
  return s;
}

// nets/vgg.py: slim.repeat(n, conv 3x3) blocks of 64, 128, 256, 512, 512
// channels, each followed by a 2x2/2 max pool; vgg_arg_scope: biases zeros,
// xavier weights.
ConvStackSpec VggSpec(const std::string& name) {
  std::vector<int> repeats;
  if (name == "vgg_a") {
    repeats = {1, 1, 2, 2, 2};
  } else if (name == "vgg_16") {
    repeats = {2, 2, 3, 3, 3};
  } else if (name == "vgg_19") {
    repeats = {2, 2, 4, 4, 4};
  } else {
    SLIM_FAIL("unknown VGG variant '", name,
              "' (expected vgg_a, vgg_16 or vgg_19)");
  }
  const int64_t channels[5] = {64, 128, 256, 512, 512};
  ConvStackSpec s;
  s.scope = name;
  s.default_image_size = 224;
  for (int b = 0; b < 5; ++b) {
    const std::string block = "conv" + std::to_string(b + 1);
    for (int j = 0; j < repeats[b]; ++j) {
      s.features.push_back(Conv(block + "/" + block + "_" + std::to_string(j + 1),
                                channels[b], 3));
    }
    s.features.push_back(Pool("pool" + std::to_string(b + 1), 2, 2));
  }
  s.fc6_channels = 4096;
  s.fc6_kernel = 7;
  s.fc7_channels = 4096;
  return s;
}

ConvStackNetImpl::ConvStackNetImpl(ConvStackSpec spec,
                                   const NetOptions& options)
    : spec_(std::move(spec)), options_(options) {
  reset();
}

void ConvStackNetImpl::reset() {
  const double wd = options_.weight_decay();
  features_.clear();
  int64_t channels = options_.input_channels();
  std::map<std::string, torch::nn::ModuleDict> groups;
  for (const auto& l : spec_.features) {
    if (l.pool) {
      features_.emplace_back(nullptr);
      continue;
    }
    Conv2d conv(Conv2dOptions(channels, l.out_channels, l.kernel)
                    .stride(l.stride)
                    .padding(l.padding)
                    .weights_init(spec_.conv_weights)
                    .biases_init(spec_.conv_biases)
                    .weight_decay(wd));
    const size_t slash = l.name.find('/');
    if (slash == std::string::npos) {
      register_module(l.name, conv);
    } else {
      // A slim.repeat block: "conv3/conv3_2" lives in module "conv3".
      const std::string group = l.name.substr(0, slash);
      auto it = groups.find(group);
      if (it == groups.end()) {
        it = groups.emplace(group, torch::nn::ModuleDict()).first;
        register_module(group, it->second);
      }
      it->second->update(
          std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>{
              {l.name.substr(slash + 1), conv.ptr()}});
    }
    features_.push_back(conv);
    channels = l.out_channels;
  }
  auto head = [&](int64_t in, int64_t out, int64_t kernel) {
    return Conv2dOptions(in, out, kernel)
        .padding(Padding::kValid)
        .weights_init(spec_.head_weights)
        .biases_init(spec_.head_biases)
        .weight_decay(wd);
  };
  fc6_ = register_module("fc6",
                         Conv2d(head(channels, spec_.fc6_channels,
                                     spec_.fc6_kernel)));
  fc7_ = register_module(
      "fc7", Conv2d(head(spec_.fc6_channels, spec_.fc7_channels, 1)));
  fc8_ = nullptr;
  if (options_.num_classes() > 0) {
    fc8_ = register_module(
        "fc8", Conv2d(head(spec_.fc7_channels, options_.num_classes(), 1)
                          .activation(Activation::kNone)
                          .biases_init(Initializer::Zeros())));
  }
}

void ConvStackNetImpl::CheckImageSize(int64_t size) const {
  int64_t s = size;
  for (const auto& l : spec_.features) {
    const int64_t next = OutputSize(s, l.kernel, l.stride, l.padding);
    SLIM_CHECK(next > 0, spec_.scope, " cannot take ", size, "x", size,
               " images: ", l.name, "'s ", l.kernel, "x", l.kernel,
               " VALID window does not fit its ", s, "x", s,
               " input (default size ", spec_.default_image_size, ")");
    s = next;
  }
  SLIM_CHECK(s >= spec_.fc6_kernel, spec_.scope, " cannot take ", size, "x",
             size, " images: fc6's ", spec_.fc6_kernel, "x", spec_.fc6_kernel,
             " VALID window does not fit its ", s, "x", s, " input (default size ",
             spec_.default_image_size, ")");
  SLIM_CHECK(options_.global_pool().value_or(false) || s == spec_.fc6_kernel,
             spec_.scope, " cannot take ", size, "x",
             size, " images: fc6 would leave a ", s - spec_.fc6_kernel + 1, "x",
             s - spec_.fc6_kernel + 1,
             " map, and TF-Slim squeezes fc8 to [N, classes], which needs 1x1 "
             "unless global_pool (default size ",
             spec_.default_image_size, ")");
}

NetOutput ConvStackNetImpl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, spec_.scope, options_.input_channels());
  CheckImageSize(images.size(2));
  NetOutput out;
  auto& ep = out.end_points;
  const std::string prefix = spec_.scope + "/";
  torch::Tensor net = images;
  for (size_t i = 0; i < spec_.features.size(); ++i) {
    const auto& l = spec_.features[i];
    net = l.pool ? MaxPool2d(net, l.kernel, l.stride, l.padding)
                 : features_[i](net);
    ep.emplace_back(prefix + l.name, net);
  }
  const double drop = 1.0 - spec_.dropout_keep_prob;
  net = fc6_(net);
  ep.emplace_back(prefix + "fc6", net);
  net = torch::dropout(net, drop, is_training());
  net = fc7_(net);
  ep.emplace_back(prefix + "fc7", net);
  if (options_.global_pool().value_or(false)) {
    net = GlobalPool(net, ep);
  }
  if (!fc8_) {
    out.logits = net;
    return out;
  }
  net = torch::dropout(net, drop, is_training());
  net = SqueezeSpatial(fc8_(net), options_);
  ep.emplace_back(prefix + "fc8", net);
  out.logits = net;
  return out;
}

// alexnet_v2 and overfeat: ImageNet nets TF-Slim's preprocessing_factory
// leaves unmapped; VGG's mean subtraction and aspect-preserving resize suit
// them.
SLIM_REGISTER_NET_WITH_FACTS(
    "alexnet_v2",
    [](const NetOptions& o) { return MakeConvStack(AlexNetV2Spec(), o); },
    NetFacts().Preprocessing("vgg"));
SLIM_REGISTER_NET_WITH_FACTS(
    "overfeat",
    [](const NetOptions& o) { return MakeConvStack(OverFeatSpec(), o); },
    NetFacts().Preprocessing("vgg"));
SLIM_REGISTER_NET_WITH_FACTS(
    "vgg_a",
    [](const NetOptions& o) { return MakeConvStack(VggSpec("vgg_a"), o); },
    NetFacts().CpuChannelsLast().Preprocessing("vgg"));
SLIM_REGISTER_NET_WITH_FACTS(
    "vgg_16",
    [](const NetOptions& o) { return MakeConvStack(VggSpec("vgg_16"), o); },
    NetFacts().CpuChannelsLast().Preprocessing("vgg"));
SLIM_REGISTER_NET_WITH_FACTS(
    "vgg_19",
    [](const NetOptions& o) { return MakeConvStack(VggSpec("vgg_19"), o); },
    NetFacts().CpuChannelsLast().Preprocessing("vgg"));

}  // namespace nets
}  // namespace slimtorch
