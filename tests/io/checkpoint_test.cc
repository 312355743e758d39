#include "slimtorch/io/checkpoint.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing_io::ScratchDir;

// ----------------------------------------------------- manager and paths

CheckpointData StepData(int64_t step) {
  CheckpointData d;
  d.tensors.push_back({"w", torch::full({2}, static_cast<double>(step))});
  d.metadata["global_step"] = std::to_string(step);
  return d;
}

TEST(CheckpointManagerTest, KeepsNewestAndIndexNamesLatest) {
  ScratchDir scratch;
  const std::string dir = JoinPath(scratch.path(), "train");
  CheckpointManager manager(dir, /*max_to_keep=*/2);
  EXPECT_FALSE(manager.Latest().has_value());
  for (int64_t step : {100, 200, 300}) {
    EXPECT_EQ(
        manager.Save(step, StepData(step)),
        JoinPath(dir, "model.ckpt-" + std::to_string(step) + ".safetensors"));
  }
  EXPECT_EQ(ReadFileToString(JoinPath(dir, "checkpoint")),
            "model_checkpoint_path: \"model.ckpt-300.safetensors\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-200.safetensors\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-300.safetensors\"\n");
  EXPECT_EQ(
      Glob(JoinPath(dir, "*")),
      (std::vector<std::string>{JoinPath(dir, "checkpoint"),
                                JoinPath(dir, "model.ckpt-200.safetensors"),
                                JoinPath(dir, "model.ckpt-300.safetensors")}));
  EXPECT_EQ(manager.Latest(), JoinPath(dir, "model.ckpt-300.safetensors"));
  EXPECT_EQ(LatestCheckpoint(dir), JoinPath(dir, "model.ckpt-300.safetensors"));
  EXPECT_EQ(LoadCheckpoint(*manager.Latest()).metadata.at("global_step"),
            "300");

  // A new manager (a resumed run) continues the rotation from the index.
  CheckpointManager resumed(dir, 2);
  resumed.Save(400, StepData(400));
  EXPECT_FALSE(PathExists(JoinPath(dir, "model.ckpt-200.safetensors")));
  EXPECT_TRUE(PathExists(JoinPath(dir, "model.ckpt-300.safetensors")));
  // Saving an existing step again replaces it and makes it the latest.
  resumed.Save(300, StepData(301));
  EXPECT_EQ(resumed.Latest(), JoinPath(dir, "model.ckpt-300.safetensors"));
  EXPECT_EQ(ReadFileToString(JoinPath(dir, "checkpoint")),
            "model_checkpoint_path: \"model.ckpt-300.safetensors\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-400.safetensors\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-300.safetensors\"\n");
  EXPECT_EQ(LoadCheckpoint(JoinPath(dir, "model.ckpt-300.safetensors"))
                .metadata.at("global_step"),
            "301");
}

TEST(CheckpointManagerTest, NonPositiveMaxToKeepKeepsAll) {
  ScratchDir dir;
  CheckpointManager manager(dir.path(), 0);
  for (int64_t step = 1; step <= 7; ++step) manager.Save(step, StepData(step));
  EXPECT_EQ(Glob(dir.File("model.ckpt-*.safetensors")).size(), 7u);
}

// ------------------------------------------------------- storage faults

using testing::ListDir;
using testing::ScopedFileFaults;

