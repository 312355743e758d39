// MobileNet v3 / EdgeTPU beyond the zoo and logits goldens:
//  * multiply-adds as TF-Slim's graph counts them and the published sizes
//    (research/slim/nets/mobilenet/README.md) within their rounding;
//  * the widths mobilenet_v3.py's _make_divisible gives (squeeze-excite
//    72 → 24, no "expand" where the expansion is not wider), EdgeTPU's fused
//    blocks and _075's finegrain head, by hand;
//  * hard_swish and the squeeze-excite gate against their formulas, traced
//    (as exported) and not;
//  * TF-Slim's end-point order, features, any square size and non-square
//    images as reduce_to_1x1 takes them.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/export/inference_graph.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/mobilenet_v3.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// Multiply-adds at 224 with the 1001-class head, as TF-Slim's own graph
// counts them (the sum over its Conv2D and DepthwiseConv2dNative ops of
// output pixels x kernel area x input x output channels / groups, squeeze-
// excite and logits convs included; pools, batch norm, activations and the
// gate's multiply not), and the published figures (README: millions,
// parameters to 0.1M rounded down, multiply-adds to the nearest million):
// large 217 / 5.4, large minimalistic 209 / 3.9, EdgeTPU 990 / 4.0 and
// EdgeTPU 0.75 624 / 2.9 agree. The README's small (66M / 2.9M) and small
// minimalistic (65M / 2.0M) multiply-adds do not describe the code TF-Slim
// ships (56.5M / 52.3M); small's 56M / 2.5M are the MobileNet v3 paper's
// (Howard et al. 2019, table 3).
TEST(MobileNetV3Test, PublishedParametersAndMultiplyAdds) {
  const struct {
    const char* name;
    int64_t macs;  // TF-Slim's graph
    double published_macs_m, published_params_m;
  } nets[] = {{"mobilenet_v3_large", 216591040, 217, 5.4},
              {"mobilenet_v3_small", 56511424, 56, 2.5},
              {"mobilenet_v3_large_minimalistic", 209137984, 209, 3.9},
              {"mobilenet_v3_small_minimalistic", 52289472, -1, 2.0},
              {"mobilenet_edgetpu", 990670464, 990, 4.0},
              {"mobilenet_edgetpu_075", 624487584, 624, 2.9}};
  for (const auto& n : nets) {
    auto net = CreateNet(n.name, NetOptions().num_classes(1001));
    const NetSummary s = SummarizeNet(*net, 224);
    EXPECT_EQ(s.multiply_adds, n.macs) << n.name;
    if (n.published_macs_m > 0) {
      EXPECT_LT(std::abs(s.multiply_adds / 1e6 - n.published_macs_m), 1.0)
          << n.name;
    }
    EXPECT_GE(s.parameters / 1e6, n.published_params_m) << n.name;
    EXPECT_LT(s.parameters / 1e6, n.published_params_m + 0.1) << n.name;
  }
}

