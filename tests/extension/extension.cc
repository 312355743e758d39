// A net, an optimizer and a dataset (spec and converter) defined here and
// nowhere else: built into libslimtorch_test_extension.so, which
// tests/e2e/extension.sh preloads into the unchanged tools. Their
// registrations are all it takes for train_image_classifier,
// eval_image_classifier, export_inference_graph (and its --model_summary)
// and download_and_convert_data to know them.
//
//   bars:        16x16 gray images of one bar, horizontal (label 0) or
//                vertical (label 1), at a position drawn per image; train
//                256, test 64; bars_<split>.tfrecord + labels.txt.
//   tiny_convnet (scope TinyConvNet, 16x16, lenet preprocessing):
//                conv1 3x3x8 → pool1 2x2/2 → conv2 3x3x16 → pool2 →
//                Flatten → fc3 = logits.
//   sign_sgd:    var -= lr * sign(g), no hyper-parameters and
//                no slots; its device form does the same
//                with the learning rate a device tensor.

#include <glog/logging.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/tfrecord.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/optimizer.h"

namespace slimtorch {
namespace test_extension {
namespace {

// ----------------------------------------------------------------- dataset

constexpr int kBarsSize = 16;
const std::map<std::string, int64_t> kBarsSplits = {{"train", 256},
                                                    {"test", 64}};

DatasetSpec BarsSpec() {
  DatasetSpec spec;
  spec.name = "bars";
  spec.splits_to_sizes = kBarsSplits;
  spec.num_classes = 2;
  spec.file_pattern = "bars_%s.tfrecord";
  spec.image_height = kBarsSize;
  spec.image_width = kBarsSize;
  spec.image_channels = 1;
  return spec;
}

// A bar two pixels wide across the image, at a drawn row or column.
std::vector<uint8_t> BarImage(int64_t label, std::mt19937_64& rng) {
  std::vector<uint8_t> pixels(kBarsSize * kBarsSize, 20);
  const int at = std::uniform_int_distribution<int>(1, kBarsSize - 3)(rng);
  for (int i = 0; i < kBarsSize; ++i) {
    for (int w = 0; w < 2; ++w) {
      const int row = label == 0 ? at + w : i;
      const int col = label == 0 ? i : at + w;
      pixels[row * kBarsSize + col] = 230;
    }
  }
  return pixels;
}

void ConvertBars(const ConvertOptions& options) {
  MakeDirs(options.dataset_dir);
  std::mt19937_64 rng(5);
  for (const auto& [split, size] : kBarsSplits) {
    const std::string path =
        JoinPath(options.dataset_dir, "bars_" + split + ".tfrecord");
    TFRecordWriter writer(path);
    for (int64_t i = 0; i < size; ++i) {
      ImageExample ex;
      ex.label = i % 2;
      const std::vector<uint8_t> pixels = BarImage(ex.label, rng);
      ex.encoded = EncodePng(pixels.data(), kBarsSize, kBarsSize, 1);
      ex.format = "png";
      ex.height = ex.width = kBarsSize;
      writer.Write(EncodeImageExample(ex));
    }
    writer.Close();
    LOG(INFO) << "Wrote " << size << " examples to '" << path << "'";
  }
  WriteLabelsFile({{0, "horizontal"}, {1, "vertical"}}, options.dataset_dir);
}

SLIM_REGISTER_DATASET("bars", BarsSpec);
SLIM_REGISTER_DATASET_CONVERTER("bars", ConvertBars);

// --------------------------------------------------------------------- net

using nets::Activation;
using nets::Conv2d;
using nets::Conv2dOptions;
using nets::FlattenNhwc;
using nets::FullyConnected;
using nets::FullyConnectedOptions;
using nets::Initializer;
using nets::MaxPool2d;

class TinyConvNetImpl : public torch::nn::Cloneable<TinyConvNetImpl> {
 public:
  static constexpr const char* kScope = "TinyConvNet";
  static constexpr int64_t kDefaultImageSize = kBarsSize;

