// A net's variables to and from TensorFlow's layouts, and TensorFlow
// checkpoints as --checkpoint_path (LoadCheckpointFor): round trips through
// our own V2 writer, scopes, mismatches named in TensorFlow's terms.
// TensorFlow's own checkpoints: tests/io/tf_checkpoint_golden_test.cc.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "io/io_test_util.h"
#include "slimtorch/io/tf_checkpoint.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/variables.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing::TempDir;

TEST(TfLayoutTest, KernelsByNameAndRank) {
  // A conv kernel [kh=2, kw=3, in=4, out=5]: TF element [h, w, i, o] is ours
  // [o, i, h, w].
  const torch::Tensor tf =
      torch::arange(120, torch::kFloat).reshape({2, 3, 4, 5});
  const torch::Tensor ours = FromTfLayout("Net/conv/weights", tf);
  ASSERT_EQ(ours.sizes(), (std::vector<int64_t>{5, 4, 2, 3}));
  EXPECT_EQ(ours[4][1][1][2].item<float>(), tf[1][2][1][4].item<float>());
  EXPECT_TRUE(torch::equal(ToTfLayout("Net/conv/weights", ours), tf));
  // Depthwise [kh=2, kw=3, in=4, mult=5]: channel c * 5 + m is TF's [.., c, m].
  const torch::Tensor dw = FromTfLayout("Net/sep/depthwise_weights", tf);
  ASSERT_EQ(dw.sizes(), (std::vector<int64_t>{20, 1, 2, 3}));
  EXPECT_EQ(dw[2 * 5 + 3][0][1][0].item<float>(), tf[1][0][2][3].item<float>());
  EXPECT_TRUE(torch::equal(ToTfLayout("Net/sep/depthwise_weights", dw, 5), tf));
  EXPECT_ERROR_CONTAINS(ToTfLayout("Net/sep/depthwise_weights", dw, 3),
                        "depth multiplier of 3");
  // Fully connected [in, out] ↔ [out, in]; a square one is still transposed
  // (decided by rank, not by shape).
  const torch::Tensor fc = torch::arange(9, torch::kFloat).reshape({3, 3});
  EXPECT_TRUE(torch::equal(FromTfLayout("Net/fc/weights", fc), fc.t()));
  const torch::Tensor bias = torch::arange(3, torch::kFloat);
  EXPECT_TRUE(torch::equal(FromTfLayout("Net/fc/biases", bias), bias));
}

// Large kernels take the tiled kernel: the same values as permute.
TEST(TfLayoutTest, LargeKernelsEqualThePermutation) {
  const torch::Tensor conv = torch::randn({3, 5, 37, 70});
  const torch::Tensor ours = FromTfLayout("N/c/weights", conv);
  EXPECT_TRUE(torch::equal(ours, conv.permute({3, 2, 0, 1})));
  EXPECT_TRUE(torch::equal(ToTfLayout("N/c/weights", ours), conv));
  const torch::Tensor fc = torch::randn({123, 77});
  EXPECT_TRUE(torch::equal(FromTfLayout("N/fc/weights", fc), fc.t()));
  EXPECT_TRUE(
      torch::equal(ToTfLayout("N/fc/weights", fc.t().contiguous()), fc));
  const torch::Tensor dw = torch::randn({3, 3, 600, 1});
  const torch::Tensor dw_ours = FromTfLayout("N/d/depthwise_weights", dw);
  EXPECT_TRUE(torch::equal(dw_ours, dw.permute({2, 3, 0, 1})));
  EXPECT_TRUE(torch::equal(ToTfLayout("N/d/depthwise_weights", dw_ours), dw));
  // Any 4-byte type moves bits, not values.
  const torch::Tensor ints =
      torch::randint(-1000, 1000, {2, 2, 40, 64}, torch::kInt);
  EXPECT_TRUE(torch::equal(FromTfLayout("N/i/weights", ints),
                           ints.permute({3, 2, 0, 1})));
}