// Variable shapes worked by hand (TF layout; empty: no such variable).
TEST(MobileNetV3Test, WidthsWorkedByHand) {
  const struct {
    const char* net;
    const char* variable;
    std::vector<int64_t> shape;
  } cases[] = {
      // 16 * 1 is not wider than 16: no expand layer.
      {"mobilenet_v3_large", "MobilenetV3/expanded_conv/expand/weights", {}},
      {"mobilenet_v3_large",
       "MobilenetV3/expanded_conv/depthwise/depthwise_weights", {3, 3, 16, 1}},
      // 24 * 3 = 72, squeezed to _make_divisible(18) = 24, not 16.
      {"mobilenet_v3_large",
       "MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights",
       {1, 1, 72, 24}},
      {"mobilenet_v3_large",
       "MobilenetV3/expanded_conv_3/squeeze_excite/Conv_1/biases", {72}},
      {"mobilenet_v3_large",
       "MobilenetV3/expanded_conv_3/depthwise/depthwise_weights",
       {5, 5, 72, 1}},
      // 80 * 184/80 = 184: float rounding does not cost a step of 8.
      {"mobilenet_v3_large", "MobilenetV3/expanded_conv_8/expand/weights",
       {1, 1, 80, 184}},
      // Conv_2: biases, no batch norm.
      {"mobilenet_v3_large", "MobilenetV3/Conv_2/weights", {1, 1, 960, 1280}},
      {"mobilenet_v3_large", "MobilenetV3/Conv_2/biases", {1280}},
      {"mobilenet_v3_large", "MobilenetV3/Conv_2/BatchNorm/gamma", {}},
      // Squeeze-excite of 16 channels: 4 → 8, the minimum.
      {"mobilenet_v3_small",
       "MobilenetV3/expanded_conv/squeeze_excite/Conv/weights", {1, 1, 16, 8}},
      // 16 * 72/16 = 72; 24 * 88/24 = 88.
      {"mobilenet_v3_small", "MobilenetV3/expanded_conv_1/expand/weights",
       {1, 1, 16, 72}},
      {"mobilenet_v3_small", "MobilenetV3/expanded_conv_2/expand/weights",
       {1, 1, 24, 88}},
      // Minimalistic: 3x3, no squeeze-excite.
      {"mobilenet_v3_large_minimalistic",
       "MobilenetV3/expanded_conv_3/depthwise/depthwise_weights",
       {3, 3, 72, 1}},
      {"mobilenet_v3_large_minimalistic",
       "MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights", {}},
      // EdgeTPU: 32 → 16 by project alone (32 * 1 is not wider) ...
      {"mobilenet_edgetpu", "MobilenetEdgeTPU/expanded_conv/expand/weights", {}},
      {"mobilenet_edgetpu", "MobilenetEdgeTPU/expanded_conv/project/weights",
       {1, 1, 32, 16}},
      // ... fused: a 3x3 expand (16 * 8 = 128) and no depthwise ...
      {"mobilenet_edgetpu", "MobilenetEdgeTPU/expanded_conv_1/expand/weights",
       {3, 3, 16, 128}},
      {"mobilenet_edgetpu",
       "MobilenetEdgeTPU/expanded_conv_1/depthwise/depthwise_weights", {}},
      {"mobilenet_edgetpu",
       "MobilenetEdgeTPU/expanded_conv_9/depthwise/depthwise_weights",
       {3, 3, 384, 1}},
      // ... and a head of Conv_1 alone.
      {"mobilenet_edgetpu", "MobilenetEdgeTPU/Conv_1/weights",
       {1, 1, 192, 1280}},
      {"mobilenet_edgetpu", "MobilenetEdgeTPU/Conv_2/weights", {}},
      // 0.75: 32 → 24, 16 * 0.75 → 16, 48 * 0.75 = 36 → 40; the finegrain
      // head keeps 1280.
      {"mobilenet_edgetpu_075", "MobilenetEdgeTPU/Conv/weights", {3, 3, 3, 24}},
      {"mobilenet_edgetpu_075",
       "MobilenetEdgeTPU/expanded_conv/project/weights", {1, 1, 24, 16}},
      {"mobilenet_edgetpu_075",
       "MobilenetEdgeTPU/expanded_conv_5/project/weights", {1, 1, 192, 40}},
      {"mobilenet_edgetpu_075", "MobilenetEdgeTPU/Conv_1/weights",
       {1, 1, 144, 1280}},
  };
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> shapes;
  for (const auto& c : cases) {
    if (!shapes.count(c.net)) {
      shapes[c.net] =
          CreateNet(c.net, NetOptions().num_classes(1001))->TfVariableShapes();
    }
    const auto& vars = shapes.at(c.net);
    auto it = vars.find(c.variable);
    if (c.shape.empty()) {
      EXPECT_TRUE(it == vars.end()) << c.net << " has " << c.variable;
    } else if (it == vars.end()) {
      ADD_FAILURE() << c.net << " lacks " << c.variable;
    } else {
      EXPECT_EQ(it->second, c.shape) << c.variable;
    }
  }
}

// x * relu6(x + 3) / 6 at hand-picked points, traced (the ops an export
// records) and not.
TEST(MobileNetV3Test, HardSwishFormula) {
  const torch::Tensor x =
      torch::tensor({-4.f, -3.f, -1.5f, 0.f, 1.f, 3.f, 4.5f}).view({1, 7, 1, 1});
  const torch::Tensor want =
      torch::tensor({0.f, 0.f, -0.375f, 0.f, 4.f / 6, 3.f, 4.5f})
          .view({1, 7, 1, 1});
  EXPECT_TRUE(torch::allclose(nets::HardSwish(x), want, 1e-6, 1e-7));
  GraphRecorder recorder(x, {});
  const torch::Tensor traced = nets::HardSwish(x);
  EXPECT_TRUE(torch::allclose(traced, want, 1e-6, 1e-7));
  const InferenceGraph g =
      recorder.Finish("hs", nets::SqueezeHw(traced), {});
  std::vector<std::string> ops;
  for (const GraphNode& n : g.nodes) ops.push_back(GraphOpName(n.op));
  EXPECT_EQ(ops, (std::vector<std::string>{"AddConstant", "Relu6", "Mul",
                                           "Scale", "Squeeze", "Softmax"}));
}

