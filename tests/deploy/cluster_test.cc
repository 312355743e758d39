#include "slimtorch/deploy/cluster.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using Env = std::map<std::string, std::string>;

TEST(ClusterTest, OneProcessNeedsNothing) {
  const ClusterSpec c = ResolveCluster({}, {{"HOME", "/root"}});
  EXPECT_EQ(c.source, "single");
  EXPECT_EQ(c.world_size, 1);
  EXPECT_EQ(c.rank, 0);
}

TEST(ClusterTest, TorchrunEnvironment) {
  const ClusterSpec c = ResolveCluster({}, {{"RANK", "5"},
                                            {"WORLD_SIZE", "8"},
                                            {"LOCAL_RANK", "1"},
                                            {"MASTER_ADDR", "10.0.0.7"},
                                            {"MASTER_PORT", "29511"}});
  EXPECT_EQ(c.source, "torchrun");
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.master_addr, "10.0.0.7");
  EXPECT_EQ(c.master_port, 29511);
  // TF-Slim's flags may repeat what the environment says, not contradict it.
  ClusterFlags same;
  same.worker_replicas = 8;
  same.task = 5;
  EXPECT_EQ(
      ResolveCluster(same,
                     {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "h"}})
          .rank,
      5);
  ClusterFlags other;
  other.worker_replicas = 4;
  EXPECT_ERROR_CONTAINS(
      ResolveCluster(
          other, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
      "--worker_replicas=4", "torchrun job has 2 processes");
}

TEST(ClusterTest, TorchrunErrorsNameTheVariable) {
  EXPECT_ERROR_CONTAINS(ResolveCluster({}, {{"RANK", "0"}}),
                        "WORLD_SIZE is not set");
  EXPECT_ERROR_CONTAINS(
      ResolveCluster(
          {}, {{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
      "RANK='2' is not an integer in [0, 1]");
  EXPECT_ERROR_CONTAINS(
      ResolveCluster(
          {}, {{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
      "RANK='x'");
  EXPECT_ERROR_CONTAINS(
      ResolveCluster({}, {{"RANK", "1"}, {"WORLD_SIZE", "2"}}),
      "MASTER_ADDR is not set");
  EXPECT_ERROR_CONTAINS(ResolveCluster({}, {{"RANK", "1"},
                                            {"WORLD_SIZE", "2"},
                                            {"MASTER_ADDR", "h"},
                                            {"MASTER_PORT", "70000"}}),
                        "MASTER_PORT='70000'");
}

TEST(ClusterTest, SlurmEnvironment) {
  const ClusterSpec c =
      ResolveCluster({}, {{"SLURM_PROCID", "3"},
                          {"SLURM_NTASKS", "4"},
                          {"SLURM_LOCALID", "1"},
                          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                          {"SLURM_STEP_NODELIST", "gpu[08-09,12],cpu1"}});
  EXPECT_EQ(c.source, "slurm");
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.master_addr, "gpu08");  // the step's first node
  EXPECT_EQ(c.master_port, 29500);
  // torchrun's variables win when both are set (torchrun under srun).
  EXPECT_EQ(ResolveCluster({}, {{"SLURM_PROCID", "3"},
                                {"SLURM_NTASKS", "4"},
                                {"RANK", "0"},
                                {"WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "h"}})
                .source,
            "torchrun");
}

// torchrun's agent store, its restart attempt and the processes of this
// machine, as torchrun (1.13 and 2.x alike) sets them.
TEST(ClusterTest, TorchrunAgentStoreAndLocalWorld) {
  const ClusterSpec c =
      ResolveCluster({}, {{"RANK", "3"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "node0"},
                          {"MASTER_PORT", "29400"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                          {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(c.agent_store);
  EXPECT_EQ(c.attempt, 2);
  EXPECT_EQ(c.local_world_size, 2);
  // torch.distributed's test is the exact text "True"; the c10d rendezvous
  // of PyTorch 1.x says "False".
  const Env base = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}};
  for (const char* no : {"False", "true", "1"}) {
    Env env = base;
    env["TORCHELASTIC_USE_AGENT_STORE"] = no;
    EXPECT_FALSE(ResolveCluster({}, env).agent_store) << no;
  }
  EXPECT_EQ(ResolveCluster({}, base).local_world_size, 0);
  Env bad = base;
  bad["LOCAL_WORLD_SIZE"] = "3";
  EXPECT_ERROR_CONTAINS(ResolveCluster({}, bad), "LOCAL_WORLD_SIZE='3'");
  bad = base;
  bad["TORCHELASTIC_RESTART_COUNT"] = "-1";
  EXPECT_ERROR_CONTAINS(ResolveCluster({}, bad),
                        "TORCHELASTIC_RESTART_COUNT='-1'");
}

// SLURM's tasks on this node, from its compressed per-node counts.
TEST(ClusterTest, SlurmTasksOnThisNode) {
  auto local = [](Env extra) {
    Env env = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}};
    env.insert(extra.begin(), extra.end());
    return ResolveCluster({}, env).local_world_size;
  };
  EXPECT_EQ(local({}), 0);
  EXPECT_EQ(local({{"SLURM_TASKS_PER_NODE", "4"}}), 4);
  // Two on each of the first three nodes, one on the fourth.
  for (int node = 0; node < 4; ++node) {
    EXPECT_EQ(local({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                     {"SLURM_TASKS_PER_NODE", "9"},
                     {"SLURM_NODEID", std::to_string(node)}}),
              node < 3 ? 2 : 1)
        << node;
  }
  EXPECT_ERROR_CONTAINS(
      local({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "4"}}),
      "SLURM_NODEID=4 is past the nodes");
  EXPECT_ERROR_CONTAINS(local({{"SLURM_TASKS_PER_NODE", "2(x3"}}),
                        "SLURM_TASKS_PER_NODE");
}

TEST(ClusterTest, FirstSlurmHost) {
  EXPECT_EQ(FirstSlurmHost("node"), "node");
  EXPECT_EQ(FirstSlurmHost("a,b"), "a");
  EXPECT_EQ(FirstSlurmHost("node[03-05,9],gpu1"), "node03");
  EXPECT_EQ(FirstSlurmHost("rack[2]-n[4-5]"), "rack2-n4");
  EXPECT_ERROR_CONTAINS(FirstSlurmHost("node[03-05"), "'node[03-05'",
                        "unbalanced");
  EXPECT_ERROR_CONTAINS(FirstSlurmHost("node[]"), "empty range");
  EXPECT_ERROR_CONTAINS(FirstSlurmHost("node[a-b]"), "malformed range");
}

TEST(ClusterTest, TfSlimFlags) {
  ClusterFlags f;
  f.worker_replicas = 3;
  f.task = 2;
  const ClusterSpec c = ResolveCluster(f, {{"MASTER_ADDR", "chief"}});
  EXPECT_EQ(c.source, "flags");
  EXPECT_EQ(c.world_size, 3);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.master_addr, "chief");
  f.task = 3;
  EXPECT_ERROR_CONTAINS(ResolveCluster(f, {}),
                        "--task=3 is not in [0, --worker_replicas=3)");
  f.worker_replicas = 0;
  EXPECT_ERROR_CONTAINS(ResolveCluster(f, {}), "--worker_replicas must be");
}

}  // namespace
}  // namespace slimtorch
