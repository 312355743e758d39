#include "slimtorch/train/variables.h"

#include <gtest/gtest.h>

#include "slimtorch/core/error.h"

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
    EXPECT_NE(msg.find("'x.safetensors' does not match"), std::string::npos);
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

}  // namespace
}  // namespace slimtorch
