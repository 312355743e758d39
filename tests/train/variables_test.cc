#include "slimtorch/train/variables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "io/io_test_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

TEST(ScopesTest, SplitAndMatchLikeTfSlim) {
  EXPECT_EQ(SplitScopes(" InceptionV3/Logits, InceptionV3/AuxLogits ,,"),
            (std::vector<std::string>{"InceptionV3/Logits",
                                      "InceptionV3/AuxLogits"}));
  EXPECT_TRUE(InScopes("LeNet/fc4/weights", {"LeNet/fc4"}));
  EXPECT_FALSE(InScopes("LeNet/fc3/weights", {"LeNet/fc4"}));
  EXPECT_FALSE(InScopes("LeNet/fc4/weights", {}));
}

class RestoreTest : public ::testing::Test {
 protected:
  NamedTensors Vars() {
    return {{"Net/a/weights", torch::zeros({2, 3})},
            {"Net/b/weights", torch::zeros({4})},
            {"Net/logits/weights", torch::zeros({5, 2})}};
  }
  CheckpointData Ckpt() {
    CheckpointData c;
    c.tensors = {{"Net/a/weights", torch::ones({2, 3})},
                 {"Net/logits/weights", torch::ones({7, 2})}};
    return c;
  }
};

TEST_F(RestoreTest, ListsEveryMissingAndMismatchedVariable) {
  try {
    RestoreVariables(Vars(), Ckpt(), "x.safetensors");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'x.safetensors' does not fit"), std::string::npos);
    EXPECT_NE(msg.find("Net/b/weights is missing"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Net/logits/weights has shape [7, 2] in the checkpoint,"
                       " [5, 2] in the model"),
              std::string::npos)
        << msg;
  }
}

TEST_F(RestoreTest, NothingIsCopiedWhenRestoreFails) {
  NamedTensors vars = Vars();
  EXPECT_THROW(RestoreVariables(vars, Ckpt(), "x"), Error);
  EXPECT_EQ(vars[0].tensor.sum().item<float>(), 0.0f);
}

TEST_F(RestoreTest, ExcludeScopesAndIgnoreMissing) {
  NamedTensors vars = Vars();
  RestoreOptions o;
  o.exclude_scopes = {"Net/logits"};
  o.ignore_missing = true;
  EXPECT_EQ(RestoreVariables(vars, Ckpt(), "x", o), 1);
  EXPECT_EQ(vars[0].tensor.sum().item<float>(), 6.0f);
  EXPECT_EQ(vars[2].tensor.sum().item<float>(), 0.0f);
  // ignore_missing does not forgive a shape mismatch.
  o.exclude_scopes.clear();
  EXPECT_THROW(RestoreVariables(vars, Ckpt(), "x", o), Error);
}

// The message of restoring `ckpt_net`'s variables into `model` (which must
// fail), with `hints`.
std::string MismatchMessage(Net& ckpt_net, Net& model,
                            const MismatchHints& hints) {
  CheckpointData ckpt;
  ckpt.tensors = ckpt_net.ModelVariables();
  ckpt.tensors.push_back({"global_step", torch::tensor(int64_t{200})});
  RestoreOptions o;
  o.hints = hints;
  return testing_io::ErrorMessage(
      [&] { RestoreVariables(model.ModelVariables(), ckpt, "ckpt", o); });
}

