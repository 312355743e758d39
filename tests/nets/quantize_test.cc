// The 8-bit rewrite inside the layers (nets/quantize.h): which ranges a net
// gets and their names, batch norm folding (eval: the formula worked by
// hand; training: before the quantization delay the folded layer equals the
// float one, output and moving statistics), the moving-average ranges, and
// the copies.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "slimtorch/nets/fake_quant.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace {

using nets::QuantizeOptions;

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> VariableNames(Net& net) {
  std::vector<std::string> names;
  for (const NamedTensor& v : net.ModelVariables()) names.push_back(v.name);
  return names;
}

TEST(QuantizeTest, RangesAreModelVariablesWithTfNames) {
  torch::manual_seed(0);
  auto net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  const size_t before = net->ModelVariables().size();
  net->EnableQuantization(QuantizeOptions());
  const std::vector<std::string> names = VariableNames(*net);
  // conv1, conv2, fc3, fc4: weights and output ranges each.
  for (const char* layer : {"conv1", "conv2", "fc3", "fc4"}) {
    const std::string p = std::string("LeNet/") + layer;
    EXPECT_TRUE(Has(names, p + "/weights_quant/min")) << p;
    EXPECT_TRUE(Has(names, p + "/weights_quant/max")) << p;
    EXPECT_TRUE(Has(names, p + "/act_quant/min")) << p;
    EXPECT_TRUE(Has(names, p + "/act_quant/max/biased")) << p;
    EXPECT_TRUE(Has(names, p + "/act_quant/max/local_step")) << p;
  }
  // 4 layers x (2 weight + 6 activation variables).
  EXPECT_EQ(names.size(), before + 4 * 8);
  EXPECT_EQ(net->quantizer()->VariableNames().size(), 4u * 8);
  // TensorFlow's initial values: weights -6..6, activations 0..6.
  for (const NamedTensor& v : net->ModelVariables()) {
    if (v.name == "LeNet/conv1/weights_quant/min") {
      EXPECT_EQ(v.tensor.item<float>(), -6.0f);
    }
    if (v.name == "LeNet/conv1/act_quant/min") {
      EXPECT_EQ(v.tensor.item<float>(), 0.0f);
    }
    if (v.name == "LeNet/conv1/act_quant/max") {
      EXPECT_EQ(v.tensor.item<float>(), 6.0f);
    }
  }
}

TEST(QuantizeTest, ResidualAddsAndSeparableConvsGetTheirRanges) {
  torch::manual_seed(0);
  auto v2 = CreateNet("mobilenet_v2",
                      NetOptions().num_classes(5).image_size(32));
  v2->EnableQuantization(QuantizeOptions(), 32);
  const std::vector<std::string> names = VariableNames(*v2);
  EXPECT_TRUE(Has(names, "MobilenetV2/expanded_conv_2/add_quant/min"));
  EXPECT_TRUE(Has(names, "MobilenetV2/expanded_conv_2/project/act_quant/min"));
  EXPECT_TRUE(
      Has(names, "MobilenetV2/expanded_conv_1/depthwise/weights_quant/max"));
  EXPECT_FALSE(Has(names, "MobilenetV2/expanded_conv_1/add_quant/min"))
      << "expanded_conv_1 changes its depth: no bypass";

  auto resnet = CreateNet("resnet_v1_50",
                          NetOptions().num_classes(5).image_size(32));
  resnet->EnableQuantization(QuantizeOptions(), 32);
  const std::vector<std::string> r = VariableNames(*resnet);
  // The bypass is followed by a ReLU: its output is quantized as the
  // block's activation, not as an add.
  EXPECT_TRUE(
      Has(r, "resnet_v1_50/block1/unit_1/bottleneck_v1/act_quant/min"));
  EXPECT_FALSE(
      Has(r, "resnet_v1_50/block1/unit_1/bottleneck_v1/add_quant/min"));

  auto pnas = CreateNet("pnasnet_mobile",
                        NetOptions().num_classes(5).image_size(64));
  pnas->EnableQuantization(QuantizeOptions(), 64);
  const std::vector<std::string> p = VariableNames(*pnas);
  bool separable = false;
  for (const std::string& n : p) {
    separable |= n.find("/separable_conv2d/weights_quant/min") !=
                 std::string::npos;
  }
  EXPECT_TRUE(separable);
}