// A disk that fills while the second checkpoint is written: the error names
// it, nothing of it is left, and the index still names the first, whole.
TEST(CheckpointManagerTest, FullDiskLeavesThePreviousCheckpoint) {
  for (CheckpointFormat format :
       {CheckpointFormat::kSafetensors, CheckpointFormat::kTensorFlow}) {
    ScratchDir dir;
    CheckpointManager manager(dir.path(), 5, format);
    const std::string first = manager.Save(1, StepData(1));
    const std::string index = ReadFileToString(dir.File("checkpoint"));
    const std::vector<std::string> files = testing::ListDir(dir.path());
    {
      ScopedFileFaults faults("write:*/model.ckpt-2*:5:ENOSPC");
      EXPECT_ERROR_CONTAINS(manager.Save(2, StepData(2)),
                            dir.File("model.ckpt-2"), std::strerror(ENOSPC));
    }
    EXPECT_EQ(ListDir(dir.path()), files);
    EXPECT_EQ(ReadFileToString(dir.File("checkpoint")), index);
    EXPECT_EQ(LatestCheckpoint(dir.path()), first);
    EXPECT_EQ(OpenCheckpoint(dir.path()).Read("w")[0].item<float>(), 1.0f);
  }
}

// The index cannot be replaced (its rename fails; then the directory is
// read-only): the new checkpoint, which it would have named, is removed.
TEST(CheckpointManagerTest, FailedIndexKeepsTheOldIndexAndNoStrayCheckpoint) {
  for (const char* spec : {"rename:*/checkpoint:0:EIO",
                           "open:*/checkpoint:0:EROFS"}) {
    ScratchDir dir;
    CheckpointManager manager(dir.path(), 5);
    manager.Save(1, StepData(1));
    ScopedFileFaults faults(spec);
    EXPECT_ERROR_CONTAINS(manager.Save(2, StepData(2)), dir.File("checkpoint"));
    EXPECT_EQ(ListDir(dir.path()),
              (std::vector<std::string>{"checkpoint",
                                        "model.ckpt-1.safetensors"}))
        << spec;
    EXPECT_EQ(ListedCheckpoints(dir.path()),
              std::vector<std::string>{dir.File("model.ckpt-1.safetensors")});
  }
}

// A directory removed during training is not created again for a lone
// checkpoint; one that did not exist is created by the first Save.
TEST(CheckpointManagerTest, VanishedDirectoryIsAnError) {
  ScratchDir scratch;
  const std::string dir = JoinPath(scratch.path(), "train");
  CheckpointManager manager(dir, 5);
  manager.Save(1, StepData(1));
  testing::RemoveTree(dir);
  EXPECT_ERROR_CONTAINS(manager.Save(2, StepData(2)),
                        "checkpoint directory '" + dir + "' no longer exists");
  EXPECT_FALSE(PathExists(dir));
}

TEST(CheckpointManagerTest, ListedCheckpointsOldestFirstLatestLast) {
  ScratchDir dir;
  EXPECT_TRUE(ListedCheckpoints(dir.path()).empty());
  CheckpointManager manager(dir.path(), 3);
  for (int64_t step : {1, 2, 3, 4}) manager.Save(step, StepData(step));
  manager.Save(3, StepData(3));  // again: the latest
  EXPECT_EQ(ListedCheckpoints(dir.path()),
            (std::vector<std::string>{dir.File("model.ckpt-2.safetensors"),
                                      dir.File("model.ckpt-4.safetensors"),
                                      dir.File("model.ckpt-3.safetensors")}));
}

TEST(CheckpointPathTest, LatestCheckpointReadsTfStyleIndex) {
  ScratchDir dir;
  EXPECT_FALSE(LatestCheckpoint(dir.path()).has_value());
  // TF writes timestamps too; they are ignored. Absolute paths stay as is.
  WriteFileAtomically(dir.File("checkpoint"),
                      "model_checkpoint_path: \"/abs/model.ckpt-5\"\n"
                      "all_model_checkpoint_paths: \"/abs/model.ckpt-5\"\n"
                      "all_model_checkpoint_timestamps: 1700000000.5\n"
                      "last_preserved_timestamp: 1699999999.25\n");
  EXPECT_EQ(LatestCheckpoint(dir.path()), "/abs/model.ckpt-5");
  WriteFileAtomically(dir.File("checkpoint"), "model_checkpoint_path \"x\"\n");
  EXPECT_ERROR_CONTAINS(LatestCheckpoint(dir.path()),
                        dir.File("checkpoint") + ":1");
}

