// A quantized net's recorded graph (export_inference_graph --quantize)
// computes what the net computes in eval_image_classifier --quantize: for
// nets of each kind (plain convs and fully-connected layers, batch norm
// folded into depthwise and pointwise convs, residual adds, hard-swish and
// squeeze-excite muls, inception's concatenations), RunGraph on the
// recorded graph equals the net's quantized eval forward pass, and the graph
// holds one fake quantization per activation range and a weight range on
// every conv and fully-connected node (batch norm nodes remain only for the
// standalone layers, ResNet v2's pre-activations).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/export/export.h"
#include "slimtorch/export/inference_graph.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace {

struct Case {
  const char* net;
  int64_t size;
  // Logits steps the graph may differ by with the net's own kernels
  // (oneDNN's Winograd convolutions and pooling, the fused batch norm of
  // ResNet v2's standalone pre-activations, the own depthwise kernel): they
  // round differently from RunGraph's LibTorch ops, so a value near a level
  // boundary lands on the other level and the difference carries on. With
  // those kernels switched off both run the same ops: equal.
  int steps = 0;
  bool global_pool = false;
  // The same with the kernels off: 0 but for ResNet v2, whose standalone
  // batch norms run as LibTorch's batch_norm in the net and as the formula
  // in RunGraph.
  // The counts depend on the CPU: LibTorch's convolutions (oneDNN) round
  // differently with AVX2 and AVX-512 kernels, and each flip carries on
  // through ResNet v2's 50 layers: its bounds cover both.
  int plain_steps = 0;
};

// The kernel switches off for a scope (then the net runs LibTorch's ops).
class PlainKernels {
 public:
  PlainKernels() {
    for (KernelSwitch s : kAll) saved_.push_back(SetKernelSwitch(s, false));
  }
  ~PlainKernels() {
    for (size_t i = 0; i < saved_.size(); ++i)
      SetKernelSwitch(kAll[i], saved_[i]);
  }

 private:
  static constexpr KernelSwitch kAll[] = {
      KernelSwitch::kFusedKernels, KernelSwitch::kDnnlBatchNorm,
      KernelSwitch::kWinograd, KernelSwitch::kDnnlPooling,
      KernelSwitch::kDepthwise};
  std::vector<bool> saved_;
};

class QuantizedNetGraphTest : public ::testing::TestWithParam<Case> {};

// The largest difference between RunGraph's logits and the net's, in steps
// of the logits' grid; checks the graph's quantization nodes on the way.
double StepsApart(const Case& c) {
  torch::manual_seed(7);
  NetOptions options = NetOptions().num_classes(5).image_size(c.size);
  if (c.global_pool) options.global_pool(true);
  auto net = CreateNet(c.net, options);
  net->EnableQuantization(nets::QuantizeOptions(), c.size);
  // Ranges that have moved: a few training batches (no optimizer step),
  // so the stored ranges are the batches' and the moving statistics too.
  net->module().train();
  {
    torch::NoGradGuard no_grad;
    for (int64_t step = 0; step < 3; ++step) {
      net->SetGlobalStep(step);
      net->Forward(torch::randn({4, 3, c.size, c.size}));
    }
  }
  net->module().eval();
  net->quantizer()->CheckRanges();
  const InferenceGraph g = RecordInferenceGraph(*net, c.size, 2);
  int fake_quants = 0, weighted = 0, weight_ranges = 0;
  for (const GraphNode& n : g.nodes) {
    fake_quants += n.op == GraphOp::kFakeQuant;
    if (n.op == GraphOp::kConv || n.op == GraphOp::kFullyConnected) {
      ++weighted;
      weight_ranges += n.weights_quant.defined();
      EXPECT_TRUE(n.weights_quant.narrow_range) << n.name;
    }
  }
  EXPECT_EQ(fake_quants,
            static_cast<int>(net->quantizer()->ActivationRangeNames().size()));
  EXPECT_EQ(weight_ranges, weighted);

  const torch::Tensor images = torch::randn({2, 3, c.size, c.size});
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = net->Forward(images).logits;
  const std::vector<torch::Tensor> values = RunGraph(g, images);
  const torch::Tensor got = values.at(g.logits);
  // The logits' own grid: the fake quantization that makes them (before a
  // squeeze).
  double step = 0;
  for (int value = g.logits; value >= 0 && step == 0;) {
    const int producer = value;
    value = -1;
    for (const GraphNode& n : g.nodes) {
      if (n.output != producer) continue;
      if (n.op == GraphOp::kFakeQuant) {
        step = (n.quant.max - n.quant.min).item<double>() / 255;
      } else if (!n.inputs.empty()) {
        value = n.inputs.front();
      }
    }
  }
  EXPECT_GT(step, 0) << "the logits are fake-quantized";
  const double diff = (got - expected).abs().max().item<double>();
  if (diff <= 1e-5) return 0.0;
  // Both sides sit on the grid, so the difference is a whole number of
  // steps but for float rounding (3 steps can divide out as 3.000001).
  const double steps = diff / step;
  return std::abs(steps - std::round(steps)) < 1e-3 ? std::round(steps) : steps;
}

TEST_P(QuantizedNetGraphTest, RunGraphEqualsTheQuantizedNet) {
  PlainKernels plain;
  EXPECT_LE(StepsApart(GetParam()), GetParam().plain_steps) << GetParam().net;
}

TEST_P(QuantizedNetGraphTest, RunGraphIsCloseWithTheNetsKernels) {
  EXPECT_LE(StepsApart(GetParam()), GetParam().steps) << GetParam().net;
}

INSTANTIATE_TEST_SUITE_P(
    Nets, QuantizedNetGraphTest,
    ::testing::Values(Case{"lenet", 28}, Case{"cifarnet", 32},
                      Case{"mobilenet_v1_025", 64}, Case{"mobilenet_v2", 64},
                      Case{"mobilenet_v3_small", 64},
                      Case{"resnet_v1_50", 64, 3},
                      Case{"resnet_v2_50", 64, 24, false, 5},
                      Case{"inception_v1", 64, 3, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.net);
    });

}  // namespace
}  // namespace slimtorch
