#include "slimtorch/nets/mobilenet_v1.h"

#include <algorithm>
#include <utility>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace nets {
namespace {

struct SepConv {
  int64_t stride;
  int64_t depth;
};
// _CONV_DEFS after Conv2d_0.
const SepConv kSepConvs[13] = {{1, 64},   {2, 128},  {1, 128}, {2, 256},
                               {1, 256},  {2, 512},  {1, 512}, {1, 512},
                               {1, 512},  {1, 512},  {1, 512}, {2, 1024},
                               {1, 1024}};

Conv2dOptions MobileConv(int64_t in, int64_t out, int64_t kernel,
                         int64_t stride, double wd) {
  return Conv2dOptions(in, out, kernel)
      .stride(stride)
      .activation(Activation::kRelu6)
      .weights_init(Initializer::TruncatedNormal(0.09))
      .weight_decay(wd)
      .batch_norm(
          BatchNormOptions(out).decay(0.9997).epsilon(0.001).scale(true));
}

int64_t FinalMapSize(int64_t size) {
  for (int i = 0; i < 5; ++i) size = (size + 1) / 2;  // five stride-2 'SAME'
  return size;
}

}  // namespace

MobileNetV1Impl::MobileNetV1Impl(double depth_multiplier,
                                 const NetOptions& options)
    : multiplier_(depth_multiplier), options_(options) {
  SLIM_CHECK(multiplier_ > 0, "MobileNet v1: depth_multiplier must be "
                              "positive, got ", multiplier_);
  reset();
}

void MobileNetV1Impl::reset() {
  const double wd = options_.weight_decay();
  auto depth = [this](int64_t d) {
    return std::max<int64_t>(static_cast<int64_t>(d * multiplier_), 8);
  };
  layers_.clear();
  int64_t in = depth(32);
  layers_.emplace_back("Conv2d_0",
                       Conv2d(MobileConv(options_.input_channels(), in, 3, 2, wd)));
  for (int i = 0; i < 13; ++i) {
    const std::string n = "Conv2d_" + std::to_string(i + 1);
    layers_.emplace_back(
        n + "_depthwise",
        Conv2d(MobileConv(in, in, 3, kSepConvs[i].stride, /*wd=*/0.0)
                   .depthwise(true)));
    const int64_t out = depth(kSepConvs[i].depth);
    layers_.emplace_back(n + "_pointwise",
                         Conv2d(MobileConv(in, out, 1, 1, wd)));
    in = out;
  }
  for (auto& [name, conv] : layers_) register_module(name, conv);
  logits_ = nullptr;
  if (options_.num_classes() > 0) {
    logits_ = Conv2d(Conv2dOptions(in, options_.num_classes(), 1)
                         .activation(Activation::kNone)
                         .weights_init(Initializer::TruncatedNormal(0.09))
                         .weight_decay(wd));
    register_module("Logits", Scope({{"Conv2d_1c_1x1", logits_.ptr()}}));
  }
}

void MobileNetV1Impl::CheckImageSize(int64_t size) const {
  const int64_t f = FinalMapSize(size);
  SLIM_CHECK(size > 0 && (f <= 8 || options_.global_pool().value_or(false)),
             "MobilenetV1 cannot take ", size, "x", size,
             " images: Conv2d_13 would be ", f, "x", f,
             ", and AvgPool_1a (7x7 VALID, stride 2) must leave 1x1 for "
             "TF-Slim's squeeze (sizes up to 256 work, any with global_pool; "
             "default 224)");
}

NetOutput MobileNetV1Impl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, "MobilenetV1", options_.input_channels());
  CheckImageSize(images.size(2));
  NetOutput out;
  torch::Tensor net = images;
  for (auto& [name, conv] : layers_) {
    net = conv(net);
    out.end_points.emplace_back(name, net);
  }
  // _reduced_kernel_size_for_small_input: the map's size when under 7.
  if (options_.global_pool().value_or(false)) {
    net = GlobalPool(net, out.end_points);
  } else {
    const int64_t k = std::min<int64_t>(7, net.size(2));
    net = AvgPool2d(net, k, 2, Padding::kValid);
    out.end_points.emplace_back("AvgPool_1a", net);
  }
  if (!logits_) {
    out.logits = net;
    return out;
  }
  net = torch::dropout(net, 1.0 - 0.999, is_training());
  SetLogits(out, SqueezeSpatial(logits_(net), options_));
  return out;
}

// Every width takes inception preprocessing, as mobilenet_v1 does in
// TF-Slim's preprocessing_factory (which leaves the other widths unmapped).
#define SLIMTORCH_REGISTER_MOBILENET_V1(name, multiplier)                    \
  SLIM_REGISTER_NET_WITH_FACTS(                                              \
      name,                                                                  \
      [](const NetOptions& o) -> std::shared_ptr<Net> {                      \
        return std::make_shared<ModuleNet<MobileNetV1Impl>>(                 \
            std::make_shared<MobileNetV1Impl>(multiplier, o), "MobilenetV1", \
            224);                                                            \
      },                                                                     \
      NetFacts().CpuChannelsLast().Preprocessing("inception"))
SLIMTORCH_REGISTER_MOBILENET_V1("mobilenet_v1", 1.0);
SLIMTORCH_REGISTER_MOBILENET_V1("mobilenet_v1_075", 0.75);
SLIMTORCH_REGISTER_MOBILENET_V1("mobilenet_v1_050", 0.5);
SLIMTORCH_REGISTER_MOBILENET_V1("mobilenet_v1_025", 0.25);

}  // namespace nets
}  // namespace slimtorch
