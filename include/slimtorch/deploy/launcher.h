#pragma once
// --num_clones=N on one machine without an external launcher: the command
// runs itself N times as clone processes set up as torchrun would
// (RANK = LOCAL_RANK = k, WORLD_SIZE = N, MASTER_ADDR = 127.0.0.1, a free
// MASTER_PORT, and SLIMTORCH_CLONE_OF = this process), and watches them.
//   - Clones run in their own process group and get SIGTERM when the
//     launcher dies.
//   - SIGINT / SIGTERM to the launcher are passed on to every clone (they
//     stop after the same step, replica 0 saves, all exit 0); a second one
//     is passed on and the launcher exits at once (128 + the signal).
//   - A clone that exits non-zero or is killed makes the launcher stop the
//     others (SIGTERM, then SIGKILL after `grace`) and fail naming that
//     clone, its pid and how it ended.

#include <chrono>
#include <string>

#include "slimtorch/deploy/cluster.h"

namespace slimtorch {

// True in a process RunClones started.
bool IsLaunchedClone();

// Runs `argv` (argv[0] is replaced by /proc/self/exe) as `num_clones`
// clones and returns the launcher's exit status: 0 when every clone
// exited 0. Throws slimtorch::Error naming the clone that failed.
// `machine`: this machine's place in a job of several (TF-Slim's
// --worker_replicas / --task, as model_deploy's replicas of clones): clone k
// of task t then gets RANK = t * num_clones + k of WORLD_SIZE =
// worker_replicas * num_clones, and the job's MASTER_ADDR / MASTER_PORT.
int RunClones(int num_clones, char** argv, std::chrono::seconds grace,
              const ClusterSpec& machine = ClusterSpec());

}  // namespace slimtorch