int64_t Lines(const std::string& s) {
  return std::count(s.begin(), s.end(), '\n') + 1;
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A train_dir of mobilenet_v1 resumed as mobilenet_v1_025 (138
// variables of other shapes) is a short error that names the net the
// checkpoint holds, the flag to fix and where the full list went.
TEST(MismatchErrorTest, WidthVariantIsNamedInAFewLines) {
  auto wide = CreateNet("mobilenet_v1", NetOptions().num_classes(3));
  auto narrow = CreateNet("mobilenet_v1_025", NetOptions().num_classes(3));
  MismatchHints hints;
  hints.model_name = "mobilenet_v1_025";
  hints.checkpoint_flag = "--train_dir";
  const std::string msg = MismatchMessage(*wide, *narrow, hints);
  EXPECT_LE(Lines(msg), 5) << msg;
  EXPECT_TRUE(Has(msg, "checkpoint 'ckpt' in --train_dir does not fit "
                       "--model_name=mobilenet_v1_025: it looks like a "
                       "checkpoint of mobilenet_v1, but"))
      << msg;
  EXPECT_TRUE(Has(msg, "another variant of MobilenetV1/")) << msg;
  EXPECT_TRUE(Has(msg, "--model_name=mobilenet_v1 builds that net")) << msg;
  EXPECT_TRUE(Has(msg, "new --train_dir")) << msg;
  // The first layer is the first example: 32 filters, the model's 8.
  EXPECT_TRUE(Has(msg, "MobilenetV1/Conv2d_0/weights has shape [32, 3, 3, 3] "
                       "in the checkpoint, [8, 3, 3, 3] in the model"))
      << msg;
  EXPECT_FALSE(Has(msg, "--checkpoint_exclude_scopes")) << msg;
  // The full list is in the file the message names.
  const size_t at = msg.find("the full list is in ");
  ASSERT_NE(at, std::string::npos) << msg;
  const std::string file =
      msg.substr(at + 20, msg.find(')', at) - (at + 20));
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file;
  int64_t listed = 0;
  for (std::string line; std::getline(in, line);) listed += line[0] != '#';
  int64_t differ = 0;  // all but the logits' biases, [3] in both
  const NamedTensors w = wide->ModelVariables(), n = narrow->ModelVariables();
  for (size_t i = 0; i < n.size(); ++i) {
    differ += w[i].tensor.sizes() != n[i].tensor.sizes();
  }
  EXPECT_GT(differ, 100);
  EXPECT_EQ(listed, differ);
  EXPECT_TRUE(Has(msg, StrCat(differ, " of its ", n.size(),
                              " variables differ in shape")))
      << msg;
  std::remove(file.c_str());
}

// The user's first eval: no --model_name, so inception_v3 meets a
// mobilenet_v1 checkpoint (390 variables missing before): the cause, not
// the list.
TEST(MismatchErrorTest, AnotherNetIsNamedByItsScope) {
  auto ckpt = CreateNet("mobilenet_v1_050", NetOptions().num_classes(3));
  auto model = CreateNet("inception_v3", NetOptions().num_classes(3));
  MismatchHints hints;
  hints.model_name = "inception_v3";
  const std::string msg = MismatchMessage(*ckpt, *model, hints);
  EXPECT_LE(Lines(msg), 5) << msg;
  EXPECT_TRUE(Has(msg, "does not fit --model_name=inception_v3: it looks "
                       "like a checkpoint of mobilenet_v1_050 (its variables "
                       "are under MobilenetV1/), but --model_name="
                       "inception_v3 builds InceptionV3/"))
      << msg;
  EXPECT_TRUE(Has(msg, "Check --model_name (--model_name=mobilenet_v1_050 "
                       "builds that net) and --checkpoint_path."))
      << msg;
  EXPECT_TRUE(Has(msg, "InceptionV3/Conv2d_1a_3x3/weights is missing")) << msg;
  EXPECT_FALSE(Has(msg, "--checkpoint_exclude_scopes")) << msg;
  EXPECT_FALSE(Has(msg, "--ignore_missing_vars")) << msg;
}

// Only the logits differ: another number of classes, so the dataset flags
// are the cause; --checkpoint_exclude_scopes only where the tool has it.
TEST(MismatchErrorTest, LogitsAloneMeanAnotherNumberOfClasses) {
  auto five = CreateNet("lenet", NetOptions().num_classes(5));
  auto three = CreateNet("lenet", NetOptions().num_classes(3));
  MismatchHints hints;
  hints.model_name = "lenet";
  std::string msg = MismatchMessage(*five, *three, hints);
  EXPECT_EQ(Lines(msg), 3) << msg;
  EXPECT_TRUE(Has(msg, "its logits have 5 classes where --model_name=lenet "
                       "has 3")) << msg;
  EXPECT_TRUE(Has(msg, "Check --dataset_name, --dataset_dir and "
                       "--labels_offset.")) << msg;
  EXPECT_FALSE(Has(msg, "--checkpoint_exclude_scopes")) << msg;
  hints.scope_flags = true;
  msg = MismatchMessage(*five, *three, hints);
  EXPECT_TRUE(Has(msg, "--checkpoint_exclude_scopes=LeNet/fc4")) << msg;
}

TEST(MismatchErrorTest, NetsWithScopeFindsEveryWidth) {
  EXPECT_EQ(NetsWithScope("MobilenetV1"),
            (std::vector<std::string>{"mobilenet_v1", "mobilenet_v1_025",
                                      "mobilenet_v1_050",
                                      "mobilenet_v1_075"}));
  EXPECT_EQ(NetsWithScope("CifarNet"), std::vector<std::string>{"cifarnet"});
  EXPECT_TRUE(NetsWithScope("NoSuchNet").empty());
}

// Every registered net is found from its TF-Slim scope (persisted names:
// nets/*.cc): a new net whose name does not start like its scope must be
// added here and to NetNameMatchesScope.
TEST(MismatchErrorTest, EveryRegisteredNetMatchesItsScope) {
  const std::map<std::string, std::string> scopes = {
      {"alexnet_v2", "alexnet_v2"},
      {"cifarnet", "CifarNet"},
      {"cifarnet_tutorial", "cifarnet_tutorial"},
      {"i3d", "InceptionV1"},  // video nets
      {"s3dg", "InceptionV1"},
      {"inception_resnet_v2", "InceptionResnetV2"},
      {"inception_v1", "InceptionV1"},
      {"inception_v2", "InceptionV2"},
      {"inception_v3", "InceptionV3"},
      {"inception_v4", "InceptionV4"},
      {"lenet", "LeNet"},
      {"mobilenet_v1", "MobilenetV1"},
      {"mobilenet_v1_025", "MobilenetV1"},
      {"mobilenet_v1_050", "MobilenetV1"},
      {"mobilenet_v1_075", "MobilenetV1"},
      {"mobilenet_v2", "MobilenetV2"},
      {"mobilenet_v2_035", "MobilenetV2"},
      {"mobilenet_v2_140", "MobilenetV2"},
      {"overfeat", "overfeat"},
      {"resnet_v1_101", "resnet_v1_101"},
      {"resnet_v1_152", "resnet_v1_152"},
      {"resnet_v1_200", "resnet_v1_200"},
      {"resnet_v1_50", "resnet_v1_50"},
      {"resnet_v2_101", "resnet_v2_101"},
      {"resnet_v2_152", "resnet_v2_152"},
      {"resnet_v2_200", "resnet_v2_200"},
      {"resnet_v2_50", "resnet_v2_50"},
      {"vgg_16", "vgg_16"},
      {"vgg_19", "vgg_19"},
      {"vgg_a", "vgg_a"},
      // MobileNet v3 / EdgeTPU.
      {"mobilenet_v3_large", "MobilenetV3"},
      {"mobilenet_v3_small", "MobilenetV3"},
      {"mobilenet_v3_large_minimalistic", "MobilenetV3"},
      {"mobilenet_v3_small_minimalistic", "MobilenetV3"},
      {"mobilenet_edgetpu", "MobilenetEdgeTPU"},
      {"mobilenet_edgetpu_075", "MobilenetEdgeTPU"},
      // NASNet / PNASNet: no scope (conv0/, cell_0/, final_layer/), so the
      // hints that look nets up by a checkpoint's scope never name them.
      {"nasnet_cifar", ""},
      {"nasnet_mobile", ""},
      {"nasnet_large", ""},
      {"pnasnet_mobile", ""},
      {"pnasnet_large", ""}};
  for (const std::string& name : GetNetRegistry().Names()) {
    auto it = scopes.find(name);
    if (it == scopes.end()) {
      ADD_FAILURE() << name << " is registered but not listed here";
      continue;
    }
    EXPECT_EQ(NetNameMatchesScope(name, it->second), !it->second.empty())
        << name;
  }
  // The small ones, built: the listed scope is the net's.
  for (const char* name : {"lenet", "cifarnet", "cifarnet_tutorial",
                           "mobilenet_v1_025", "mobilenet_v2_035"}) {
    EXPECT_EQ(CreateNet(name, NetOptions().num_classes(2))->scope(),
              scopes.at(name));
  }
}

}  // namespace
}  // namespace slimtorch
