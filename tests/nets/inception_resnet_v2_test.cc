// Inception-ResNet-v2 beyond the logits test (which checks every variable
// against tf_keras's port): published figures and what Keras lacks.
//  * tf_keras.applications.InceptionResNetV2(classes=1000).count_params()
//    = 55 873 736 (weights, biases, beta and moving statistics; no aux head).
//  * TF-Slim's aux head (reference section 3.9) and slim.repeat's scopes.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

TEST(InceptionResnetV2Test, KerasVariableCountAndAuxHead) {
  auto net = CreateNet("inception_resnet_v2", NetOptions().num_classes(1000));
  int64_t all = 0;
  std::map<std::string, std::vector<int64_t>> vars;
  for (const auto& v : net->ModelVariables()) {
    vars[v.name] = v.tensor.sizes().vec();
    if (v.name.find("/AuxLogits/") == std::string::npos) all += v.tensor.numel();
  }
  EXPECT_EQ(all, 55873736);
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(vars.at("InceptionResnetV2/Repeat/block35_10/Conv2d_1x1/biases"),
            (Shape{320}));
  EXPECT_EQ(vars.at("InceptionResnetV2/Repeat_1/block17_20/Branch_1/"
                    "Conv2d_0c_7x1/weights"),
            (Shape{192, 160, 7, 1}));
  EXPECT_EQ(vars.at("InceptionResnetV2/Block8/Conv2d_1x1/weights"),
            (Shape{2080, 448, 1, 1}));
  EXPECT_EQ(vars.at("InceptionResnetV2/AuxLogits/Conv2d_2a_5x5/weights"),
            (Shape{768, 128, 5, 5}));
  EXPECT_EQ(vars.at("InceptionResnetV2/AuxLogits/Logits/weights"),
            (Shape{1000, 768}));

  net->module().eval();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(torch::randn({1, 3, 299, 299}));
  std::map<std::string, Shape> points;
  for (const auto& [k, t] : out.end_points) points[k] = t.sizes().vec();
  EXPECT_EQ(points.at("Mixed_5b"), (Shape{1, 320, 35, 35}));
  EXPECT_EQ(points.at("PreAuxLogits"), (Shape{1, 1088, 17, 17}));
  EXPECT_EQ(points.at("Mixed_7a"), (Shape{1, 2080, 8, 8}));
  EXPECT_EQ(points.at("Conv2d_7b_1x1"), (Shape{1, 1536, 8, 8}));
  EXPECT_EQ(out.aux_logits.sizes().vec(), (Shape{1, 1000}));
}

// inception_resnet_v2_arg_scope regularizes biases too.
TEST(InceptionResnetV2Test, WeightDecayCoversWeightsAndBiases) {
  auto net = CreateNet("inception_resnet_v2",
                       NetOptions().num_classes(4).weight_decay(0.25));
  double expected = 0;
  for (const auto& v : net->TrainableVariables()) {
    const std::string& n = v.name;
    const bool weights = n.size() > 8 && n.compare(n.size() - 8, 8, "/weights") == 0;
    const bool biases = n.size() > 7 && n.compare(n.size() - 7, 7, "/biases") == 0;
    if (weights || biases) expected += 0.125 * v.tensor.pow(2).sum().item<double>();
  }
  EXPECT_NEAR(net->RegularizationLoss().item<double>(), expected, 1e-4 * expected);
}

TEST(InceptionResnetV2Test, SizesItCannotTakeAreClearErrors) {
  auto net = CreateNet("inception_resnet_v2", NetOptions().num_classes(4));
  EXPECT_ERROR_CONTAINS(net->CheckImageSize(320), "built for 299x299");
  auto features = CreateNet("inception_resnet_v2", NetOptions().num_classes(0));
  EXPECT_ERROR_CONTAINS(features->CheckImageSize(60), "at least 75x75");
}

}  // namespace
}  // namespace slimtorch
