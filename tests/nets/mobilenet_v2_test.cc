// MobileNet v2 beyond the logits test (which checks every variable of the
// three registered multipliers against tf_keras's port):
//  * tf_keras.applications.MobileNetV2(alpha, classes=1000).count_params():
//    3 538 984 (1.0), 6 156 712 (1.4), 1 691 208 (0.35), moving statistics
//    included;
//  * mobilenet's _make_divisible worked by hand;
//  * any image size works (the head pools the whole map).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "slimtorch/nets/mobilenet_v2.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

int64_t AllVariables(const std::string& name) {
  auto net = CreateNet(name, NetOptions().num_classes(1000));
  int64_t n = 0;
  for (const auto& v : net->ModelVariables()) n += v.tensor.numel();
  return n;
}

TEST(MobileNetV2Test, KerasVariableCounts) {
  EXPECT_EQ(AllVariables("mobilenet_v2"), 3538984);
  EXPECT_EQ(AllVariables("mobilenet_v2_140"), 6156712);
  EXPECT_EQ(AllVariables("mobilenet_v2_035"), 1691208);
}

TEST(MobileNetV2Test, MakeDivisible) {
  EXPECT_EQ(nets::MakeDivisible(32 * 0.35), 16);  // 8 < 0.9 * 11.2
  EXPECT_EQ(nets::MakeDivisible(16 * 0.35), 8);   // the minimum
  EXPECT_EQ(nets::MakeDivisible(64 * 1.4), 88);   // 89.6 rounds down
  EXPECT_EQ(nets::MakeDivisible(96 * 1.4), 136);  // 134.4 rounds up
  EXPECT_EQ(nets::MakeDivisible(1280 / 0.35 * 0.35), 1280);
}

TEST(MobileNetV2Test, AnyImageSizeAndFeatures) {
  auto net = CreateNet("mobilenet_v2_035", NetOptions().num_classes(0));
  net->CheckImageSize(97);
  net->module().eval();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(torch::randn({2, 3, 97, 97}));
  EXPECT_EQ(out.logits.sizes().vec(), (std::vector<int64_t>{2, 1280, 1, 1}));
  EXPECT_EQ(out.end_points.back().first, "global_pool");
  auto full = CreateNet("mobilenet_v2", NetOptions().num_classes(10));
  full->module().eval();
  NetOutput f = full->Forward(torch::randn({1, 3, 160, 160}));
  EXPECT_EQ(f.logits.sizes().vec(), (std::vector<int64_t>{1, 10}));
}

}  // namespace
}  // namespace slimtorch
