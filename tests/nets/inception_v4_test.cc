// Inception v4 (tf_slim does not ship it, nor does tf_keras) against
// published figures:
//  * Szegedy et al. 2016 (arXiv:1602.07261), Figures 3, 4, 6, 7, 8: the stem
//    ends at 35x35x384, Reduction-A gives 17x17x1024, Reduction-B 8x8x1536,
//    and the Inception-A/B/C blocks keep 384 / 1024 / 1536 channels.
//  * 42 679 816 parameters for 1000 classes and no aux head: the count of the
//    PyTorch port of TF-Slim's inception_v4_2016_09_09 checkpoint (Cadene's
//    pretrainedmodels, reused by timm and imgclsmob), whose batch norms also
//    carry a gamma; TF-Slim's have beta only (inception_arg_scope), so
//    ours + one more value per batch-norm channel must equal it.
//  * TF-Slim's variable names (its checkpoint's keys) for the head.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(InceptionV4Test, PublishedParameterCount) {
  auto net = CreateNet("inception_v4", NetOptions().num_classes(1000));
  int64_t params = 0, beta = 0;
  for (const auto& v : net->TrainableVariables()) {
    if (Contains(v.name, "/AuxLogits/")) continue;
    params += v.tensor.numel();
    if (Contains(v.name, "/BatchNorm/beta")) beta += v.tensor.numel();
  }
  EXPECT_EQ(params + beta, 42679816);
}

TEST(InceptionV4Test, PaperShapesAndTfSlimNames) {
  auto net = CreateNet("inception_v4", NetOptions().num_classes(1001));
  std::map<std::string, std::vector<int64_t>> vars;
  for (const auto& v : net->ModelVariables()) vars[v.name] = v.tensor.sizes().vec();
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(vars.at("InceptionV4/Conv2d_1a_3x3/weights"), (Shape{32, 3, 3, 3}));
  EXPECT_EQ(vars.at("InceptionV4/Mixed_3a/Branch_1/Conv2d_0a_3x3/weights"),
            (Shape{96, 64, 3, 3}));
  EXPECT_EQ(vars.at("InceptionV4/Mixed_6h/Branch_1/Conv2d_0c_7x1/weights"),
            (Shape{256, 224, 7, 1}));
  EXPECT_EQ(vars.at("InceptionV4/Mixed_7d/Branch_2/Conv2d_0e_3x1/weights"),
            (Shape{256, 512, 3, 1}));
  EXPECT_EQ(vars.at("InceptionV4/Mixed_7d/Branch_2/Conv2d_0e_3x1/BatchNorm/"
                    "moving_variance"),
            (Shape{256}));
  EXPECT_EQ(vars.count("InceptionV4/Mixed_7d/Branch_2/Conv2d_0e_3x1/BatchNorm/"
                       "gamma"),
            0u);
  EXPECT_EQ(vars.at("InceptionV4/AuxLogits/Conv2d_1b_1x1/weights"),
            (Shape{128, 1024, 1, 1}));
  EXPECT_EQ(vars.at("InceptionV4/AuxLogits/Conv2d_2a/weights"),
            (Shape{768, 128, 5, 5}));
  EXPECT_EQ(vars.at("InceptionV4/AuxLogits/Aux_logits/weights"),
            (Shape{1001, 768}));
  EXPECT_EQ(vars.at("InceptionV4/Logits/Logits/weights"), (Shape{1001, 1536}));
  EXPECT_EQ(vars.at("InceptionV4/Logits/Logits/biases"), (Shape{1001}));

  net->module().eval();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(torch::randn({1, 3, 299, 299}));
  std::map<std::string, Shape> points;
  for (const auto& [k, t] : out.end_points) points[k] = t.sizes().vec();
  EXPECT_EQ(points.at("Mixed_5a"), (Shape{1, 384, 35, 35}));
  EXPECT_EQ(points.at("Mixed_5e"), (Shape{1, 384, 35, 35}));
  EXPECT_EQ(points.at("Mixed_6a"), (Shape{1, 1024, 17, 17}));
  EXPECT_EQ(points.at("Mixed_6h"), (Shape{1, 1024, 17, 17}));
  EXPECT_EQ(points.at("Mixed_7a"), (Shape{1, 1536, 8, 8}));
  EXPECT_EQ(points.at("Mixed_7d"), (Shape{1, 1536, 8, 8}));
  EXPECT_EQ(points.at("global_pool"), (Shape{1, 1536, 1, 1}));
  EXPECT_EQ(points.at("PreLogitsFlatten"), (Shape{1, 1536}));
  EXPECT_EQ(points.at("AuxLogits"), (Shape{1, 1001}));
  EXPECT_EQ(points.at("Predictions"), (Shape{1, 1001}));
  EXPECT_EQ(out.aux_logits.sizes().vec(), (Shape{1, 1001}));
  // Mixed_3a .. Mixed_7d: 3 + 4 + 1 + 7 + 1 + 3 blocks.
  int mixed = 0;
  for (const auto& [k, t] : out.end_points) mixed += k.rfind("Mixed_", 0) == 0;
  EXPECT_EQ(mixed, 19);
}

// The aux head's Conv2d_2a is as large as its input map, so its shape
// follows the image size the net is built for, as in TF-Slim.
TEST(InceptionV4Test, ImageSizeShapesTheAuxHead) {
  auto net = CreateNet("inception_v4", NetOptions().num_classes(3).image_size(400));
  for (const auto& v : net->ModelVariables()) {
    if (v.name == "InceptionV4/AuxLogits/Conv2d_2a/weights") {
      EXPECT_EQ(v.tensor.sizes().vec(), (std::vector<int64_t>{768, 128, 7, 7}));
    }
  }
  net->CheckImageSize(400);
  EXPECT_ERROR_CONTAINS(net->CheckImageSize(299), "built for 400x400",
                        "--train_image_size");
  EXPECT_ERROR_CONTAINS(
      CreateNet("inception_v4", NetOptions().num_classes(3).image_size(100)),
      "cannot be built for 100x100", "107");
  // Without logits any size from 75 works.
  auto features = CreateNet("inception_v4", NetOptions().num_classes(0));
  features->CheckImageSize(75);
  EXPECT_ERROR_CONTAINS(features->CheckImageSize(74), "at least 75x75");
  features->module().eval();
  torch::NoGradGuard no_grad;
  NetOutput f = features->Forward(torch::randn({1, 3, 75, 75}));
  EXPECT_FALSE(f.aux_logits.defined());
  EXPECT_EQ(f.logits.sizes().vec(), (std::vector<int64_t>{1, 1536, 1, 1}));
}

}  // namespace
}  // namespace slimtorch
