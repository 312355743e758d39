// Nets computing in channels-last order (Net::SetMemoryFormat, what
// --data_format=channels_last and auto choose) against the same nets in
// NCHW: the same variables before training, then after two momentum steps
// with L2 terms (forward, loss, backward, optimizer) the same logits,
// variables and moving statistics; the 4-D variables stay channels-last
// throughout, and TfModelVariables (what checkpoints and exports read) is
// the same. The training comparison runs in float64: at initialisation
// these nets' float32 gradients are chaotic under rounding (batch norm over
// few values, ReLUs at 0) — LibTorch's own NCHW path differs by 4%
// (inception_v1) to 46% (resnet_v1_50 at 64x64) between 1 and 2 threads — so
// float32 could not tell a layout bug from rounding. The float32 forward pass
// (oneDNN's channels-last convolutions, the fused batch norm kernels) is
// compared directly; the kernels' gradients in fused_batch_norm_test.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/loss.h"
#include "slimtorch/train/optimizer.h"

namespace slimtorch {
namespace {

double MaxDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

struct Trained {
  torch::Tensor logits;  // of the last forward pass
  NamedTensors variables;
};

// Two training steps on one fixed batch; dropout masks from the same seed.
Trained TrainTwoSteps(Net& net, const torch::Tensor& x,
                      const torch::Tensor& y) {
  net.module().train();
  NamedTensors trainable = net.TrainableVariables();
  auto opt = CreateOptimizer("momentum", trainable, {});
  Trained out;
  for (int step = 0; step < 2; ++step) {
    torch::manual_seed(100 + step);
    NetOutput o = net.Forward(x);
    torch::Tensor loss = SoftmaxCrossEntropy(o.logits, y);
    if (o.aux_logits.defined()) {
      loss = loss + 0.4 * SoftmaxCrossEntropy(o.aux_logits, y);
    }
    for (auto& v : trainable) v.tensor.mutable_grad() = torch::Tensor();
    loss.backward();
    net.ApplyRegularizationGradients();
    opt->Apply(0.05);
    out.logits = o.logits.detach();
  }
  out.variables = net.ModelVariables();
  return out;
}

// The moving means and variances of `net`'s batch norms (the net's own
// tensors; copies with `copy`).
NamedTensors MovingStatistics(Net& net, bool copy = false) {
  NamedTensors out;
  for (NamedTensor& v : net.ModelVariables()) {
    if (v.name.find("/moving_") == std::string::npos) continue;
    if (copy) v.tensor = v.tensor.detach().clone();
    out.push_back(v);
  }
  return out;
}

class ChannelsLastTest
    : public ::testing::TestWithParam<std::tuple<const char*, int64_t>> {};

TEST_P(ChannelsLastTest, TrainsAsNchw) {
  const auto [name, size] = GetParam();
  // The layouts compared with one batch norm kernel family: channels-last
  // training would otherwise take oneDNN's (nets::SetDnnlBatchNorm), whose
  // float32 rounding differs from the own NCHW kernel's by more than these
  // chaotic nets allow (resnet_v1_50 at 64x64: logits 5e-4 apart, moving
  // variances 2e-6); oneDNN's against LibTorch's in fused_batch_norm_test.
  nets::SetDnnlBatchNorm(false);
  struct Restore {
    ~Restore() { nets::SetDnnlBatchNorm(true); }
  } restore;
  // Two nets from the same seed: the same initial values.
  const NetOptions options =
      NetOptions().num_classes(5).weight_decay(0.0004).image_size(size);
  torch::manual_seed(0);
  auto nchw = CreateNet(name, options);
  torch::manual_seed(0);
  auto cl = CreateNet(name, options);
  cl->SetMemoryFormat(torch::MemoryFormat::ChannelsLast);
  EXPECT_EQ(cl->memory_format(), torch::MemoryFormat::ChannelsLast);
  int converted = 0;
  for (const auto& v : cl->ModelVariables()) {
    if (v.tensor.dim() != 4) continue;
    EXPECT_TRUE(v.tensor.is_contiguous(torch::MemoryFormat::ChannelsLast))
        << name << " " << v.name;
    converted += v.tensor.size(2) * v.tensor.size(3) > 1 ? 1 : 0;
  }
  EXPECT_GT(converted, 0) << name;
  {
    NamedTensors a = nchw->TfModelVariables(), b = cl->TfModelVariables();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(torch::equal(a[i].tensor, b[i].tensor)) << a[i].name;
    }
  }

