#include "slimtorch/io/checkpoint_average.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/checkpoint.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// Checkpoint k of a "run": weights k + [0, 1, 2], a bfloat16 slot, the
// step.
CheckpointData Step(int k) {
  CheckpointData d;
  d.tensors.push_back(
      {"net/w", torch::tensor({0.0f, 1.0f, 2.0f}) + static_cast<float>(k)});
  d.tensors.push_back(
      {"net/w/Momentum",
       torch::full({2}, 0.5 * k, torch::dtype(torch::kBFloat16))});
  d.tensors.push_back({"global_step", torch::tensor({int64_t{100} * k})});
  d.metadata["model_name"] = "test_net";
  d.metadata["step"] = std::to_string(k);
  return d;
}

std::string ErrorOf(const std::vector<std::string>& in,
                    const std::string& out) {
  try {
    AverageCheckpoints(in, out);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointAverageTest, MeansFloatsAndKeepsTheNewestsRest) {
  testing::TempDir dir;
  std::vector<std::string> paths;
  for (int k = 1; k <= 3; ++k) {
    paths.push_back(dir.Join("c" + std::to_string(k) + ".safetensors"));
    SaveCheckpoint(paths.back(), Step(k));
  }
  const AverageResult r =
      AverageCheckpoints(paths, dir.Join("avg.safetensors"));
  EXPECT_EQ(r.averaged, 2);
  EXPECT_EQ(r.copied, 1);
  EXPECT_FALSE(r.tensorflow);
  const CheckpointData avg = LoadCheckpoint(dir.Join("avg.safetensors"));
  // (1 + 2 + 3) / 3 = 2 added to [0, 1, 2].
  EXPECT_TRUE(
      torch::equal(avg.Find("net/w"), torch::tensor({2.0f, 3.0f, 4.0f})));
  EXPECT_EQ(avg.Find("net/w/Momentum").scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(
      torch::equal(avg.Find("net/w/Momentum"),
                   torch::full({2}, 1.0, torch::dtype(torch::kBFloat16))));
  EXPECT_EQ(avg.Find("global_step").item<int64_t>(), 300);
  EXPECT_EQ(avg.metadata.at("step"), "3");
  EXPECT_NE(avg.metadata.at("slimtorch/averaged_from").find("c1.safetensors"),
            std::string::npos);
  // The order of the newest file.
  ASSERT_EQ(avg.tensors.size(), 3u);
  EXPECT_EQ(avg.tensors[0].name, "net/w");
}

TEST(CheckpointAverageTest, TensorFlowCheckpointsAverageToOne) {
  testing::TempDir dir;
  std::vector<std::string> prefixes;
  for (int k = 1; k <= 2; ++k) {
    prefixes.push_back(dir.Join("model.ckpt-" + std::to_string(k)));
    SaveTfCheckpoint(prefixes.back(), Step(k).tensors);
  }
  const AverageResult r = AverageCheckpoints(prefixes, dir.Join("avg"));
  EXPECT_TRUE(r.tensorflow);
  const OpenedCheckpoint avg = OpenCheckpoint(dir.Join("avg"));
  EXPECT_TRUE(avg.tensorflow());
  EXPECT_TRUE(
      torch::equal(avg.Read("net/w"), torch::tensor({1.5f, 2.5f, 3.5f})));
  EXPECT_EQ(avg.Read("global_step").item<int64_t>(), 200);
}

TEST(CheckpointAverageTest, MisfitsAreNamedAndNothingIsWritten) {
  testing::TempDir dir;
  SaveCheckpoint(dir.Join("a.safetensors"), Step(1));
  CheckpointData other = Step(2);
  other.tensors[0].tensor = torch::zeros({4});
  SaveCheckpoint(dir.Join("b.safetensors"), other);
  std::string what =
      ErrorOf({dir.Join("b.safetensors"), dir.Join("a.safetensors")},
              dir.Join("out.safetensors"));
  EXPECT_NE(what.find("'net/w' is [4] in"), std::string::npos) << what;
  EXPECT_NE(what.find("b.safetensors"), std::string::npos) << what;
  EXPECT_FALSE(PathExists(dir.Join("out.safetensors")));

  CheckpointData fewer = Step(3);
  fewer.tensors.erase(fewer.tensors.begin() + 1);
  SaveCheckpoint(dir.Join("c.safetensors"), fewer);
  what = ErrorOf({dir.Join("c.safetensors"), dir.Join("a.safetensors")},
                 dir.Join("out.safetensors"));
  EXPECT_NE(what.find("has no tensor 'net/w/Momentum'"), std::string::npos)
      << what;

  SaveTfCheckpoint(dir.Join("tf"), Step(1).tensors);
  what = ErrorOf({dir.Join("tf"), dir.Join("a.safetensors")},
                 dir.Join("out.safetensors"));
  EXPECT_NE(what.find("cannot average the TensorFlow checkpoint"),
            std::string::npos)
      << what;
  EXPECT_FALSE(PathExists(dir.Join("out.safetensors")));
}

TEST(CheckpointAverageTest, LastCheckpointsOfATrainDir) {
  testing::TempDir dir;
  CheckpointManager manager(dir.Join("train"), 3);
  for (int k = 1; k <= 4; ++k) manager.Save(k, Step(k));
  const std::vector<std::string> last = LastCheckpoints(dir.Join("train"), 2);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_NE(last[0].find("model.ckpt-3"), std::string::npos);
  EXPECT_NE(last[1].find("model.ckpt-4"), std::string::npos);
  try {
    LastCheckpoints(dir.Join("train"), 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its index lists 3"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace slimtorch
