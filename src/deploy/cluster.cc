#include "slimtorch/deploy/cluster.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using Env = std::map<std::string, std::string>;

const std::string* Find(const Env& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// A whole decimal integer in [lo, hi], or an error naming `what`.
int ParseInt(const std::string& text, const std::string& what, long lo,
             long hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  SLIM_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0 &&
                 v >= lo && v <= hi,
             what, "='", text, "' is not an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(v);
}

int Required(const Env& env, const std::string& name, const std::string& job,
             long lo, long hi) {
  const std::string* v = Find(env, name);
  SLIM_CHECK(v != nullptr, job, " job: ", name, " is not set");
  return ParseInt(*v, name, lo, hi);
}

// The world size, rank and local rank (`fallback` when its variable is
// unset) of a job whose launcher names them.
void RanksFromEnv(const Env& env, const std::string& job, const char* world,
                  const char* rank, const char* local_rank, bool local_is_rank,
                  ClusterSpec* c) {
  c->source = job == "SLURM" ? "slurm" : job;
  c->world_size = Required(env, world, job, 1, INT_MAX);
  c->rank = Required(env, rank, job, 0, c->world_size - 1);
  c->local_rank = Find(env, local_rank) != nullptr
                      ? Required(env, local_rank, job, 0, c->world_size - 1)
                      : (local_is_rank ? c->rank : 0);
}

// SLURM's tasks on this node: the count of node SLURM_NODEID (0 when unset)
// in SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE ("2(x3),1": two
// on each of the first three nodes, one on the fourth); 0 when neither is
// set. Throws naming the variable when malformed.
int SlurmLocalTasks(const Env& env, int world_size) {
  const std::string* node_id = Find(env, "SLURM_NODEID");
  const int node =
      node_id != nullptr ? ParseInt(*node_id, "SLURM_NODEID", 0, INT_MAX) : 0;
  for (const char* name :
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    const std::string* list = Find(env, name);
    if (list == nullptr) continue;
    long first = 0;  // the first node of the current entry
    for (size_t pos = 0; pos <= list->size();) {
      size_t end = list->find(',', pos);
      if (end == std::string::npos) end = list->size();
      const std::string entry = list->substr(pos, end - pos);
      const size_t paren = entry.find("(x");
      const int count = ParseInt(entry.substr(0, paren), name, 1, world_size);
      long repeat = 1;
      if (paren != std::string::npos) {
        SLIM_CHECK(entry.back() == ')', name, "='", *list,
                   "' is not a SLURM task count list like 2(x3),1");
        repeat = ParseInt(entry.substr(paren + 2, entry.size() - paren - 3),
                          name, 1, INT_MAX);
      }
      if (node < first + repeat) return count;
      first += repeat;
      pos = end + 1;
    }
    SLIM_FAIL("SLURM_NODEID=", node, " is past the nodes of ", name, "='",
              *list, "'");
  }
  return 0;
}

void MasterFromEnv(const Env& env, ClusterSpec* c) {
  if (const std::string* addr = Find(env, "MASTER_ADDR"))
    c->master_addr = *addr;
  if (const std::string* port = Find(env, "MASTER_PORT")) {
    c->master_port = ParseInt(*port, "MASTER_PORT", 1, 65535);
  }
}

}  // namespace

std::string FirstSlurmHost(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    const char ch = nodelist[end];
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    SLIM_CHECK(depth >= 0 && depth <= 1, "SLURM node list '", nodelist,
               "' has unbalanced brackets");
    if (ch == ',' && depth == 0) break;
  }
  SLIM_CHECK(depth == 0, "SLURM node list '", nodelist,
             "' has unbalanced brackets");
  std::string host = nodelist.substr(0, end);
  SLIM_CHECK(!host.empty(), "SLURM node list '", nodelist, "' is empty");
  // Each bracket group becomes its first element: "03-05,9" -> "03".
  for (size_t open; (open = host.find('[')) != std::string::npos;) {
    const size_t close = host.find(']', open);
    SLIM_CHECK(close != std::string::npos && close > open + 1,
               "SLURM node list '", nodelist, "' has an empty range");
    std::string range = host.substr(open + 1, close - open - 1);
    range = range.substr(0, range.find(','));
    range = range.substr(0, range.find('-'));
    SLIM_CHECK(!range.empty() &&
                   range.find_first_not_of("0123456789") == std::string::npos,
               "SLURM node list '", nodelist, "' has a malformed range");
    host = host.substr(0, open) + range + host.substr(close + 1);
  }
  return host;
}

ClusterSpec ResolveCluster(const ClusterFlags& flags, const Env& env) {
  SLIM_CHECK(flags.worker_replicas >= 1, "--worker_replicas must be >= 1, got ",
             flags.worker_replicas);
  ClusterSpec c;
  if (Find(env, "WORLD_SIZE") != nullptr || Find(env, "RANK") != nullptr) {
    RanksFromEnv(env, "torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                 /*local_is_rank=*/true, &c);
    SLIM_CHECK(Find(env, "MASTER_ADDR") != nullptr || c.world_size == 1,
               "torchrun job: MASTER_ADDR is not set");
    MasterFromEnv(env, &c);
    if (Find(env, "LOCAL_WORLD_SIZE") != nullptr) {
      c.local_world_size =
          Required(env, "LOCAL_WORLD_SIZE", "torchrun", 1, c.world_size);
    }
    // torch.distributed's own test: the exact text "True".
    const std::string* agent = Find(env, "TORCHELASTIC_USE_AGENT_STORE");
    c.agent_store = agent != nullptr && *agent == "True";
    if (Find(env, "TORCHELASTIC_RESTART_COUNT") != nullptr) {
      c.attempt =
          Required(env, "TORCHELASTIC_RESTART_COUNT", "torchrun", 0, INT_MAX);
    }
  } else if (Find(env, "SLURM_PROCID") != nullptr &&
             Find(env, "SLURM_NTASKS") != nullptr) {
    RanksFromEnv(env, "SLURM", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID",
                 /*local_is_rank=*/false, &c);
    const std::string* nodes = Find(env, "SLURM_STEP_NODELIST");
    if (nodes == nullptr) nodes = Find(env, "SLURM_JOB_NODELIST");
    if (nodes != nullptr) c.master_addr = FirstSlurmHost(*nodes);
    MasterFromEnv(env, &c);
    c.local_world_size = SlurmLocalTasks(env, c.world_size);
  } else if (flags.worker_replicas > 1 || flags.task != 0) {
    c.source = "flags";
    c.world_size = flags.worker_replicas;
    SLIM_CHECK(flags.task >= 0 && flags.task < flags.worker_replicas,
               "--task=", flags.task,
               " is not in [0, --worker_replicas=", flags.worker_replicas, ")");
    c.rank = flags.task;
    c.local_rank = 0;
    MasterFromEnv(env, &c);
    return c;
  } else {
    return c;
  }
  // From the environment: the flags, when set, must agree with it.
  SLIM_CHECK(
      flags.worker_replicas == 1 || flags.worker_replicas == c.world_size,
      "--worker_replicas=", flags.worker_replicas, " but the ", c.source,
      " job has ", c.world_size, " processes");
  SLIM_CHECK(flags.task == 0 || flags.task == c.rank, "--task=", flags.task,
             " but the ", c.source, " job gives this process rank ", c.rank);
  return c;
}

Env ProcessEnvironment() {
  Env env;
  for (const auto& [name, value] : EnvironmentMap()) env[name] = value;
  return env;
}

}  // namespace slimtorch
