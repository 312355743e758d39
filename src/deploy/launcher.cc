#include "slimtorch/deploy/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

constexpr int kMaxClones = 256;
constexpr const char* kCloneOf = "SLIMTORCH_CLONE_OF";

// The clones' pids, for the signal handler (lock-free atomics: safe there).
std::atomic<pid_t> g_clones[kMaxClones];
std::atomic<int> g_num_clones{0};
std::atomic<int> g_signals{0};

void ForwardSignal(int sig) {
  const int n = g_num_clones.load();
  for (int i = 0; i < n; ++i) {
    const pid_t pid = g_clones[i].load();
    if (pid > 0) ::kill(pid, sig);
  }
  if (g_signals.fetch_add(1) > 0) ::_exit(128 + sig);
}

// A TCP port free on the loopback interface now (the kernel's pick).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  SLIM_CHECK(fd >= 0, "cannot open a socket: ", std::strerror(errno));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok =
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  SLIM_CHECK(ok,
             "cannot find a free port on 127.0.0.1: ", std::strerror(errno));
  return ntohs(addr.sin_port);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

void ForwardSignals() {
  struct sigaction sa = {};
  sa.sa_handler = ForwardSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// Where the clones of all machines meet, and who started them.
struct CloneWorld {
  int num_clones;       // on this machine
  ClusterSpec machine;  // this machine among the machines
  std::string master;   // rendezvous address
  int port;             // and port
  std::string parent;   // the launcher's pid
};

// In the forked child: becomes clone `k` (the program again, `argv`).
[[noreturn]] void BecomeClone(int k, const CloneWorld& w, char** argv) {
  // The clone: its own process group (a terminal's Ctrl-C reaches the
  // launcher only, which passes it on once), SIGTERM when the launcher
  // dies (no orphan keeps training), torchrun's environment.
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (std::to_string(::getppid()) != w.parent) ::_exit(1);
  SetEnvironmentVariable("RANK",
                         std::to_string(w.machine.rank * w.num_clones + k));
  SetEnvironmentVariable("LOCAL_RANK", std::to_string(k));
  SetEnvironmentVariable("WORLD_SIZE",
                         std::to_string(w.machine.world_size * w.num_clones));
  SetEnvironmentVariable("MASTER_ADDR", w.master);
  SetEnvironmentVariable("MASTER_PORT", std::to_string(w.port));
  SetEnvironmentVariable(kCloneOf, w.parent);
  ::execv("/proc/self/exe", argv);
  ::_exit(127);
}

// Forks the clones; their pids, by clone index (also in g_clones).
std::vector<pid_t> StartClones(const CloneWorld& w, char** argv) {
  std::vector<pid_t> pids(w.num_clones, -1);
  for (int k = 0; k < w.num_clones; ++k) {
    const pid_t pid = ::fork();
    SLIM_CHECK(pid >= 0, "cannot start clone ", k, ": ", std::strerror(errno));
    if (pid == 0) BecomeClone(k, w, argv);
    pids[k] = pid;
    g_clones[k].store(pid);
    g_num_clones.store(k + 1);
  }
  return pids;
}

// Waits for all clones; the first failure stops the others (SIGTERM, then
// SIGKILL after `grace`).
class CloneWaiter {
 public:
  CloneWaiter(std::vector<pid_t> pids, std::chrono::seconds grace)
      : pids_(std::move(pids)), grace_(grace), left_(pids_.size()) {}

  // "" when every clone succeeded, else what to report: the clone killed
  // by a signal the launcher did not send, if any (the others then fail in
  // their all-reduce), else the first that failed.
  std::string Wait() {
    while (left_ > 0) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        Reap(pid, status);
        continue;
      }
      if (std::chrono::steady_clock::now() > kill_deadline_) {
        for (pid_t other : pids_) {
          if (other > 0) ::kill(other, SIGKILL);
        }
        kill_deadline_ = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return killed_.empty() ? first_failure_ : killed_;
  }

 private:
  void Reap(pid_t pid, int status) {
    const int num_clones = static_cast<int>(pids_.size());
    int k = 0;
    while (k < num_clones && pids_[k] != pid) ++k;
    if (k == num_clones) return;
    --left_;
    pids_[k] = -1;
    g_clones[k].store(-1);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    const std::string what =
        StrCat("clone ", k, " (pid ", pid, ") ", Describe(status));
    if (first_failure_.empty()) first_failure_ = what;
    if (killed_.empty() && WIFSIGNALED(status) && !stopping_) killed_ = what;
    if (!stopping_) {
      stopping_ = true;
      for (pid_t other : pids_) {
        if (other > 0) ::kill(other, SIGTERM);
      }
      kill_deadline_ = std::chrono::steady_clock::now() + grace_;
    }
  }

  std::vector<pid_t> pids_;  // -1 once reaped
  const std::chrono::seconds grace_;
  size_t left_;
  std::string first_failure_;
  std::string killed_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point kill_deadline_ =
      std::chrono::steady_clock::time_point::max();
};

}  // namespace

bool IsLaunchedClone() { return SlimtorchVariable(kCloneOf) != nullptr; }

int RunClones(int num_clones, char** argv, std::chrono::seconds grace,
              const ClusterSpec& machine) {
  SLIM_CHECK(num_clones >= 2 && num_clones <= kMaxClones,
             "--num_clones must be in [1, ", kMaxClones, "], got ", num_clones);
  const bool alone = machine.world_size == 1;
  CloneWorld world{
      num_clones, machine, alone ? "127.0.0.1" : machine.master_addr,
      alone ? FreePort() : machine.master_port, std::to_string(::getpid())};
  ForwardSignals();
  const std::string failure =
      CloneWaiter(StartClones(world, argv), grace).Wait();
  g_num_clones.store(0);
  SLIM_CHECK(failure.empty(), failure,
             "; the other clones were stopped (the latest checkpoint is the "
             "last one clone 0 completed)");
  return 0;
}

}  // namespace slimtorch