// The gate relu6(x + 3) * 0.16667: with the excite conv's weights and
// biases at zero every channel is gated by 3 * 0.16667 = 0.50001.
TEST(MobileNetV3Test, SqueezeExciteGate) {
  nets::SqueezeExcite se(16, 0.0);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : se->named_parameters()) {
      if (p.key().rfind("Conv_1.", 0) == 0) p.value().zero_();
    }
  }
  const torch::Tensor x = torch::randn({2, 16, 5, 5});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(se(x), x * 0.50001f, 1e-6, 1e-7));
}

TEST(MobileNetV3Test, EndPointsInTfSlimOrder) {
  auto net = CreateNet("mobilenet_v3_small", NetOptions().num_classes(5));
  net->module().eval();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(torch::randn({1, 3, 224, 224}));
  std::vector<std::string> keys;
  for (const auto& e : out.end_points) keys.push_back(e.first);
  // layer_1 (Conv) .. layer_12 (blocks), 13 Conv_1, 14 AvgPool2D, 15 Conv_2.
  for (int i = 0; i < 15; ++i) EXPECT_EQ(keys.at(i), "layer_" + std::to_string(i + 1));
  EXPECT_EQ(keys.at(15), "layer_2/depthwise_output");  // no expansion
  EXPECT_EQ(keys.at(16), "layer_2/output");
  EXPECT_EQ(keys.at(17), "layer_3/expansion_output");
  const std::vector<std::string> tail(keys.end() - 3, keys.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"global_pool", "Logits",
                                            "Predictions"}));
  std::map<std::string, torch::Tensor> points(out.end_points.begin(),
                                              out.end_points.end());
  EXPECT_EQ(points.at("layer_13").sizes().vec(),
            (std::vector<int64_t>{1, 576, 7, 7}));
  EXPECT_EQ(points.at("layer_14").sizes().vec(),
            (std::vector<int64_t>{1, 576, 1, 1}));
  EXPECT_EQ(points.at("layer_15").sizes().vec(),
            (std::vector<int64_t>{1, 1024, 1, 1}));
  EXPECT_TRUE(torch::equal(points.at("layer_5"), points.at("layer_5/output")));
}

// num_classes 0 gives Conv_2's pooled features; any square size works;
// non-square images go through reduce_to_1x1's 7x7 window: 224x320 leaves
// 7x10, pooled to 1x4 before Conv_2, which the head's global pool averages.
TEST(MobileNetV3Test, FeaturesAndImageSizes) {
  torch::NoGradGuard no_grad;
  const struct {
    const char* net;
    int64_t classes, height, width;
    std::vector<int64_t> logits;
  } runs[] = {{"mobilenet_v3_large", 0, 97, 97, {2, 1280, 1, 1}},
              {"mobilenet_edgetpu", 10, 224, 320, {2, 10}},
              {"mobilenet_v3_small", 10, 224, 320, {2, 10}}};
  for (const auto& r : runs) {
    auto net = CreateNet(r.net, NetOptions().num_classes(r.classes));
    net->CheckImageSize(r.height);
    net->module().eval();
    NetOutput out = net->Forward(torch::randn({2, 3, r.height, r.width}));
    EXPECT_EQ(out.logits.sizes().vec(), r.logits) << r.net;
    std::map<std::string, torch::Tensor> points(out.end_points.begin(),
                                                out.end_points.end());
    if (std::string(r.net) == "mobilenet_v3_small") {
      EXPECT_EQ(points.at("layer_14").sizes().vec(),
                (std::vector<int64_t>{2, 576, 1, 4}));
      EXPECT_ERROR_CONTAINS(net->Forward(torch::randn({1, 3, 160, 224})),
                            "smaller than reduce_to_1x1's 7x7");
    }
  }
}

}  // namespace
}  // namespace slimtorch