TEST(QuantizeTest, VideoNetsRefuse) {
  auto net = CreateNet("i3d", NetOptions().num_classes(3).num_frames(2));
  try {
    net->EnableQuantization(QuantizeOptions());
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not supported yet"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(net->quantizer(), nullptr);
}

// A net of one conv + batch norm + ReLU6 layer.
struct OneLayer : torch::nn::Module {
  OneLayer() {
    conv = register_module(
        "Conv", nets::Conv2d(nets::Conv2dOptions(3, 4, 3)
                                 .activation(nets::Activation::kRelu6)
                                 .batch_norm(nets::BatchNormOptions(4)
                                                 .scale(true)
                                                 .decay(0.9))));
  }
  nets::Conv2d conv{nullptr};
};

struct Quantized {
  std::shared_ptr<OneLayer> net = std::make_shared<OneLayer>();
  nets::Quantizer q;
  explicit Quantized(const QuantizeOptions& o) : q(*net, "Net", o) {
    torch::NoGradGuard no_grad;
    auto& bn = *net->conv->batch_norm;
    bn.gamma.copy_(torch::tensor({0.5f, 1.5f, -0.7f, 1.0f}));
    bn.beta.copy_(torch::tensor({0.1f, -0.2f, 0.3f, 0.0f}));
    bn.moving_mean.copy_(torch::tensor({0.2f, -0.1f, 0.05f, 0.4f}));
    bn.moving_variance.copy_(torch::tensor({0.8f, 1.3f, 0.5f, 2.0f}));
    q.Discover([&] { Forward(torch::zeros({1, 3, 5, 5})); });
  }
  torch::Tensor Forward(const torch::Tensor& x) {
    nets::QuantizerScope scope(&q);
    q.BeginPass();
    return net->conv->forward(x);
  }
  torch::Tensor Buffer(const std::string& name) {
    return net->named_buffers()[name];
  }
};

TEST(QuantizeTest, EvalFoldsBatchNormAndQuantizesAsWorkedByHand) {
  torch::manual_seed(1);
  Quantized m{QuantizeOptions()};
  m.net->eval();
  const torch::Tensor x = torch::randn({2, 3, 5, 5});
  {
    torch::NoGradGuard no_grad;
    m.Buffer("Conv/weights_quant/min").fill_(-0.9f);
    m.Buffer("Conv/weights_quant/max").fill_(0.7f);
    m.Buffer("Conv/act_quant/min").fill_(0.0f);
    m.Buffer("Conv/act_quant/max").fill_(5.0f);
  }
  const torch::Tensor y = m.Forward(x);

  auto& conv = *m.net->conv;
  auto& bn = *conv.batch_norm;
  const torch::Tensor mult =
      bn.gamma.detach() / torch::sqrt(bn.moving_variance + 0.001);
  const torch::Tensor w = nets::FakeQuant(
      conv.weights.detach() * mult.view({-1, 1, 1, 1}), torch::tensor(-0.9f),
      torch::tensor(0.7f), 8, /*narrow_range=*/true);
  const torch::Tensor b = bn.beta.detach() - bn.moving_mean * mult;
  const torch::Tensor expected = nets::FakeQuant(
      torch::clamp(torch::conv2d(x, w, b, 1, 1), 0, 6), torch::tensor(0.0f),
      torch::tensor(5.0f), 8, false);
  EXPECT_TRUE(torch::allclose(y, expected, 0, 1e-6))
      << (y - expected).abs().max();
  // On the activation grid: 255 levels of 5/255.
  const torch::Tensor levels = y / (5.0 / 255);
  EXPECT_LT((levels - levels.round()).abs().max().item<float>(), 1e-3);
}

TEST(QuantizeTest, TrainingFoldEqualsTheFloatLayerBeforeTheDelay) {
  torch::manual_seed(2);
  // Quantization from step 100: at step 5 the folded layer computes what
  // the float layer computes.
  Quantized m{QuantizeOptions().quant_delay(100)};
  auto reference = std::make_shared<OneLayer>();
  {
    torch::NoGradGuard no_grad;
    reference->conv->weights.copy_(m.net->conv->weights);
    for (const auto& b : m.net->conv->batch_norm->named_buffers()) {
      reference->conv->batch_norm->named_buffers()[b.key()].copy_(b.value());
    }
    for (const auto& p : m.net->conv->batch_norm->named_parameters()) {
      reference->conv->batch_norm->named_parameters()[p.key()].copy_(
          p.value());
    }
  }
  m.net->train();
  reference->train();
  m.q.SetGlobalStep(5);
  const torch::Tensor x = torch::randn({4, 3, 5, 5});
  const torch::Tensor xa = x.clone().requires_grad_(true);
  const torch::Tensor xb = x.clone().requires_grad_(true);
  const torch::Tensor y = m.Forward(xa);
  const torch::Tensor expected = reference->conv->forward(xb);
  EXPECT_TRUE(torch::allclose(y, expected, 1e-5, 1e-5))
      << (y - expected).abs().max();
  // And so do the gradients: TensorFlow's fold passes them through the
  // batch's statistics as batch norm does.
  const torch::Tensor r = torch::randn(y.sizes());
  (y * r).sum().backward();
  (expected * r).sum().backward();
  const auto close = [](const torch::Tensor& a, const torch::Tensor& b) {
    return torch::allclose(a, b, 1e-4, 1e-5);
  };
  EXPECT_TRUE(close(xa.grad(), xb.grad())) << (xa.grad() - xb.grad()).abs().max();
  EXPECT_TRUE(close(m.net->conv->weights.grad(), reference->conv->weights.grad()));
  EXPECT_TRUE(close(m.net->conv->batch_norm->gamma.grad(),
                    reference->conv->batch_norm->gamma.grad()));
  EXPECT_TRUE(close(m.net->conv->batch_norm->beta.grad(),
                    reference->conv->batch_norm->beta.grad()));
  auto& bn = *m.net->conv->batch_norm;
  auto& ref_bn = *reference->conv->batch_norm;
  EXPECT_TRUE(torch::allclose(bn.moving_mean, ref_bn.moving_mean, 1e-6, 1e-6));
  EXPECT_TRUE(
      torch::allclose(bn.moving_variance, ref_bn.moving_variance, 1e-6, 1e-6));
  // The activation range: the first zero-debiased update is the batch's
  // range (0 kept), up to float32 rounding of the debiasing.
  EXPECT_EQ(m.Buffer("Conv/act_quant/min").item<float>(), 0.0f);
  const float batch_max = std::max(0.0f, y.max().item<float>());
  EXPECT_NEAR(m.Buffer("Conv/act_quant/max").item<float>(), batch_max,
              2e-5 * batch_max);
  // The weights' range: the folded weights' own (LastValueQuantize), 0
  // kept.
  EXPECT_LE(m.Buffer("Conv/weights_quant/min").item<float>(), 0.0f);
  EXPECT_GE(m.Buffer("Conv/weights_quant/max").item<float>(), 0.0f);
}

TEST(QuantizeTest, TrainingQuantizesFromTheDelayOn) {
  torch::manual_seed(3);
  Quantized m{QuantizeOptions().quant_delay(2)};
  m.net->train();
  const torch::Tensor x = torch::randn({4, 3, 5, 5});
  const auto on_grid = [&](const torch::Tensor& y) {
    const float max = m.Buffer("Conv/act_quant/max").item<float>();
    const torch::Tensor levels = y.detach() / (max / 255);
    return (levels - levels.round()).abs().max().item<float>() < 1e-3;
  };
  // TensorFlow counts its steps from 1: with delay 2 the first step (global
  // step 0 before it) is float, the second quantized.
  m.q.SetGlobalStep(0);
  EXPECT_FALSE(on_grid(m.Forward(x)));
  m.q.SetGlobalStep(1);
  const torch::Tensor y = m.Forward(x);
  EXPECT_TRUE(on_grid(y)) << "the output is on the activation grid";
  // Gradients reach the weights and batch norm's gamma and beta.
  y.sum().backward();
  EXPECT_TRUE(m.net->conv->weights.grad().defined());
  EXPECT_GT(m.net->conv->batch_norm->gamma.grad().abs().sum().item<float>(),
            0);
  EXPECT_GT(m.net->conv->batch_norm->beta.grad().abs().sum().item<float>(), 0);
}

TEST(QuantizeTest, ClonesCarryTheRanges) {
  torch::manual_seed(4);
  auto net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  net->EnableQuantization(QuantizeOptions());
  net->module().train();
  const torch::Tensor x = torch::rand({3, 1, 28, 28});
  net->SetGlobalStep(0);
  net->Forward(x);  // moves the ranges
  net->module().eval();
  auto copy = net->Clone();
  ASSERT_NE(copy->quantizer(), nullptr);
  const NamedTensors a = net->ModelVariables(), b = copy->ModelVariables();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_TRUE(torch::equal(a[i].tensor, b[i].tensor)) << a[i].name;
  }
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(net->Forward(x).logits, copy->Forward(x).logits));
}

