// The video nets I3D and S3D-G (TF-Slim's nets/i3d.py, s3dg.py) and their
// 3-D layers: TensorFlow's 'SAME' windows worked by hand, the rank-5 variable
// layouts, TF-Slim's variable names and shapes, and its tests' end-point
// shapes at sizes CI affords (8 to 16 frames of 32 to 64 pixels instead of
// 64 of 224; the shapes follow the same rule). Logits against TensorFlow:
// net_logits_test (goldens).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/convolution3d.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/net.h"
#include "io/io_test_util.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using nets::Conv3d;
using nets::Conv3dOptions;
using nets::Padding;

// A 3-wide stride-2 'SAME' conv of 4 cells along each axis pads 1 cell at
// the end only (TensorFlow: total (2 - 1) * 2 + 3 - 4 = 1, before 0): with
// ones everywhere, the first output sees 3 x 3 x 3 input cells, the last
// 2 x 2 x 2 (PyTorch's symmetric padding would give 8 and 27).
TEST(Conv3dTest, SamePaddingPutsTheOddCellAtTheEnd) {
  Conv3d conv(Conv3dOptions(1, 1, {3, 3, 3})
                  .stride({2, 2, 2})
                  .activation(nets::Activation::kNone)
                  .use_bias(false));
  torch::NoGradGuard no_grad;
  conv->weights.fill_(1);
  const torch::Tensor y = conv(torch::ones({1, 1, 4, 4, 4}));
  ASSERT_EQ(y.sizes().vec(), (std::vector<int64_t>{1, 1, 2, 2, 2}));
  EXPECT_FLOAT_EQ(y[0][0][0][0][0].item<float>(), 27);
  EXPECT_FLOAT_EQ(y[0][0][1][1][1].item<float>(), 8);
  EXPECT_FLOAT_EQ(y[0][0][0][1][1].item<float>(), 12);
  // [1, 3, 3] with stride [1, 2, 2] (MaxPool_2a's window): time untouched.
  EXPECT_EQ(nets::SamePadding3d({5, 4, 7}, {1, 3, 3}, {1, 2, 2}),
            (std::array<int64_t, 6>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(nets::SamePadding3d({8, 28, 28}, {3, 3, 3}, {2, 2, 2}),
            (std::array<int64_t, 6>{0, 1, 0, 1, 0, 1}));
}

TEST(Conv3dTest, BatchNormWithoutGammaAndTheCentreInitializer) {
  Conv3d bn(Conv3dOptions(3, 8, {3, 3, 3})
                .batch_norm(nets::BatchNormOptions(8).decay(0.999)));
  std::vector<std::string> names;
  for (const auto& p : bn->named_parameters()) names.push_back(p.key());
  for (const auto& b : bn->named_buffers()) names.push_back(b.key());
  EXPECT_EQ(names, (std::vector<std::string>{"weights", "BatchNorm.beta",
                                             "BatchNorm.moving_mean",
                                             "BatchNorm.moving_variance"}));

  Conv3d temporal(Conv3dOptions(4, 4, {3, 1, 1}).center_init(true));
  ASSERT_TRUE(temporal->biases.defined());
  const torch::Tensor w = temporal->weights;  // [4, 4, 3, 1, 1]
  EXPECT_TRUE(torch::equal(w.select(2, 1).flatten(1), torch::eye(4)));
  EXPECT_EQ(w.select(2, 0).abs().sum().item<float>(), 0);
  EXPECT_EQ(w.select(2, 2).abs().sum().item<float>(), 0);
  // So it passes (non-negative) input through unchanged.
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({2, 4, 5, 3, 3});
  EXPECT_TRUE(torch::allclose(temporal(x), x));
  EXPECT_THROW(Conv3d(Conv3dOptions(4, 5, {3, 1, 1}).center_init(true)),
               Error);
}

// TensorFlow's 'SAME' pools: padded cells never win a max and are not
// counted in a mean. Along T: 3 cells, window 2, stride 2 → pads 0 / 1.
TEST(Pool3dTest, SameWindowsIgnoreThePads) {
  const torch::Tensor minus = -torch::ones({1, 2, 3, 3, 3});
  const torch::Tensor max =
      nets::MaxPool3d(minus, {2, 2, 2}, {2, 2, 2}, Padding::kSame);
  ASSERT_EQ(max.sizes().vec(), (std::vector<int64_t>{1, 2, 2, 2, 2}));
  EXPECT_TRUE(torch::equal(max, -torch::ones_like(max)));

  const torch::Tensor t = torch::arange(3, torch::kFloat).view({1, 1, 3, 1, 1});
  const torch::Tensor avg =
      nets::AvgPool3d(t, {2, 1, 1}, {2, 1, 1}, Padding::kSame);
  ASSERT_EQ(avg.numel(), 2);
  EXPECT_FLOAT_EQ(avg.flatten()[0].item<float>(), 0.5f);  // (0 + 1) / 2
  EXPECT_FLOAT_EQ(avg.flatten()[1].item<float>(), 2.0f);  // 2 / 1, not 2 / 2
  const torch::Tensor valid = nets::AvgPool3d(
      torch::arange(8, torch::kFloat).view({1, 1, 2, 2, 2}), {2, 2, 2},
      {1, 1, 1}, Padding::kValid);
  EXPECT_FLOAT_EQ(valid.item<float>(), 3.5f);
  EXPECT_THROW(nets::MaxPool3d(torch::ones({1, 1, 3, 3}), {1, 2, 2}), Error);
}

TEST(GraphOpsTest, SigmoidGateBroadcastsOverTimeAndSpace) {
  const torch::Tensor x = torch::rand({2, 3, 4, 5, 5});
  const torch::Tensor mean = nets::SpatiotemporalMean(x);
  ASSERT_EQ(mean.sizes().vec(), (std::vector<int64_t>{2, 3, 1, 1, 1}));
  EXPECT_NEAR(mean[1][2].item<float>(), x[1][2].mean().item<float>(), 1e-6);
  const torch::Tensor gated =
      nets::Mul(x, nets::Sigmoid(torch::zeros({2, 3, 1, 1, 1})));
  EXPECT_TRUE(torch::allclose(gated, x * 0.5));
  EXPECT_THROW(nets::Mul(x, torch::zeros({2, 3, 4, 1, 1})), Error);
  EXPECT_EQ(nets::SqueezeThw(mean).sizes().vec(),
            (std::vector<int64_t>{2, 3}));
}

// TF [kt, kh, kw, in, out] ↔ ours [out, in, kt, kh, kw], element by element,
// through both the plain and the fast (large tensor) paths.
TEST(VideoLayoutTest, RankFiveKernelsConvertBothWays) {
  for (int64_t out : {5, 64}) {
    const torch::Tensor tf =
        torch::randn({3, 2, 4, 7, out}, torch::kFloat32);  // kt kh kw in out
    const torch::Tensor ours = FromTfLayout("x/weights", tf);
    ASSERT_EQ(ours.sizes().vec(), (std::vector<int64_t>{out, 7, 3, 2, 4}));
    EXPECT_EQ(ours[out - 1][6][2][1][3].item<float>(),
              tf[2][1][3][6][out - 1].item<float>());
    EXPECT_TRUE(torch::equal(ours, tf.permute({4, 3, 0, 1, 2})));
    EXPECT_TRUE(torch::equal(ToTfLayout("x/weights", ours), tf));
    torch::Tensor into = torch::empty_like(ours);
    FromTfLayoutInto("x/weights", tf, into);
    EXPECT_TRUE(torch::equal(into, ours));
  }
}

std::map<std::string, std::vector<int64_t>> Shapes(const std::string& name) {
  return CreateNet(name, NetOptions().num_classes(400))->TfVariableShapes();
}

// TF-Slim's names and shapes (i3d.py / s3dg.py on i3d_utils.py).
TEST(VideoNetsTest, VariablesAreTfSlims) {
  const auto i3d = Shapes("i3d");
  using V = std::vector<int64_t>;
  EXPECT_EQ(i3d.at("InceptionV1/Conv2d_1a_7x7/weights"), (V{7, 7, 7, 3, 64}));
  EXPECT_EQ(i3d.at("InceptionV1/Conv2d_1a_7x7/BatchNorm/beta"), (V{64}));
  EXPECT_EQ(i3d.count("InceptionV1/Conv2d_1a_7x7/BatchNorm/gamma"), 0u);
  EXPECT_EQ(i3d.at("InceptionV1/Conv2d_2c_3x3/weights"), (V{3, 3, 3, 64, 192}));
  EXPECT_EQ(i3d.at("InceptionV1/Mixed_5b/Branch_2/Conv2d_0b_3x3/weights"),
            (V{3, 3, 3, 32, 128}));
  EXPECT_EQ(i3d.at("InceptionV1/Logits/Conv2d_0c_1x1/weights"),
            (V{1, 1, 1, 1024, 400}));
  EXPECT_EQ(i3d.at("InceptionV1/Logits/Conv2d_0c_1x1/biases"), (V{400}));
  for (const auto& [name, shape] : i3d) {
    EXPECT_EQ(name.find("temporal"), std::string::npos) << name;
    EXPECT_EQ(name.find("self_gating"), std::string::npos) << name;
  }

  const auto s3dg = Shapes("s3dg");
  EXPECT_EQ(s3dg.at("InceptionV1/Conv2d_1a_7x7/weights"), (V{3, 7, 7, 3, 64}));
  EXPECT_EQ(s3dg.count("InceptionV1/Conv2d_1a_7x7/temporal/weights"), 0u);
  EXPECT_EQ(s3dg.at("InceptionV1/Conv2d_2c_3x3/weights"), (V{1, 3, 3, 64, 192}));
  EXPECT_EQ(s3dg.at("InceptionV1/Conv2d_2c_3x3/temporal/weights"),
            (V{3, 1, 1, 192, 192}));
  EXPECT_EQ(s3dg.at("InceptionV1/Conv2d_2c_3x3/temporal/biases"), (V{192}));
  EXPECT_EQ(s3dg.count("InceptionV1/Conv2d_2c_3x3/temporal/BatchNorm/beta"),
            0u);
  EXPECT_EQ(
      s3dg.at("InceptionV1/Conv2d_2c_3x3/self_gating/transformer_W/weights"),
      (V{1, 1, 1, 192, 192}));
  EXPECT_EQ(s3dg.count("InceptionV1/Conv2d_2b_1x1/self_gating/transformer_W/"
                       "weights"),
            0u);
  const std::string b1 = "InceptionV1/Mixed_3b/Branch_1/";
  EXPECT_EQ(s3dg.at(b1 + "Conv2d_0b_3x3/weights"), (V{1, 3, 3, 96, 128}));
  EXPECT_EQ(s3dg.at(b1 + "Conv2d_0b_3x3/temporal/weights"),
            (V{3, 1, 1, 128, 128}));
  EXPECT_EQ(s3dg.at(b1 + "Conv2d_0b_3x3/self_gating/transformer_W/weights"),
            (V{1, 1, 1, 128, 128}));
  EXPECT_EQ(s3dg.count(b1 + "Conv2d_0a_1x1/self_gating/transformer_W/weights"),
            0u);
  EXPECT_EQ(s3dg.at("InceptionV1/Mixed_5c/Branch_3/Conv2d_0b_1x1/self_gating/"
                    "transformer_W/weights"),
            (V{1, 1, 1, 128, 128}));
  EXPECT_EQ(s3dg.count("InceptionV1/Mixed_5c/Branch_3/Conv2d_0b_1x1/biases"),
            0u);
}

// s3dg_test's end-point shapes, scaled: T halves at Conv2d_1a, MaxPool_4a
// and MaxPool_5a ('SAME', rounding up), H and W at five steps.
TEST(VideoNetsTest, EndPointShapesFollowTfSlimsTests) {
  for (const char* name : {"i3d", "s3dg"}) {
    auto net = CreateNet(name, NetOptions().num_classes(5).num_frames(16));
    EXPECT_EQ(net->num_frames(), 16);
    net->module().eval();
    torch::NoGradGuard no_grad;
    const NetOutput out = net->Forward(torch::rand({2, 3, 16, 64, 64}));
    using V = std::vector<int64_t>;
    const std::vector<std::pair<std::string, V>> want = {
        {"Conv2d_1a_7x7", {2, 64, 8, 32, 32}},
        {"MaxPool_2a_3x3", {2, 64, 8, 16, 16}},
        {"Conv2d_2b_1x1", {2, 64, 8, 16, 16}},
        {"Conv2d_2c_3x3", {2, 192, 8, 16, 16}},
        {"MaxPool_3a_3x3", {2, 192, 8, 8, 8}},
        {"Mixed_3b", {2, 256, 8, 8, 8}},
        {"Mixed_3c", {2, 480, 8, 8, 8}},
        {"MaxPool_4a_3x3", {2, 480, 4, 4, 4}},
        {"Mixed_4b", {2, 512, 4, 4, 4}},
        {"Mixed_4c", {2, 512, 4, 4, 4}},
        {"Mixed_4d", {2, 512, 4, 4, 4}},
        {"Mixed_4e", {2, 528, 4, 4, 4}},
        {"Mixed_4f", {2, 832, 4, 4, 4}},
        {"MaxPool_5a_2x2", {2, 832, 2, 2, 2}},
        {"Mixed_5b", {2, 832, 2, 2, 2}},
        {"Mixed_5c", {2, 1024, 2, 2, 2}},
        {"Logits", {2, 5}},
        {"Predictions", {2, 5}}};
    ASSERT_EQ(out.end_points.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(out.end_points[i].first, want[i].first) << name;
      EXPECT_EQ(out.end_points[i].second.sizes().vec(), want[i].second)
          << name << " " << want[i].first;
    }
  }
  // testTenFrames' rule: 10 → 5 → 3 → 2 frames.
  auto net = CreateNet("i3d", NetOptions().num_classes(5));
  EXPECT_EQ(net->num_frames(), 64);  // the default: i3d_test's
  net->module().eval();
  torch::NoGradGuard no_grad;
  const NetOutput out = net->Forward(torch::rand({1, 3, 10, 32, 32}));
  EXPECT_EQ(out.end_points[15].second.sizes().vec(),
            (std::vector<int64_t>{1, 1024, 2, 1, 1}));
}

TEST(VideoNetsTest, ClipsOnlyOfSizesTheHeadTakes) {
  auto net = CreateNet("s3dg", NetOptions().num_classes(5));
  net->module().eval();
  torch::NoGradGuard no_grad;
  EXPECT_ERROR_CONTAINS(net->Forward(torch::rand({1, 3, 32, 32})),
                        "expects clips [N, 3, T, H, W]");
  EXPECT_ERROR_CONTAINS(net->Forward(torch::rand({1, 3, 4, 32, 48})),
                        "square frames");
  EXPECT_ERROR_CONTAINS(net->CheckImageSize(225), "sizes 1 to 224 work");
  net->CheckImageSize(224);
  net->CheckImageSize(1);
  // I3D has no gating: non-square frames work, as in TensorFlow.
  auto i3d = CreateNet("i3d", NetOptions().num_classes(5));
  i3d->module().eval();
  EXPECT_EQ(i3d->Forward(torch::rand({1, 3, 2, 32, 48})).logits.sizes().vec(),
            (std::vector<int64_t>{1, 5}));
}

// --model_summary per clip: a 3-D conv costs its weights once per output
// cell (Conv2d_1a_7x7 at 8 frames of 32x32: 4 x 16 x 16 cells of
// 7 x 7 x 7 x 3 x 64 weights; its parameters add the batch norm's beta).
TEST(VideoNetsTest, SummaryCountsMultiplyAddsPerClip) {
  auto net = CreateNet("i3d", NetOptions().num_classes(400).num_frames(8));
  const NetSummary s = SummarizeNet(*net, 32);
  EXPECT_EQ(s.num_frames, 8);
  ASSERT_EQ(s.end_points.front().name, "Conv2d_1a_7x7");
  EXPECT_EQ(s.end_points.front().shape,
            (std::vector<int64_t>{1, 64, 4, 16, 16}));
  EXPECT_EQ(s.end_points.front().multiply_adds, 4 * 16 * 16 * 65856);
  EXPECT_EQ(s.end_points.front().parameters, 65856 + 64);
  EXPECT_EQ(s.parameters, net->NumParameters());
  EXPECT_NE(s.ToString().find("32x32, 8 frames (per clip"), std::string::npos)
      << s.ToString();
}

// A training step reaches every variable: the temporal convs' biases and
// the gates' transformers included.
TEST(VideoNetsTest, TrainingReachesEveryVariable) {
  torch::manual_seed(3);
  auto net = CreateNet("s3dg", NetOptions().num_classes(4).weight_decay(1e-7));
  net->module().train();
  const NetOutput out = net->Forward(torch::rand({2, 3, 4, 32, 32}));
  (out.logits.pow(2).sum() + net->RegularizationLoss()).backward();
  for (const NamedTensor& v : net->TrainableVariables()) {
    ASSERT_TRUE(v.tensor.grad().defined()) << v.name;
    EXPECT_GT(v.tensor.grad().abs().sum().item<double>(), 0) << v.name;
  }
}

}  // namespace
}  // namespace slimtorch