  explicit TinyConvNetImpl(const NetOptions& options) : options_(options) {
    reset();
  }

  void reset() override {
    const double wd = options_.weight_decay();
    const Initializer init = Initializer::TruncatedNormal(0.1);
    conv1_ = register_module(
        "conv1", Conv2d(Conv2dOptions(options_.input_channels(), 8, 3)
                            .weights_init(init)
                            .weight_decay(wd)));
    conv2_ = register_module(
        "conv2",
        Conv2d(Conv2dOptions(8, 16, 3).weights_init(init).weight_decay(wd)));
    fc3_ = register_module(
        "fc3",
        FullyConnected(FullyConnectedOptions(4 * 4 * 16, options_.num_classes())
                           .activation(Activation::kNone)
                           .weights_init(init)
                           .weight_decay(wd)));
  }

  NetOutput forward(const torch::Tensor& images) {
    CheckNetInput(images, "TinyConvNet", options_.input_channels(),
                  kDefaultImageSize, "its fc3 is 4*4*16 wide");
    NetOutput out;
    auto& ep = out.end_points;
    torch::Tensor net = conv1_(images);
    ep.emplace_back("conv1", net);
    net = MaxPool2d(net, 2, 2);
    ep.emplace_back("pool1", net);
    net = conv2_(net);
    ep.emplace_back("conv2", net);
    net = MaxPool2d(net, 2, 2);
    ep.emplace_back("pool2", net);
    net = FlattenNhwc(net);
    ep.emplace_back("Flatten", net);
    SetLogits(out, fc3_(net));
    return out;
  }
  int64_t input_channels() const { return options_.input_channels(); }

 private:
  NetOptions options_;
  Conv2d conv1_{nullptr};
  Conv2d conv2_{nullptr};
  FullyConnected fc3_{nullptr};
};

SLIM_REGISTER_NET_WITH_FACTS("tiny_convnet", MakeModuleNet<TinyConvNetImpl>,
                             NetFacts().Preprocessing("lenet"));

// --------------------------------------------------------------- optimizer

struct SignSgdOptions {};

// Applies to the variables that have a gradient, of their shape.
std::vector<std::pair<torch::Tensor, torch::Tensor>> WithGradients(
    const NamedTensors& variables) {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> out;
  for (const NamedTensor& v : variables) {
    const torch::Tensor& g = v.tensor.grad();
    if (!g.defined()) continue;
    SLIM_CHECK(g.sizes() == v.tensor.sizes(), "sign_sgd: gradient of ", v.name,
               " has shape ", g.sizes());
    out.emplace_back(v.tensor, g);
  }
  return out;
}

class SignSgdOptimizer : public Optimizer {
 public:
  SignSgdOptimizer(NamedTensors variables, const SignSgdOptions&)
      : variables_(std::move(variables)) {}

  void Apply(double lr) override {
    torch::NoGradGuard no_grad;
    const float lr32 = static_cast<float>(lr);
    for (auto& [var, g] : WithGradients(variables_)) {
      var.sub_(g.sign(), lr32);
    }
  }
  NamedTensors State() const override { return {}; }
  const char* name() const override { return "sign_sgd"; }

  std::unique_ptr<DeviceOptimizer> MakeDeviceForm(torch::Device) override {
    return std::make_unique<Device>(*this);
  }

 private:
  class Device : public DeviceOptimizer {
   public:
    explicit Device(const SignSgdOptimizer& o) : variables_(o.variables_) {}
    void Apply(const torch::Tensor& lr, const torch::Tensor&) override {
      torch::NoGradGuard no_grad;
      for (auto& [var, g] : WithGradients(variables_)) {
        var.sub_(g.sign() * lr);
      }
    }

   private:
    const NamedTensors& variables_;
  };

  NamedTensors variables_;
};

SLIM_REGISTER_OPTIMIZER("sign_sgd",
                        DescribeOptimizer<SignSgdOptimizer, SignSgdOptions>(
                            {}, /*has_device_form=*/true));

}  // namespace
}  // namespace test_extension
}  // namespace slimtorch
