#pragma once
// Where this process sits in a data-parallel training job (model_deploy's
// replicas and clones): its rank among all processes, its rank on this
// machine, and where the rendezvous (c10d's TCPStore) is.
//
// Sources, first match wins:
//   1. torchrun:  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//                 MASTER_ADDR, MASTER_PORT; TORCHELASTIC_USE_AGENT_STORE=True
//                 (torchrun's agent already serves the store on MASTER_PORT:
//                 every process joins it as a client) and
//                 TORCHELASTIC_RESTART_COUNT (this node's restarts: the
//                 nodes of one job need not agree on it, so it only names
//                 the attempt in logs)
//   2. SLURM:     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and the first
//                 host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST (or
//                 MASTER_ADDR); MASTER_PORT or 29500
//   3. TF-Slim's flags: --worker_replicas (processes) and --task (this
//                 one's rank), MASTER_ADDR / MASTER_PORT or 127.0.0.1:29500
// A job of one process needs none of them.

#include <map>
#include <string>

namespace slimtorch {

struct ClusterSpec {
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Processes of this job on this machine (torchrun's LOCAL_WORLD_SIZE,
  // SLURM's tasks on this node); 0 when the launcher does not say.
  int local_world_size = 0;
  // "single", "torchrun", "slurm" or "flags": where the values came from.
  std::string source = "single";
  // Under torchrun: its agent serves the store at master_addr:master_port
  // (no process of the job serves it), and this node's agent has
  // restarted its workers `attempt` times.
  bool agent_store = false;
  int attempt = 0;
};

// The TF-Slim flags that can place a process (train_image_classifier's
// --worker_replicas and --task).
struct ClusterFlags {
  int worker_replicas = 1;
  int task = 0;
};

// Resolves the job from `env` (the process environment, or a test's) and
// the flags. Throws slimtorch::Error naming the variable or flag that is
// malformed, out of range or inconsistent (e.g. RANK >= WORLD_SIZE, or
// --worker_replicas=4 under a torchrun job of 2).
ClusterSpec ResolveCluster(const ClusterFlags& flags,
                           const std::map<std::string, std::string>& env);

// This process's environment as a map.
std::map<std::string, std::string> ProcessEnvironment();

// The first host of a SLURM node list: "node[03-05,9],gpu1" -> "node03",
// "a,b" -> "a", "host" -> "host". Throws naming the list when malformed.
std::string FirstSlurmHost(const std::string& nodelist);

}  // namespace slimtorch