TEST(CheckpointPathTest, ResolveDirectoryFileAndMissing) {
  ScratchDir scratch;
  const std::string dir = JoinPath(scratch.path(), "run");
  MakeDirs(dir);
  EXPECT_ERROR_CONTAINS(ResolveCheckpointPath(dir),
                        "no checkpoint found in " + dir);
  CheckpointManager manager(dir, 3);
  manager.Save(10, StepData(10));
  const std::string p20 = manager.Save(20, StepData(20));
  EXPECT_EQ(ResolveCheckpointPath(dir), p20);
  const std::string p10 = JoinPath(dir, "model.ckpt-10.safetensors");
  EXPECT_EQ(ResolveCheckpointPath(p10), p10);
  EXPECT_ERROR_CONTAINS(ResolveCheckpointPath(JoinPath(dir, "nope")),
                        JoinPath(dir, "nope"), "does not exist");
  std::remove(p20.c_str());
  EXPECT_ERROR_CONTAINS(ResolveCheckpointPath(dir), p20, "does not exist");
}

// ------------------------------------------------------------ OpenCheckpoint

TEST(OpenCheckpointTest, DecidesEachKindOfPath) {
  ScratchDir scratch;
  const std::string ours = JoinPath(scratch.path(), "ours");
  CheckpointManager(ours, 2).Save(5, StepData(5));
  const std::string file = JoinPath(ours, "model.ckpt-5.safetensors");
  for (const std::string& p : {ours, file}) {
    const OpenedCheckpoint c = OpenCheckpoint(p);
    EXPECT_FALSE(c.tensorflow()) << p;
    EXPECT_EQ(c.path(), file) << p;
    EXPECT_EQ(c.data().metadata.at("global_step"), "5");
    ASSERT_EQ(c.tensors().size(), 1u);
    EXPECT_EQ(c.tensors()[0].name, "w");
    EXPECT_EQ(c.tensors()[0].shape, std::vector<int64_t>{2});
    EXPECT_EQ(c.Read("w").sum().item<double>(), 10.0);
    EXPECT_ERROR_CONTAINS(c.Read("v"), "checkpoint '" + p, "no tensor 'v'");
  }

  const std::string tf = JoinPath(scratch.path(), "tf");
  CheckpointManager(tf, 2, CheckpointFormat::kTensorFlow).Save(7, StepData(7));
  const std::string prefix = JoinPath(tf, "model.ckpt-7");
  for (const std::string& p : {tf, prefix, prefix + ".index"}) {
    const OpenedCheckpoint c = OpenCheckpoint(p);
    EXPECT_TRUE(c.tensorflow()) << p;
    EXPECT_EQ(c.path(), prefix) << p;
    EXPECT_EQ(c.tf().format(), TfCheckpointFormat::kV2);
    ASSERT_EQ(c.tensors().size(), 1u);
    EXPECT_EQ(c.tensors()[0].shape, std::vector<int64_t>{2});
    EXPECT_EQ(c.Read("w").sum().item<float>(), 14.f);
  }
  EXPECT_TRUE(CheckpointExists(file));
  EXPECT_TRUE(CheckpointExists(prefix));
  EXPECT_FALSE(CheckpointExists(JoinPath(tf, "model.ckpt-8")));
}

TEST(OpenCheckpointTest, MissingPathsAreResolveCheckpointPathsErrors) {
  ScratchDir scratch;
  const std::string nope = JoinPath(scratch.path(), "nope");
  EXPECT_ERROR_CONTAINS(OpenCheckpoint(nope), "checkpoint '" + nope + "'",
                        "does not exist");
  EXPECT_ERROR_CONTAINS(OpenCheckpoint(scratch.path()),
                        "no checkpoint found in " + scratch.path());
}

}  // namespace
}  // namespace slimtorch