  const int64_t channels = nchw->input_channels();
  torch::Tensor x = torch::randn({4, channels, size, size});
  {
    // Float32 forward, training mode: the same logits, and the same moving
    // statistics to float32 accuracy: 1e-6 of their size, as before, plus
    // 1e-4 of this step's update (the logits' 1e-4). The kernels' float32
    // sums run in different orders, and in a deep net the batch statistics
    // drift apart: NASNet-A CIFAR's last cells (batch_norm_decay 0.9, so a
    // tenth of the batch variance lands in the moving one) end 3.3e-6 apart,
    // 2.2e-6 of the variances' size, 4.6e-5 of the update; at most 0.36 of
    // this tolerance. An H/W swap of the channels-last net's input (a layout
    // bug, tried once) lands 6900 times over it, and its moving statistics
    // 1.2 of their size apart in the float64 check below.
    const NamedTensors moving_before = MovingStatistics(*nchw, true);
    torch::manual_seed(7);
    nchw->module().train();
    const torch::Tensor la = nchw->Forward(x).logits.detach();
    torch::manual_seed(7);
    cl->module().train();
    const torch::Tensor lb = cl->Forward(x).logits.detach();
    EXPECT_LE(MaxDiff(la, lb), 1e-4 * (1 + la.abs().max().item<double>()))
        << name << " float32 forward";
    const NamedTensors ma = MovingStatistics(*nchw), mb = MovingStatistics(*cl);
    ASSERT_EQ(ma.size(), mb.size());
    for (size_t i = 0; i < ma.size(); ++i) {
      const double update = MaxDiff(ma[i].tensor, moving_before[i].tensor);
      const double scale = 1 + ma[i].tensor.abs().max().item<double>();
      EXPECT_LE(MaxDiff(ma[i].tensor, mb[i].tensor),
                1e-6 * scale + 1e-4 * update)
          << name << " " << ma[i].name << " float32 forward";
    }
    // Training then starts from the same moving statistics, so that their
    // float64 updates compare as strictly as the other variables (they had
    // carried this pass's float32 differences: 6e-6 in NASNet-A CIFAR).
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < ma.size(); ++i) mb[i].tensor.copy_(ma[i].tensor);
  }
  // The rest in float64 (the layouts survive the conversion).
  nchw->module().to(torch::kFloat64);
  cl->module().to(torch::kFloat64);
  for (const auto& v : cl->ModelVariables()) {
    if (v.tensor.dim() == 4) {
      EXPECT_TRUE(v.tensor.is_contiguous(torch::MemoryFormat::ChannelsLast))
          << name << " " << v.name << " in float64";
    }
  }
  x = x.to(torch::kFloat64);
  torch::Tensor y = torch::randint(0, 5, {4}, torch::kInt64);
  NamedTensors before = nchw->ModelVariables();
  for (auto& v : before) v.tensor = v.tensor.detach().clone();
  Trained a = TrainTwoSteps(*nchw, x, y);
  Trained b = TrainTwoSteps(*cl, x, y);

  const double logit_scale = 1 + a.logits.abs().max().item<double>();
  EXPECT_LE(MaxDiff(a.logits, b.logits), 1e-9 * logit_scale) << name;
  double moved = 0;
  ASSERT_EQ(a.variables.size(), b.variables.size());
  for (size_t i = 0; i < a.variables.size(); ++i) {
    const torch::Tensor& va = a.variables[i].tensor;
    const torch::Tensor& vb = b.variables[i].tensor;
    EXPECT_EQ(a.variables[i].name, b.variables[i].name);
    if (vb.dim() == 4) {
      EXPECT_TRUE(vb.is_contiguous(torch::MemoryFormat::ChannelsLast))
          << name << " " << b.variables[i].name << " after training";
    }
    const double scale = 1 + va.abs().max().item<double>();
    EXPECT_LE(MaxDiff(va, vb), 1e-9 * scale)
        << name << " " << a.variables[i].name;
    moved = std::max(moved, MaxDiff(va, before[i].tensor) / scale);
  }
  // Training moved the variables far more than the two orders differ.
  EXPECT_GT(moved, 1e-3) << name;
}