TEST(QuantizeTest, NonFiniteWeightsInTrainingNameTheRangeAndTheWayOut) {
  // Training that diverged: the weights' own range (LastValueQuantize) is
  // NaN. The error names the range's variables and suggests per-channel
  // ranges; the same NaN activation range in eval gets no such advice.
  auto net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  net->EnableQuantization(QuantizeOptions());
  net->module().train();
  for (NamedTensor& v : net->TrainableVariables()) {
    if (v.name != "LeNet/conv2/weights") continue;
    torch::NoGradGuard no_grad;
    v.tensor.reshape(-1)[7] = std::numeric_limits<float>::quiet_NaN();
  }
  net->SetGlobalStep(0);
  try {
    net->Forward(torch::rand({2, 1, 28, 28}));
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'LeNet/conv2/weights_quant/min', "
                        "'LeNet/conv2/weights_quant/max'"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("training diverged"), std::string::npos) << what;
    EXPECT_NE(what.find("--quantize_per_channel"), std::string::npos) << what;
  }
}

TEST(QuantizeTest, CollapsedRangeIsAnError) {
  auto net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  net->EnableQuantization(QuantizeOptions());
  net->quantizer()->CheckRanges();  // the initial ranges are fine
  net->quantizer()->SetActivationRange("LeNet/conv2/act_quant", 0, 0);
  try {
    net->quantizer()->CheckRanges();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("LeNet/conv2/act_quant"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("zero width"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace slimtorch
