// NASNet-A / PNASNet-5 (nets/nasnet.h): TF-Slim's variable names without an
// outer scope, odd filter counts in factorized_reduction, the drop-path
// schedule against hand-worked values, no drop path in inference, and the
// papers' parameter and multiply-add figures.

#include "slimtorch/nets/nasnet.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "nets/nasnet_cells.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

using nets::DropPathKeepProb;

TEST(NasNetTest, DropPathKeepProbabilityFollowsTfSlimsSchedule) {
  // Step 0: nothing dropped, whatever the cell.
  EXPECT_DOUBLE_EQ(DropPathKeepProb(0.7, 21, 22, 0, 250000), 1.0);
  // nasnet_large (keep 0.7, 22 cells), cell 5 at half the steps:
  // 1 - 0.5 * 6 / 22 * 0.3 = 1 - 0.9 / 22 = 0.9590909...
  EXPECT_NEAR(DropPathKeepProb(0.7, 5, 22, 125000, 250000), 0.95909090909,
              1e-10);
  // The last cell past the total steps: the hparam itself.
  EXPECT_NEAR(DropPathKeepProb(0.7, 21, 22, 400000, 250000), 0.7, 1e-12);
  // nasnet_cifar (keep 0.6, 20 cells), cell 0 at 937500 / 4:
  // 1 - 0.25 * 1 / 20 * 0.4 = 0.995.
  EXPECT_NEAR(DropPathKeepProb(0.6, 0, 20, 234375, 937500), 0.995, 1e-12);
}

TEST(NasNetTest, DropPathKeepsWholeExamplesScaledUp) {
  torch::manual_seed(3);
  torch::Tensor x = torch::ones({4000, 2, 3, 3});
  torch::Tensor y = nets::DropPath(x, 0.6);
  // Each example all 0 or all 1 / 0.6.
  torch::Tensor per = y.flatten(1);
  EXPECT_TRUE(torch::equal(per.amin(1), per.amax(1)));
  const double kept =
      (per.select(1, 0) > 0).to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(kept, 0.6, 0.03);
  EXPECT_NEAR(per.select(1, 0).max().item<double>(), 1 / 0.6, 1e-6);
}

std::map<std::string, std::vector<int64_t>> Shapes(const std::string& name,
                                                   int64_t classes) {
  auto net = CreateNet(name, NetOptions().num_classes(classes));
  return net->TfVariableShapes();
}

TEST(NasNetTest, VariablesCarryTfSlimsNamesWithoutAnOuterScope) {
  auto v = Shapes("nasnet_mobile", 1001);
  EXPECT_EQ(v.at("conv0/weights"), (std::vector<int64_t>{3, 3, 3, 32}));
  EXPECT_EQ(v.at("conv0_bn/moving_variance"), (std::vector<int64_t>{32}));
  // cell_stem_0: F = 44 / 4 = 11; its left op of comb 0 is separable 5x5
  // on the 1x1's output.
  EXPECT_EQ(v.at("cell_stem_0/comb_iter_0/left/separable_5x5_1/"
                 "depthwise_weights"),
            (std::vector<int64_t>{5, 5, 11, 1}));
  EXPECT_EQ(v.at("cell_stem_0/comb_iter_0/right/separable_7x7_1/"
                 "pointwise_weights"),
            (std::vector<int64_t>{1, 1, 32, 11}));
  EXPECT_EQ(v.at("cell_stem_1/path1_conv/weights"),
            (std::vector<int64_t>{1, 1, 32, 11}));
  // skip_reduction_layer_input 0: reduction_cell_0's previous layer is
  // cell_2 (6 * 44 = 264 deep, same size) through prev_1x1; cell_4's is the
  // reduction's input cell_3 (twice the size) through factorized_reduction.
  EXPECT_EQ(v.at("reduction_cell_0/prev_1x1/weights"),
            (std::vector<int64_t>{1, 1, 264, 88}));
  EXPECT_EQ(v.at("cell_4/path2_conv/weights"),
            (std::vector<int64_t>{1, 1, 264, 44}));
  EXPECT_EQ(v.count("cell_0/prev_1x1/weights"), 0u);
  // No biases on convs, a 1x1 after a pool only where the depth changes.
  EXPECT_EQ(v.count("conv0/biases"), 0u);
  EXPECT_EQ(v.count("cell_stem_0/comb_iter_1/left/1x1/weights"), 0u);
  EXPECT_EQ(v.at("aux_7/aux_logits/Conv/weights"),
            (std::vector<int64_t>{4, 4, 128, 768}));
  EXPECT_EQ(v.at("aux_7/aux_logits/FC/biases"), (std::vector<int64_t>{1001}));
  EXPECT_EQ(v.at("final_layer/FC/weights"), (std::vector<int64_t>{1056, 1001}));
}

TEST(NasNetTest, OddFiltersGiveFactorizedReductionsSecondPathTheExtraOne) {
  // pnasnet_mobile's cell_stem_1: F = int(54 / 2) = 27 from conv0 (32).
  auto v = Shapes("pnasnet_mobile", 1001);
  EXPECT_EQ(v.at("cell_stem_1/path1_conv/weights"),
            (std::vector<int64_t>{1, 1, 32, 13}));
  EXPECT_EQ(v.at("cell_stem_1/path2_conv/weights"),
            (std::vector<int64_t>{1, 1, 32, 14}));
  EXPECT_EQ(v.at("cell_stem_1/final_path_bn/gamma"),
            (std::vector<int64_t>{27}));
  EXPECT_EQ(v.at("aux_5/aux_logits/proj/weights"),
            (std::vector<int64_t>{1, 1, 540, 128}));
  EXPECT_EQ(v.at("final_layer/FC/weights"), (std::vector<int64_t>{1080, 1001}));
}

