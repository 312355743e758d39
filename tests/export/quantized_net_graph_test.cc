// A quantized net's recorded graph (export_inference_graph --quantize)
// computes what the net computes in eval_image_classifier --quantize: for
// nets of each kind (plain convs and fully-connected layers, batch norm
// folded into depthwise and pointwise convs, residual adds, hard-swish and
// squeeze-excite muls, inception's concatenations), RunGraph on the
// recorded graph equals the net's quantized eval forward pass, and the graph
// holds one fake quantization per activation range and a weight range on
// every conv and fully-connected node.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "slimtorch/export/export.h"
#include "slimtorch/export/inference_graph.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace {

struct Case {
  const char* net;
  int64_t size;
};

class QuantizedNetGraphTest : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizedNetGraphTest, RunGraphEqualsTheQuantizedNet) {
  const Case c = GetParam();
  torch::manual_seed(7);
  auto net = CreateNet(c.net, NetOptions().num_classes(5).image_size(c.size));
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
    EXPECT_NE(n.op, GraphOp::kBatchNorm)
        << n.name << ": a quantized conv's batch norm is folded";
  }
  EXPECT_EQ(fake_quants,
            static_cast<int>(net->quantizer()->ActivationRangeNames().size()));
  EXPECT_EQ(weight_ranges, weighted);

  const torch::Tensor images = torch::randn({2, 3, c.size, c.size});
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = net->Forward(images).logits;
  const torch::Tensor got = RunGraph(g, images).at(g.logits);
  EXPECT_TRUE(torch::allclose(got, expected, 0, 1e-5))
      << c.net << ": " << (got - expected).abs().max();
}

INSTANTIATE_TEST_SUITE_P(
    Nets, QuantizedNetGraphTest,
    ::testing::Values(Case{"lenet", 28}, Case{"cifarnet", 32},
                      Case{"mobilenet_v1_025", 64},
                      Case{"mobilenet_v2", 64},
                      Case{"mobilenet_v3_small", 64},
                      Case{"resnet_v1_50", 64}, Case{"resnet_v2_50", 64},
                      Case{"inception_v1", 64}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.net);
    });

}  // namespace
}  // namespace slimtorch
