#include "slimtorch/nets/lenet.h"

#include <gtest/gtest.h>

#include <cmath>

#include "nets/zoo_input.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

std::shared_ptr<Net> MakeLeNet(int64_t classes = 10, double wd = 0.0,
                               int64_t channels = 1) {
  torch::manual_seed(0);
  return CreateNet("lenet", NetOptions()
                                .num_classes(classes)
                                .weight_decay(wd)
                                .input_channels(channels));
}

TEST(LeNetTest, VariableNamesAndShapesFollowTfSlim) {
  auto net = MakeLeNet();
  // TF-Slim shapes: conv [kh, kw, in, out], fc [in, out]; ours are
  // LibTorch's [out, in, kh, kw] and [out, in].
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"LeNet/conv1/weights", {32, 1, 5, 5}}, {"LeNet/conv1/biases", {32}},
      {"LeNet/conv2/weights", {64, 32, 5, 5}}, {"LeNet/conv2/biases", {64}},
      {"LeNet/fc3/weights", {1024, 3136}},     {"LeNet/fc3/biases", {1024}},
      {"LeNet/fc4/weights", {10, 1024}},       {"LeNet/fc4/biases", {10}}};
  NamedTensors vars = net->ModelVariables();
  ASSERT_EQ(vars.size(), expected.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_EQ(vars[i].name, expected[i].first);
    EXPECT_EQ(vars[i].tensor.sizes().vec(), expected[i].second)
        << vars[i].name;
  }
}

TEST(LeNetTest, ParameterCountWorkedByHand) {
  // conv1 5*5*1*32+32 = 832; conv2 5*5*32*64+64 = 51264;
  // fc3 3136*1024+1024 = 3212288; fc4 1024*10+10 = 10250.
  EXPECT_EQ(MakeLeNet()->NumParameters(), 832 + 51264 + 3212288 + 10250);
  EXPECT_EQ(MakeLeNet()->NumParameters(), 3274634);
}

TEST(LeNetTest, EndPointShapes) {
  auto net = MakeLeNet();
  net->module().eval();
  NetOutput out = net->Forward(torch::randn({3, 1, 28, 28}));
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"conv1", {3, 32, 28, 28}}, {"pool1", {3, 32, 14, 14}},
      {"conv2", {3, 64, 14, 14}}, {"pool2", {3, 64, 7, 7}},
      {"Flatten", {3, 3136}},     {"fc3", {3, 1024}},
      {"dropout3", {3, 1024}},    {"Logits", {3, 10}},
      {"Predictions", {3, 10}}};
  ASSERT_EQ(out.end_points.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(out.end_points[i].first, expected[i].first);
    EXPECT_EQ(out.end_points[i].second.sizes().vec(), expected[i].second);
  }
  EXPECT_EQ(out.logits.sizes().vec(), (std::vector<int64_t>{3, 10}));
  torch::Tensor sums = out.end_points.back().second.sum(1);
  EXPECT_TRUE(torch::allclose(sums, torch::ones({3})));
}

TEST(LeNetTest, NoClassesReturnsPreLogits) {
  auto net = MakeLeNet(0);
  NetOutput out = net->Forward(torch::randn({2, 1, 28, 28}));
  EXPECT_EQ(out.logits.sizes().vec(), (std::vector<int64_t>{2, 1024}));
  EXPECT_EQ(net->ModelVariables().size(), 6u);
}

TEST(LeNetTest, DropoutOnlyInTraining) {
  auto net = MakeLeNet();
  torch::Tensor x = torch::randn({4, 1, 28, 28});
  torch::NoGradGuard no_grad;
  net->module().eval();
  EXPECT_TRUE(torch::equal(net->Forward(x).logits, net->Forward(x).logits));
  net->module().train();
  NetOutput out = net->Forward(x);
  torch::Tensor fc3 = out.end_points[5].second;
  torch::Tensor d = out.end_points[6].second;
  // Each active fc3 unit is either dropped or scaled by 1/keep_prob = 2.
  torch::Tensor active = fc3.ne(0);
  torch::Tensor kept = d.ne(0);
  EXPECT_TRUE(torch::equal(d.masked_select(kept), 2 * fc3.masked_select(kept)));
  EXPECT_FALSE(kept.logical_and(active.logical_not()).any().item<bool>());
  double dropped = 1.0 - kept.sum().item<double>() / active.sum().item<double>();
  EXPECT_GT(dropped, 0.4);
  EXPECT_LT(dropped, 0.6);
}

TEST(LeNetTest, RegularizationIsHalfSumOfSquaredWeightsTimesDecay) {
  auto net = MakeLeNet(10, 0.01);
  double expected = 0.0;
  for (const auto& v : net->TrainableVariables()) {
    if (v.name.find("/weights") == std::string::npos) continue;  // no biases
    expected += 0.01 * v.tensor.pow(2).sum().item<double>() / 2.0;
  }
  EXPECT_NEAR(net->RegularizationLoss().item<double>(), expected,
              1e-6 * expected);
  EXPECT_EQ(MakeLeNet(10, 0.0)->RegularizationLoss().item<double>(), 0.0);
}

TEST(LeNetTest, InitializerIsTruncatedNormalPointOne) {
  auto net = MakeLeNet();
  torch::Tensor w = net->TrainableVariables()[4].tensor;  // fc3/weights
  EXPECT_LE(w.abs().max().item<double>(), 0.2 + 1e-6);
  // The standard deviation of a normal truncated at 2 sigma is 0.8796 sigma.
  EXPECT_NEAR(w.std().item<double>(), 0.1 * 0.87962566, 0.002);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.002);
  EXPECT_EQ(net->TrainableVariables()[5].tensor.abs().sum().item<double>(),
            0.0);  // biases start at zero
}

TEST(LeNetTest, RejectsWrongInputShape) {
  auto net = MakeLeNet();
  EXPECT_THROW(net->Forward(torch::randn({1, 3, 28, 28})), Error);
  EXPECT_THROW(net->Forward(torch::randn({1, 1, 32, 32})), Error);
}

TEST(LeNetTest, CloneIsDeepCopy) {
  auto net = MakeLeNet();
  auto copy = net->Clone();
  torch::NoGradGuard no_grad;
  copy->TrainableVariables()[0].tensor.add_(1.0);
  EXPECT_FALSE(torch::equal(net->TrainableVariables()[0].tensor,
                            copy->TrainableVariables()[0].tensor));
  EXPECT_EQ(copy->scope(), "LeNet");
}

TEST(NetRegistryTest, UnknownNameListsValidNames) {
  try {
    CreateNet("inception_v9", NetOptions());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inception_v9"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("lenet"), std::string::npos);
  }
}

// Walks the registry: every net builds at its default size and forwards.
TEST(NetRegistryTest, EveryNetBuildsAndRuns) {
  for (const std::string& name : GetNetRegistry().Names()) {
    auto net = CreateNet(
        name,
        testing::ZooTestOptions(NetOptions().num_classes(7).input_channels(3)));
    net->module().eval();
    int64_t s = testing::ZooTestSize(*net);
    torch::NoGradGuard no_grad;
    NetOutput out =
        net->Forward(torch::zeros(testing::ZooInputShape(*net, 2, s)));
    EXPECT_EQ(out.logits.sizes().vec(), (std::vector<int64_t>{2, 7})) << name;
  }
}

}  // namespace
}  // namespace slimtorch