INSTANTIATE_TEST_SUITE_P(
    Nets, ChannelsLastTest,
    ::testing::Values(std::make_tuple("lenet", 28),
                      std::make_tuple("cifarnet", 32),
                      std::make_tuple("inception_v1", 224),
                      std::make_tuple("resnet_v1_50", 64),
                      std::make_tuple("resnet_v2_50", 64),
                      std::make_tuple("mobilenet_v1_025", 64),
                      std::make_tuple("mobilenet_v2_035", 64),
                      std::make_tuple("mobilenet_v3_small", 64),
                      std::make_tuple("mobilenet_edgetpu_075", 64),
                      std::make_tuple("pnasnet_mobile", 96),
                      std::make_tuple("nasnet_cifar", 32)),
    [](const auto& info) { return std::string(std::get<0>(info.param)); });

TEST(DataFormatTest, FlagValues) {
  EXPECT_EQ(ResolveDataFormat("channels_first", "inception_v3", torch::kCPU),
            torch::MemoryFormat::Contiguous);
  EXPECT_EQ(ResolveDataFormat("channels_last", "lenet", torch::kCPU),
            torch::MemoryFormat::ChannelsLast);
  // auto: NCHW on GPUs (unmeasured there) and for the nets slower in NHWC.
  EXPECT_EQ(ResolveDataFormat("auto", "inception_v3", torch::Device("cuda:0")),
            torch::MemoryFormat::Contiguous);
  EXPECT_EQ(ResolveDataFormat("auto", "lenet", torch::kCPU),
            torch::MemoryFormat::Contiguous);
  EXPECT_EQ(ResolveDataFormat("auto", "inception_v1", torch::kCPU),
            torch::MemoryFormat::ChannelsLast);
  try {
    ResolveDataFormat("NHWC", "lenet", torch::kCPU);
    FAIL() << "NHWC accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'NHWC'"), std::string::npos)
        << e.what();
  }
}

// --data_format=auto on a CPU: channels-last for exactly the nets measured
// faster so (docs/performance.md's table), NCHW for the rest of the zoo.
TEST(DataFormatTest, AutoOnCpuFollowsTheMeasuredNets) {
  const std::set<std::string> channels_last = {
      "vgg_a",
      "vgg_16",
      "vgg_19",
      "inception_v1",
      "inception_v2",
      "inception_v3",
      "inception_v4",
      "inception_resnet_v2",
      "resnet_v1_50",
      "resnet_v1_101",
      "resnet_v1_152",
      "resnet_v1_200",
      "resnet_v2_50",
      "resnet_v2_101",
      "resnet_v2_152",
      "resnet_v2_200",
      "mobilenet_v1",
      "mobilenet_v1_075",
      "mobilenet_v1_050",
      "mobilenet_v1_025",
      "mobilenet_v2",
      "mobilenet_v2_140",
      "mobilenet_v2_035",
      "mobilenet_v3_large",
      "mobilenet_v3_small",
      "mobilenet_v3_large_minimalistic",
      "mobilenet_v3_small_minimalistic",
      "mobilenet_edgetpu",
      "mobilenet_edgetpu_075",
      "nasnet_cifar",
      "nasnet_mobile",
      "nasnet_large",
      "pnasnet_mobile",
      "pnasnet_large"};
  for (const std::string& name : channels_last) {
    ASSERT_TRUE(GetNetRegistry().Has(name)) << name;
  }
  for (const std::string& name : GetNetRegistry().Names()) {
    EXPECT_EQ(ResolveDataFormat("auto", name, torch::kCPU),
              channels_last.count(name) > 0 ? torch::MemoryFormat::ChannelsLast
                                            : torch::MemoryFormat::Contiguous)
        << name;
  }
}

}  // namespace
}  // namespace slimtorch
