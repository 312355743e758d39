// The inference graph recorded from a net's forward pass: for every net of
// the zoo, the graph run op by op (RunGraph) gives the net's own logits, on
// the recorded batch and on another one, every node's output shape is the
// recorded one, and layers carry their TF-Slim scopes.
#include "slimtorch/export/inference_graph.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>

#include "nets/zoo_input.h"
#include "slimtorch/core/error.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// Moving statistics away from 0 / 1 so that batch norm does something.
void RandomizeStatistics(Net& net) {
  torch::NoGradGuard no_grad;
  for (NamedTensor& v : net.ModelVariables()) {
    const std::string& n = v.name;
    if (n.size() > 11 && n.compare(n.size() - 11, 11, "moving_mean") == 0) {
      v.tensor.uniform_(-0.2, 0.2);
    } else if (n.size() > 15 &&
               n.compare(n.size() - 15, 15, "moving_variance") == 0) {
      v.tensor.uniform_(0.5, 1.5);
    } else if (n.size() > 5 && (n.compare(n.size() - 5, 5, "gamma") == 0 ||
                                n.compare(n.size() - 4, 4, "beta") == 0)) {
      v.tensor.uniform_(0.5, 1.5);
    }
  }
}

InferenceGraph Record(Net& net, const torch::Tensor& images,
                      torch::Tensor* logits) {
  GraphRecorder recorder(images, ModulePaths(net.module(), net.scope()));
  NetOutput out = net.Forward(images);
  *logits = out.logits;
  return recorder.Finish(net.scope(), out.logits, out.end_points);
}

class InferenceGraphTest : public ::testing::TestWithParam<std::string> {};

TEST_P(InferenceGraphTest, RunsLikeTheNet) {
  torch::manual_seed(3);
  auto net = CreateNet(GetParam(),
                       testing::ZooTestOptions(NetOptions().num_classes(7)));
  RandomizeStatistics(*net);
  net->module().eval();
  torch::NoGradGuard no_grad;
  const int64_t s = testing::ZooTestSize(*net);
  const torch::Tensor images =
      torch::rand(testing::ZooInputShape(*net, 1, s)) * 2 - 1;
  torch::Tensor logits;
  const InferenceGraph g = Record(*net, images, &logits);
  EXPECT_EQ(g.scope, net->scope());
  ASSERT_GE(g.logits, 0);
  ASSERT_GE(g.predictions, 0);

  const std::vector<torch::Tensor> values = RunGraph(g, images);
  const double scale = logits.abs().max().item<double>();
  EXPECT_LE((values[g.logits] - logits).abs().max().item<double>(),
            1e-5 * scale + 1e-6);
  EXPECT_TRUE(torch::allclose(values[g.predictions], torch::softmax(logits, -1),
                              1e-5, 1e-7));
  for (const GraphNode& n : g.nodes) {
    EXPECT_EQ(values[n.output].sizes().vec(), g.values[n.output].shape)
        << n.name;
  }
  // Layers are named by their scope; every weight tensor is there.
  std::set<std::string> names;
  int64_t weights = 0;
  for (const GraphNode& n : g.nodes) {
    EXPECT_TRUE(names.insert(n.name).second) << "two nodes named " << n.name;
    for (const torch::Tensor* t :
         {&n.weights, &n.bias, &n.scale, &n.offset, &n.mean, &n.variance}) {
      if (t->defined()) weights += t->numel();
    }
  }
  // Auxiliary heads (Inception's AuxLogits/, NASNet's aux_<cell>/) are not
  // in the inference graph; BN without gamma / beta gets ones / zeros there.
  int64_t want = 0;
  for (const NamedTensor& v : net->ModelVariables()) {
    const bool aux = v.name.find("AuxLogits/") != std::string::npos ||
                     v.name.rfind("aux_", 0) == 0;
    if (!aux) want += v.tensor.numel();
  }
  EXPECT_GT(weights, 0);
  EXPECT_GE(weights, want);

  // Another batch through the same graph.
  const torch::Tensor batch =
      torch::rand(testing::ZooInputShape(*net, 3, s)) * 2 - 1;
  const torch::Tensor eager = net->Forward(batch).logits;
  EXPECT_LE((RunGraph(g, batch)[g.logits] - eager).abs().max().item<double>(),
            1e-5 * eager.abs().max().item<double>() + 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Zoo, InferenceGraphTest,
                         ::testing::ValuesIn(GetNetRegistry().Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(InferenceGraphRecorderTest, NamesLayersByScopeAndRefusesTraining) {
  auto net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  net->module().eval();
  torch::NoGradGuard no_grad;
  torch::Tensor logits;
  const InferenceGraph g = Record(*net, torch::rand({2, 1, 28, 28}), &logits);
  std::vector<std::string> names;
  for (const GraphNode& n : g.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "LeNet/conv1/Conv2D", "LeNet/conv1/Relu", "MaxPool",
                       "LeNet/conv2/Conv2D", "LeNet/conv2/Relu", "MaxPool_1",
                       "Flatten", "LeNet/fc3/MatMul", "LeNet/fc3/Relu",
                       "LeNet/fc4/MatMul", "LeNet/Predictions"}));
  EXPECT_EQ(g.values[g.logits].end_point, "Logits");

  auto bn = CreateNet("inception_v1", NetOptions().num_classes(5));
  bn->module().train();
  GraphRecorder recorder(torch::rand({1, 3, 224, 224}),
                         ModulePaths(bn->module(), bn->scope()));
  EXPECT_THROW(bn->Forward(torch::rand({1, 3, 224, 224})), Error);
}

}  // namespace
}  // namespace slimtorch