TEST(TfLayoutTest, InceptionV2DepthMultiplierIsTheNets) {
  auto net = CreateNet("inception_v2", NetOptions().num_classes(7));
  const auto shapes = net->TfVariableShapes();
  EXPECT_EQ(shapes.at("InceptionV2/Conv2d_1a_7x7/depthwise_weights"),
            (std::vector<int64_t>{7, 7, 3, 8}));
  EXPECT_EQ(shapes.at("InceptionV2/Conv2d_1a_7x7/pointwise_weights"),
            (std::vector<int64_t>{1, 1, 24, 64}));
  for (const NamedTensor& v : net->TfModelVariables()) {
    EXPECT_EQ(v.tensor.sizes().vec(), shapes.at(v.name)) << v.name;
  }
}

// Fills every variable with distinct values.
void Scramble(Net& net, float seed) {
  torch::NoGradGuard no_grad;
  float k = seed;
  for (NamedTensor& v : net.ModelVariables()) {
    v.tensor.copy_(torch::arange(v.tensor.numel(), torch::kFloat)
                       .reshape(v.tensor.sizes())
                       .mul(0.001f)
                       .add(k));
    k += 1;
  }
}

TEST(TfRestoreTest, OurTensorFlowCheckpointRestoresEveryVariable) {
  for (const std::string name : {"lenet", "mobilenet_v1_025", "inception_v2"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    auto a = CreateNet(name, NetOptions().num_classes(10));
    Scramble(*a, 1);
    NamedTensors saved = a->TfModelVariables();
    saved.push_back({"global_step", torch::tensor(int64_t{42})});
    SaveTfCheckpoint(dir.Join("model.ckpt-42"), saved);

    auto b = CreateNet(name, NetOptions().num_classes(10));
    Scramble(*b, 1000);
    const LoadedCheckpoint ckpt =
        LoadCheckpointFor(dir.Join("model.ckpt-42.index"), *b, {}, false);
    EXPECT_TRUE(ckpt.tensorflow);
    EXPECT_EQ(ckpt.path, dir.Join("model.ckpt-42"));
    EXPECT_EQ(ckpt.data.Find("global_step").item<int64_t>(), 42);
    RestoreVariables(b->ModelVariables(), ckpt.data, ckpt.path);
    const NamedTensors va = a->ModelVariables(), vb = b->ModelVariables();
    ASSERT_EQ(va.size(), vb.size());
    for (size_t i = 0; i < va.size(); ++i) {
      EXPECT_TRUE(torch::equal(va[i].tensor, vb[i].tensor)) << va[i].name;
    }
  }
}

TEST(TfRestoreTest, ScopesShadowsAndMismatchesInTensorFlowTerms) {
  TempDir dir;
  auto a = CreateNet("lenet", NetOptions().num_classes(10));
  Scramble(*a, 1);
  NamedTensors saved = a->TfModelVariables();
  for (const NamedTensor& v : a->TfModelVariables()) {
    saved.push_back({MovingAverageName(v.name), v.tensor * 2});
  }
  SaveTfCheckpoint(dir.Join("m"), saved);

  // Another class count: both logits variables are named with both shapes,
  // in TensorFlow's layout; the cause is the classes, and the scope flags
  // are suggested only for a tool that has them.
  auto five = CreateNet("lenet", NetOptions().num_classes(5));
  RestoreOptions train_hints;
  train_hints.hints.scope_flags = true;
  EXPECT_ERROR_CONTAINS(
      LoadCheckpointFor(dir.Join("m"), *five, train_hints, false),
      dir.Join("m"), "does not fit the model: its logits have 10 classes",
      "LeNet/fc4/weights has shape [1024, 10] in the checkpoint, [1024, 5] in "
      "the model",
      "LeNet/fc4/biases has shape [10] in the checkpoint, [5] in the model",
      "(shapes in TensorFlow's layout)",
      "--checkpoint_exclude_scopes=LeNet/fc4");
  EXPECT_EQ(testing_io::ErrorMessage([&] {
              LoadCheckpointFor(dir.Join("m"), *five, {}, false);
            }).find("--checkpoint_exclude_scopes"),
            std::string::npos);
  // Excluded, they are left alone and the rest restores.
  RestoreOptions exclude;
  exclude.exclude_scopes = {"LeNet/fc4"};
  const LoadedCheckpoint ckpt =
      LoadCheckpointFor(dir.Join("m"), *five, exclude, false);
  EXPECT_EQ(
      RestoreVariables(five->ModelVariables(), ckpt.data, ckpt.path, exclude),
      6);
  // The shadows, in our layout.
  auto shadows = CreateNet("lenet", NetOptions().num_classes(10));
  const LoadedCheckpoint avg =
      LoadCheckpointFor(dir.Join("m"), *shadows, {}, true);
  RestoreMovingAverages(shadows->ModelVariables(), avg.data, avg.path);
  const NamedTensors va = a->ModelVariables(), vs = shadows->ModelVariables();
  for (size_t i = 0; i < va.size(); ++i) {
    EXPECT_TRUE(torch::equal(va[i].tensor * 2, vs[i].tensor)) << va[i].name;
  }
  // A safetensors path still goes the old way; a missing one names what was
  // looked for.
  EXPECT_ERROR_CONTAINS(
      LoadCheckpointFor(dir.Join("nothing"), *five, {}, false), "nothing");
}

// --ignore_missing_vars on a TensorFlow checkpoint, through the path train
// and eval run (RestoreCheckpointFor): a checkpoint without the logits fails
// naming both of them; with ignore_missing the rest restores and the logits
// keep their values; a shape mismatch is never forgiven.
TEST(TfRestoreTest, IgnoreMissingVarsSkipsWhatTheCheckpointLacks) {
  TempDir dir;
  auto a = CreateNet("lenet", NetOptions().num_classes(10));
  Scramble(*a, 1);
  NamedTensors saved;
  for (const NamedTensor& v : a->TfModelVariables()) {
    if (!InScopes(v.name, {"LeNet/fc4"})) saved.push_back(v);
  }
  SaveTfCheckpoint(dir.Join("m"), saved);

  auto b = CreateNet("lenet", NetOptions().num_classes(10));
  Scramble(*b, 1000);
  const NamedTensors before = b->ModelVariables();
  std::map<std::string, torch::Tensor> kept;
  for (const NamedTensor& v : before) kept[v.name] = v.tensor.clone();
  RestoreOptions train_hints;
  train_hints.hints.scope_flags = true;
  EXPECT_ERROR_CONTAINS(
      RestoreCheckpointFor(dir.Join("m"), *b, train_hints, false),
      "of the 8 variables of the model, 2 are missing", "LeNet/fc4/weights",
      "LeNet/fc4/biases", "--ignore_missing_vars");
  for (const NamedTensor& v : b->ModelVariables()) {
    EXPECT_TRUE(torch::equal(v.tensor, kept[v.name])) << "touched " << v.name;
  }
  RestoreOptions ignore;
  ignore.ignore_missing = true;
  const RestoredCheckpoint r =
      RestoreCheckpointFor(dir.Join("m"), *b, ignore, false);
  EXPECT_EQ(r.restored, 6);
  const NamedTensors va = a->ModelVariables(), vb = b->ModelVariables();
  for (size_t i = 0; i < va.size(); ++i) {
    const bool logits = InScopes(va[i].name, {"LeNet/fc4"});
    EXPECT_TRUE(
        torch::equal(vb[i].tensor, logits ? kept[va[i].name] : va[i].tensor))
        << va[i].name;
  }
  auto five = CreateNet("lenet", NetOptions().num_classes(5));
  SaveTfCheckpoint(dir.Join("all"), a->TfModelVariables());
  EXPECT_ERROR_CONTAINS(
      RestoreCheckpointFor(dir.Join("all"), *five, ignore, false),
      "LeNet/fc4/weights has shape [1024, 10] in the checkpoint, [1024, 5]");
}

}  // namespace
}  // namespace slimtorch