// nasnet_cifar (dense dropout keep 1.0, so only drop path is random).
std::shared_ptr<Net> Cifar() {
  torch::manual_seed(1);
  return CreateNet("nasnet_cifar", NetOptions().num_classes(10));
}

TEST(NasNetTest, InferenceHasNoDropPathNorAuxHead) {
  auto net = Cifar();
  net->module().eval();
  net->SetGlobalStep(10000000);  // past the schedule: keep 0.6 at the end
  torch::Tensor x = torch::randn({2, 3, 32, 32});
  torch::NoGradGuard no_grad;
  NetOutput a = net->Forward(x);
  NetOutput b = net->Forward(x);
  EXPECT_TRUE(torch::equal(a.logits, b.logits));
  EXPECT_FALSE(a.aux_logits.defined());
}

TEST(NasNetTest, TrainingDropsPathsOnlyAsTheStepAdvances) {
  auto net = Cifar();
  net->module().train();
  torch::Tensor x = torch::randn({4, 3, 32, 32});
  torch::NoGradGuard no_grad;
  // Step 0: keep 1 everywhere, batch statistics only: repeatable.
  net->SetGlobalStep(0);
  NetOutput a = net->Forward(x);
  NetOutput b = net->Forward(x);
  EXPECT_TRUE(torch::allclose(a.logits, b.logits, 1e-5, 1e-5));
  ASSERT_TRUE(a.aux_logits.defined());
  EXPECT_EQ(a.aux_logits.sizes(), (std::vector<int64_t>{4, 10}));
  // At the end of the schedule paths are dropped: the outputs differ.
  net->SetGlobalStep(937500);
  NetOutput c = net->Forward(x);
  NetOutput d = net->Forward(x);
  EXPECT_FALSE(torch::allclose(c.logits, d.logits, 1e-3, 1e-3));
  auto& impl = dynamic_cast<ModuleNet<nets::NasNetImpl>&>(*net).impl();
  EXPECT_EQ(impl.total_cells(), 20);
  EXPECT_NEAR(impl.DropPathKeep(19), 0.6, 1e-12);
  net->module().eval();
  EXPECT_EQ(impl.DropPathKeep(19), 1.0);
}

TEST(NasNetTest, EndPointsAsTfSlim) {
  auto net = CreateNet("pnasnet_mobile", NetOptions().num_classes(5));
  net->module().train();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(torch::randn({2, 3, 224, 224}));
  std::vector<std::string> keys;
  for (const auto& [k, t] : out.end_points) keys.push_back(k);
  const std::vector<std::string> want = {
      "Stem",   "Cell_0",      "Cell_1",    "Cell_2",     "Cell_3",
      "Cell_4", "Cell_5",      "AuxLogits", "Cell_6",     "Cell_7",
      "Cell_8", "global_pool", "Logits",    "Predictions"};
  EXPECT_EQ(keys, want);
  EXPECT_EQ(out.end_points[0].second.sizes(),
            (std::vector<int64_t>{2, 135, 28, 28}));
  EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{2, 5}));
}

// Parameters and multiply-adds per image (1001 classes, default sizes,
// without the aux head: its line of the summary is left out of both)
// exactly as TF-Slim's own inference graph has them (trainable variables;
// Conv2D, DepthwiseConv2dNative and MatMul multiply-adds, counted from
// nasnet.py / pnasnet.py on TensorFlow 2.21), and near the papers' rounded
// figures (NASNet-A: Zoph et al. 2018; PNASNet-5: Liu et al. 2018; TF-Slim's
// README): 5.3M / 564M, 88.9M / 23.8B, 5.1M / 588M, 86.1M / 25.0B. TF-Slim's
// graphs come within 0.7% of those (PNASNet-5 Mobile's 5.07M parameters are
// the farthest; NASNet-A Large's 88.76M and PNASNet-5 Large's 24.94B
// multiply-adds do not round to the papers' figures either).
TEST(NasNetTest, ParametersAndMultiplyAddsMatchTfSlimAndThePapers) {
  const struct {
    const char* name;
    int64_t tf_params, tf_macs;
    double paper_params_m, paper_macs_m;
  } nets[] = {
      {"nasnet_mobile", 5291035, 563639872, 5.3, 564},
      {"pnasnet_mobile", 5065568, 587294280, 5.1, 588},
      {"nasnet_large", 88757183, 23783418690, 88.9, 23800},
      {"pnasnet_large", 86061989, 24937400112, 86.1, 25000},
  };
  for (const auto& n : nets) {
    auto net = CreateNet(n.name, NetOptions().num_classes(1001));
    NetSummary s = SummarizeNet(*net, net->default_image_size());
    int64_t params = s.parameters, macs = s.multiply_adds;
    for (const auto& e : s.end_points) {
      if (e.name == "AuxLogits") {
        params -= e.parameters;
        macs -= e.multiply_adds;
      }
    }
    EXPECT_EQ(params, n.tf_params) << n.name;
    EXPECT_EQ(macs, n.tf_macs) << n.name;
    EXPECT_NEAR(params / 1e6, n.paper_params_m, 0.007 * n.paper_params_m)
        << n.name;
    EXPECT_NEAR(macs / 1e6, n.paper_macs_m, 0.007 * n.paper_macs_m) << n.name;
  }
}

}  // namespace
}  // namespace slimtorch
