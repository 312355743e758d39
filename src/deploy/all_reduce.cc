#include "slimtorch/deploy/all_reduce.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"

#ifdef SLIMTORCH_WITH_C10D
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "agent_store.h"
#endif
#ifdef SLIMTORCH_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef SLIMTORCH_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace slimtorch {

#ifdef SLIMTORCH_WITH_C10D

// c10d::ProcessGroup::Work in LibTorch 1.x, c10d::Work in 2.x.
#ifdef SLIMTORCH_WITH_GLOO
using AnyGroup = c10d::ProcessGroupGloo;
#else
using AnyGroup = c10d::ProcessGroupNCCL;
#endif
using WorkPtr = decltype(std::declval<AnyGroup&>().allreduce(
    std::declval<std::vector<at::Tensor>&>()));

// Who the processes of a group are (the "host address, pid" each gave when
// it joined the round), and whether they are still there: while the group
// lives a thread adds 1 to beat/<rank> in the round's store every
// kBeatInterval. When a collective fails, the processes whose beat stopped
// are the ones lost.
class ReplicaWatch {
 public:
  static constexpr std::chrono::milliseconds kBeatInterval{500};

  // `store`: a client of its own (the thread shares it with nobody but
  // Diagnose), keys under the round's prefix. `served_by`: who serves the
  // store ("replica 0", "torchrun's agent"), for the message when it no
  // longer answers; `where`: its address.
  ReplicaWatch(c10::intrusive_ptr<c10d::Store> store, int rank,
               std::vector<std::string> who, std::string served_by,
               std::string where)
      : store_(std::move(store)),
        rank_(rank),
        who_(std::move(who)),
        served_by_(std::move(served_by)),
        where_(std::move(where)) {
    thread_ = std::thread([this] { Beat(); });
  }
  ~ReplicaWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  const std::string& Who(int rank) const { return who_[rank]; }

  // Which replicas are gone, in words: those whose beat does not move over
  // three intervals, or that the store itself no longer answers. Returns
  // within about 2 s plus the store's own time-out.
  std::string Diagnose() {
    std::vector<int64_t> before, after;
    std::string failed;
    if (!ReadBeats(&before, &failed)) return failed;
    std::this_thread::sleep_for(3 * kBeatInterval +
                                std::chrono::milliseconds(100));
    if (!ReadBeats(&after, &failed)) return failed;
    std::vector<int> lost;
    for (size_t r = 0; r < who_.size(); ++r) {
      if (static_cast<int>(r) != rank_ && after[r] == before[r]) {
        lost.push_back(static_cast<int>(r));
      }
    }
    if (lost.empty()) {
      return "every replica still beats in the store: a network fault "
             "between hosts, or a replica stuck (not dead) past the time-out";
    }
    std::ostringstream out;
    for (size_t i = 0; i < lost.size(); ++i) {
      out << (i == 0 ? "" : ", ") << "replica " << lost[i] << " ("
          << who_[lost[i]] << ")";
    }
    out << (lost.size() == 1 ? " is" : " are")
        << " gone (no heartbeat in the store for "
        << (3 * kBeatInterval).count() / 1000.0 << " s)";
    return out.str();
  }

 private:
  std::string Key(size_t r) const { return "beat/" + std::to_string(r); }

  bool ReadBeats(std::vector<int64_t>* beats, std::string* failed) {
    std::lock_guard<std::mutex> lock(store_mu_);
    try {
      for (size_t r = 0; r < who_.size(); ++r) {
        beats->push_back(store_->add(Key(r), 0));
      }
      return true;
    } catch (const std::exception&) {
      *failed = StrCat("the rendezvous store at ", where_, ", served by ",
                       served_by_, ", no longer answers: ", served_by_,
                       " is most likely the one gone");
      return false;
    }
  }

  void Beat() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      {
        std::lock_guard<std::mutex> store_lock(store_mu_);
        try {
          store_->add(Key(rank_), 1);
        } catch (const std::exception&) {
          return;  // the store is gone (the job ends, or its host died)
        }
      }
      lock.lock();
      cv_.wait_for(lock, kBeatInterval, [this] { return stop_; });
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const std::vector<std::string> who_;
  const std::string served_by_;
  const std::string where_;
  std::mutex store_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  // The backend's collectives (Gloo or NCCL, whose common base class
  // differs between LibTorch versions); they hold the group.
  std::function<WorkPtr(std::vector<at::Tensor>&)> allreduce;
  std::function<WorkPtr()> barrier;
  const char* backend = "Gloo";
  int rank = 0;
  int world_size = 1;
  // None without a store to watch; shared with a diagnosis that may
  // outlive the wait for it.
  std::shared_ptr<ReplicaWatch> watch;

  // The error of a failed collective: which process saw it, c10d's own
  // words, which replicas are gone and what to do.
  [[noreturn]] void Fail(const char* what, const std::exception& e);
};

#ifdef SLIMTORCH_WITH_GLOO
bool HaveProcessGroups() { return true; }
#else
bool HaveProcessGroups() { return false; }
#endif

#ifdef SLIMTORCH_WITH_NCCL
bool HaveNccl() { return true; }
#else
bool HaveNccl() { return false; }
#endif

namespace {

// First line of a c10d / Gloo error (they append C++ backtraces).
std::string FirstLine(const std::exception& e) {
  std::string what = e.what();
  const size_t nl = what.find('\n');
  return nl == std::string::npos ? what : what.substr(0, nl);
}

// "3.0": seconds since `start`, to a tenth.
std::string SecondsSince(std::chrono::steady_clock::time_point start) {
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", s);
  return text;
}

// c10d's message without its trailing periods (ours follow it).
std::string Sentence(const std::exception& e) {
  std::string what = FirstLine(e);
  while (!what.empty() && (what.back() == '.' || what.back() == ' ')) {
    what.pop_back();
  }
  return what;
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

// The local address of this host's route towards host:port (a UDP socket
// connected there; nothing is sent), or "" when there is none.
std::string LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                    &found) != 0) {
    return "";
  }
  std::string address;
  for (addrinfo* a = found; a != nullptr && address.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local = {};
    socklen_t len = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {};
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::getnameinfo(reinterpret_cast<sockaddr*>(&local), len, text,
                      sizeof(text), nullptr, 0, NI_NUMERICHOST) == 0) {
      address = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return address;
}

// What a failure to serve or reach the store most likely means.
std::string LikelyCause(const std::string& error, const std::string& where,
                        const std::string& served_by) {
  if (error.find("ddress already in use") != std::string::npos ||
      error.find("errno: 98") != std::string::npos) {
    return StrCat(
        where,
        " is taken: another job, or a process of an earlier run still alive, "
        "uses it, or a launcher serves its own store there (torchrun says so "
        "with TORCHELASTIC_USE_AGENT_STORE=True, which this process was not "
        "given); choose another MASTER_PORT or stop the other job");
  }
  if (error.find("refused") != std::string::npos ||
      error.find("timed out") != std::string::npos ||
      error.find("connect") != std::string::npos) {
    return StrCat("nothing served the store at ", where, ": ", served_by,
                  " was not started, has died, or listens elsewhere (every "
                  "process needs the same MASTER_ADDR and MASTER_PORT)");
  }
  return "is every process started, with the same MASTER_ADDR and "
         "MASTER_PORT?";
}

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// "1, 3" of a list of ranks.
std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::string Text(const std::vector<uint8_t>& v) {
  return std::string(v.begin(), v.end());
}

// A random 64-bit number in hex: names a join, unlike anything an earlier
// process wrote.
std::string Nonce() {
  uint64_t n = 0;
  if (::getrandom(&n, sizeof(n), 0) != static_cast<ssize_t>(sizeof(n))) {
    n = 0;
  }
  n ^= (uint64_t(::getpid()) << 20) ^
       uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(n));
  return text;
}

// The round that the processes of one start of a job meet in, and what
// each said of itself.
struct Round {
  std::string prefix;            // "round/<id>/": the round's own keys
  std::vector<std::string> who;  // by rank
};

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPoll(20);

// What JoinRound's steps share: the store, this process, the deadline.
struct Joining {
  c10d::Store& job;
  int rank;
  int world_size;
  std::string self;
  Clock::time_point start;
  std::chrono::milliseconds timeout;
  bool Late() const { return Clock::now() - start > timeout; }
};

// Replica 0: opens a round, waits for every rank's acknowledgement, then
// publishes who is who and the go. The ranks that never acknowledged, when
// the time-out came first, go to `missing`.
Round LeadRound(const Joining& j, std::vector<int>* missing) {
  Round round;
  round.who.assign(j.world_size, "");
  round.who[0] = j.self;
  const std::string id = Nonce();
  round.prefix = "round/" + id + "/";
  j.job.set("round", Bytes(id));
  std::vector<std::string> acks;
  for (int r = 1; r < j.world_size; ++r) {
    acks.push_back(StrCat(round.prefix, "ack/", r));
  }
  while (!acks.empty() && !j.job.check(acks)) {
    if (j.Late()) {
      for (int r = 1; r < j.world_size; ++r) {
        if (!j.job.check({acks[r - 1]})) missing->push_back(r);
      }
      if (!missing->empty()) return round;
    }
    std::this_thread::sleep_for(kPoll);
  }
  std::string nonces;
  for (int r = 1; r < j.world_size; ++r) {
    const std::string ack = Text(j.job.get(acks[r - 1]));
    const size_t space = ack.find(' ');
    nonces += ack.substr(0, space) + "\n";
    round.who[r] = space == std::string::npos ? "?" : ack.substr(space + 1);
  }
  for (int r = 0; r < j.world_size; ++r) {
    j.job.set(StrCat(round.prefix, "who/", r), Bytes(round.who[r]));
  }
  j.job.set(round.prefix + "go", Bytes(nonces));
  return round;
}

// Whether round `prefix`'s go names `nonce` (the live round), within a
// second: 1 yes, 0 no go yet, -1 a go without it (a round of processes
// gone).
int AwaitGo(const Joining& j, const std::string& prefix,
            const std::string& nonce) {
  const auto asked = Clock::now();
  while (!j.Late() && Clock::now() - asked < std::chrono::seconds(1)) {
    if (j.job.check({prefix + "go"})) {
      const std::string go = Text(j.job.get(prefix + "go"));
      return go.find(nonce + "\n") != std::string::npos ? 1 : -1;
    }
    std::this_thread::sleep_for(kPoll);
  }
  return 0;
}

// Any other replica: acknowledges the round it finds under "round" until
// one's go names its nonce; then reads who is who. Replica 0, when the
// time-out came first, goes to `missing`.
Round JoinAsMember(const Joining& j, std::vector<int>* missing) {
  Round round;
  const std::string nonce = Nonce();
  std::string seen;  // the round acknowledged last
  while (round.prefix.empty()) {
    if (j.Late()) {
      missing->push_back(0);
      return round;
    }
    if (!j.job.check({"round"})) {
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    const std::string id = Text(j.job.get("round"));
    const std::string prefix = "round/" + id + "/";
    if (id != seen) {
      j.job.set(StrCat(prefix, "ack/", j.rank), Bytes(nonce + " " + j.self));
      seen = id;
    }
    const int go = AwaitGo(j, prefix, nonce);
    if (go == 1) round.prefix = prefix;
    // A stale round: wait until "round" changes (or the time-out).
    while (go == -1 && !j.Late() && Text(j.job.get("round")) == id) {
      std::this_thread::sleep_for(kPoll);
    }
  }
  for (int r = 0; r < j.world_size; ++r) {
    round.who.push_back(Text(j.job.get(StrCat(round.prefix, "who/", r))));
  }
  return round;
}

// Meets the job's other processes in a round of their own. A store may
// outlive a start of the job (torchrun 2.x's agent keeps one across
// restarts, whose restart counts differ between nodes), so the keys of
// processes long dead may still be there; a round keeps them apart:
// replica 0 opens round R (a fresh random id) under "round", every other
// replica acknowledges the round it finds there with a nonce of its own
// and its description, and replica 0, once every rank has acknowledged R,
// sets round/R/go to the nonces it saw. A replica whose nonce is not in
// its round's go (or that finds none within a second) read a stale round
// and looks again. Throws naming the ranks that never came, or the store
// that stopped answering, and the seconds waited.
Round JoinRound(c10d::Store& job, int rank, int world_size,
                const std::string& self, Clock::time_point start,
                std::chrono::milliseconds timeout, const std::string& me,
                const std::string& where, const std::string& served_by) {
  const Joining j{job, rank, world_size, self, start, timeout};
  std::vector<int> missing;
  Round round;
  try {
    round = rank == 0 ? LeadRound(j, &missing) : JoinAsMember(j, &missing);
  } catch (const std::exception& e) {
    SLIM_FAIL(me, ": the rendezvous store at ", where, " (served by ",
              served_by, ") stopped answering after ", SecondsSince(start),
              " s, before every replica had joined: ", FirstLine(e), "; ",
              served_by, " most likely died");
  }
  SLIM_CHECK(
      missing.empty(), me, ": waited ", SecondsSince(start),
      " s at the rendezvous ", where, " for replica",
      missing.size() == 1 ? " " : "s ", RankList(missing), " of ", world_size,
      ", which never joined: ", missing.size() == 1 ? "is it" : "are they",
      " started, with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE? "
      "(--collective_timeout_secs sets how long to wait)");
  return round;
}

template <typename Group>
void SetCollectives(ProcessGroup::Impl* impl, c10::intrusive_ptr<Group> g) {
  impl->allreduce = [g](std::vector<at::Tensor>& t) { return g->allreduce(t); };
  impl->barrier = [g] { return g->barrier(); };
}

// A Gloo group (CPU tensors), or on a CUDA device an NCCL group.
std::shared_ptr<ProcessGroup::Impl> MakeGroup(
    c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
    const std::string& host, std::chrono::milliseconds timeout,
    torch::Device device) {
  // A peer that goes away mid-collective must surface as an error naming
  // the all-reduce, not as SIGPIPE killing this process on the next write.
  ::signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_shared<ProcessGroup::Impl>();
  impl->store = std::move(store);
  impl->rank = rank;
  impl->world_size = world_size;
  try {
    if (device.is_cuda()) {
#ifdef SLIMTORCH_WITH_NCCL
      impl->backend = "NCCL";
      c10::cuda::set_device(device.has_index() ? device.index() : 0);
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      SetCollectives(impl.get(), c10::make_intrusive<c10d::ProcessGroupNCCL>(
                                     impl->store, rank, world_size, options));
#else
      SLIM_FAIL("process ", rank, " of ", world_size, " trains on ", device,
                " but this slimtorch was built without NCCL (a LibTorch "
                "without CUDA distributed support): add --clone_on_cpu to "
                "train the replicas on CPUs over Gloo");
#endif
    } else {
#ifdef SLIMTORCH_WITH_GLOO
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      const std::string kInterface = "interface:";
      options->devices.push_back(
          host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
          : host.rfind(kInterface, 0) == 0
              ? c10d::ProcessGroupGloo::createDeviceForInterface(
                    host.substr(kInterface.size()))
              : c10d::ProcessGroupGloo::createDeviceForHostname(host));
      options->threads = 2;
      SetCollectives(impl.get(), c10::make_intrusive<c10d::ProcessGroupGloo>(
                                     impl->store, rank, world_size, options));
#else
      (void)host;
      SLIM_FAIL("process ", rank, " of ", world_size,
                " trains on the CPU but this slimtorch was built without "
                "c10d's Gloo process group (no gloo headers; libgloo-dev)");
#endif
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    SLIM_FAIL("replica ", rank, " of ", world_size, " could not join the ",
              impl->backend, " process group",
              host.empty() ? "" : " on " + host, ": ", FirstLine(e));
  }
  return impl;
}

// A client of the job's store (or, for replica 0 without torchrun's agent,
// its server): LibTorch's TCPStore, or torchrun's agent store in its own
// PyTorch's protocol (`protocol`, found on the first call when unset).
// 2.x's torchrun says TORCH_NCCL_ASYNC_ERROR_HANDLING where 1.x's says
// NCCL_ASYNC_ERROR_HANDLING: a hint of which to probe first.
c10::intrusive_ptr<c10d::Store> OpenStore(
    const ClusterSpec& c, bool serve, std::chrono::milliseconds wait,
    std::optional<AgentStore::Protocol>* protocol) {
  if (c.agent_store) {
    if (!protocol->has_value()) {
      *protocol = AgentStore::Detect(
          c.master_addr, c.master_port,
          EnvironmentVariable("TORCH_NCCL_ASYNC_ERROR_HANDLING") != nullptr
              ? AgentStore::Protocol::kTorch2
              : AgentStore::Protocol::kTorch1,
          wait);
    }
    return c10::make_intrusive<AgentStore>(c.master_addr, c.master_port,
                                           **protocol, wait);
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(c.master_port);
  opts.isServer = serve;
  opts.waitWorkers = false;  // JoinRound waits, naming who is missing
  opts.timeout = wait;
  return c10::make_intrusive<c10d::TCPStore>(c.master_addr, opts);
}

// Gloo's interface: GLOO_SOCKET_IFNAME as PyTorch reads it, else the one
// this host reaches the store by (hosts of one name, such as network
// namespaces of one machine, still get their own address).
std::string GlooHost(const std::string& address) {
  if (const char* ifname = EnvironmentVariable("GLOO_SOCKET_IFNAME")) {
    return StrCat("interface:", ifname);
  }
  return address;
}

}  // namespace

ProcessGroup ProcessGroup::Connect(const ClusterSpec& c,
                                   std::chrono::milliseconds timeout,
                                   torch::Device device) {
  const auto start = std::chrono::steady_clock::now();
  // Under torchrun's agent store every process is a client; else replica 0
  // serves the store.
  const bool serve = !c.agent_store && c.rank == 0;
  const std::string where = StrCat(c.master_addr, ":", c.master_port);
  const std::string served_by =
      c.agent_store ? "torchrun's agent on the first node" : "replica 0";
  const std::string address = LocalAddressTowards(c.master_addr, c.master_port);
  const std::string self =
      StrCat("host ", HostName(), address.empty() ? "" : " " + address,
             ", pid ", ::getpid());
  const std::string me =
      StrCat("replica ", c.rank, " of ", c.world_size, " (", self, ")");
  std::optional<AgentStore::Protocol> protocol;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = OpenStore(c, serve, timeout, &protocol);
  } catch (const std::exception& e) {
    const std::string error = Sentence(e);
    SLIM_FAIL(me, ": ", serve ? "could not serve" : "could not reach",
              " the rendezvous store at ", where, " (", SecondsSince(start),
              " s): ", error,
              ". Likely cause: ", LikelyCause(error, where, served_by));
  }
  // Under the agent's store the job's keys live beside torchrun's own; a
  // round of its own keeps each start of the job apart (JoinRound).
  const std::string prefix = "slimtorch";
  auto job = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  Round round = JoinRound(*job, c.rank, c.world_size, self, start, timeout, me,
                          where, served_by);
  ProcessGroup group(MakeGroup(
      c10::make_intrusive<c10d::PrefixStore>(round.prefix + "group", job),
      c.rank, c.world_size, GlooHost(address), timeout, device));
  // The watch's own client, with a short time-out: a diagnosis must not
  // wait as long as a collective does.
  try {
    group.impl_->watch = std::make_shared<ReplicaWatch>(
        c10::make_intrusive<c10d::PrefixStore>(
            prefix + "/" + round.prefix + "watch",
            OpenStore(c, false, std::chrono::milliseconds(5000), &protocol)),
        c.rank, std::move(round.who), served_by, where);
  } catch (const std::exception& e) {
    SLIM_FAIL(me, ": could not reach the rendezvous store at ", where,
              " again after joining: ", FirstLine(e));
  }
  return group;
}

ProcessGroup ProcessGroup::ConnectFile(const std::string& path, int rank,
                                       int world_size,
                                       std::chrono::milliseconds timeout,
                                       torch::Device device) {
  const auto start = std::chrono::steady_clock::now();
  auto store = c10::make_intrusive<c10d::FileStore>(path, world_size);
  store->setTimeout(timeout);
  const std::string self = StrCat("thread of pid ", ::getpid());
  const std::string me =
      StrCat("replica ", rank, " of ", world_size, " (", self, ")");
  Round round = JoinRound(*store, rank, world_size, self, start, timeout, me,
                          path, "the file system");
  ProcessGroup group(MakeGroup(
      c10::make_intrusive<c10d::PrefixStore>(round.prefix + "group", store),
      rank, world_size, "127.0.0.1", timeout, device));
  group.impl_->watch = std::make_shared<ReplicaWatch>(
      c10::make_intrusive<c10d::PrefixStore>(
          round.prefix + "watch",
          c10::make_intrusive<c10d::FileStore>(path, world_size)),
      rank, std::move(round.who), "the file system", path);
  return group;
}

namespace {

// The watch's diagnosis, or after `limit` a sentence saying it did not
// come (a store whose host vanished can leave a read waiting): the
// diagnosis runs on a thread of its own, left to end by itself.
std::string DiagnoseWithin(const std::shared_ptr<ReplicaWatch>& watch,
                           std::chrono::seconds limit) {
  struct Answer {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::string text;
  };
  auto answer = std::make_shared<Answer>();
  std::thread([watch, answer] {
    std::string text = watch->Diagnose();
    std::lock_guard<std::mutex> lock(answer->mu);
    answer->text = std::move(text);
    answer->done = true;
    answer->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(answer->mu);
  if (!answer->cv.wait_for(lock, limit, [&] { return answer->done; })) {
    return StrCat("the rendezvous store did not answer within ", limit.count(),
                  " s, so which replica is gone is not known");
  }
  return answer->text;
}

}  // namespace

void ProcessGroup::Impl::Fail(const char* what, const std::exception& e) {
  const std::string lost =
      watch ? DiagnoseWithin(watch, std::chrono::seconds(8)) : "";
  SLIM_FAIL(backend, " ", what, " across ", world_size,
            " processes failed on replica ", rank,
            watch ? " (" + watch->Who(rank) + ")" : "", ": ",
            lost.empty() ? "a process stopped or the network failed" : lost,
            " [c10d: ", FirstLine(e), "]");
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::world_size() const { return impl_->world_size; }

void ProcessGroup::AllReduceSum(std::vector<torch::Tensor>& tensors) {
  try {
    impl_->allreduce(tensors)->wait();
  } catch (const std::exception& e) {
    impl_->Fail("all-reduce", e);
  }
}

struct ProcessGroup::Pending::Work {
  WorkPtr work;
  std::vector<torch::Tensor> tensors;  // kept alive while in flight
};

ProcessGroup::Pending ProcessGroup::StartAllReduceSum(
    std::vector<torch::Tensor> tensors) {
  Pending pending;
  pending.group_ = impl_;
  pending.work_ = std::make_shared<Pending::Work>();
  pending.work_->tensors = std::move(tensors);
  try {
    pending.work_->work = impl_->allreduce(pending.work_->tensors);
  } catch (const std::exception& e) {
    impl_->Fail("all-reduce", e);
  }
  return pending;
}

void ProcessGroup::Pending::Wait() {
  if (!work_) return;
  auto work = std::move(work_);
  try {
    work->work->wait();
  } catch (const std::exception& e) {
    group_->Fail("all-reduce", e);
  }
}

void ProcessGroup::Barrier() {
  try {
    impl_->barrier()->wait();
  } catch (const std::exception& e) {
    impl_->Fail("barrier", e);
  }
}

#else  // !SLIMTORCH_WITH_C10D

struct ProcessGroup::Impl {};

bool HaveProcessGroups() { return false; }

namespace {
[[noreturn]] void NoC10d() {
  SLIM_FAIL(
      "this slimtorch was built without c10d's Gloo process group (LibTorch "
      "without distributed support, or no gloo headers): multi-process "
      "training is not available");
}
}  // namespace

bool HaveNccl() { return false; }

ProcessGroup ProcessGroup::Connect(const ClusterSpec&,
                                   std::chrono::milliseconds, torch::Device) {
  NoC10d();
}
ProcessGroup ProcessGroup::ConnectFile(const std::string&, int, int,
                                       std::chrono::milliseconds,
                                       torch::Device) {
  NoC10d();
}
int ProcessGroup::rank() const { return 0; }
int ProcessGroup::world_size() const { return 1; }
void ProcessGroup::AllReduceSum(std::vector<torch::Tensor>&) { NoC10d(); }
struct ProcessGroup::Pending::Work {};
ProcessGroup::Pending ProcessGroup::StartAllReduceSum(
    std::vector<torch::Tensor>) {
  NoC10d();
}
void ProcessGroup::Pending::Wait() {}
void ProcessGroup::Barrier() { NoC10d(); }

#endif  // SLIMTORCH_WITH_C10D

ProcessGroup::ProcessGroup(std::shared_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

// Marks its variable's gradient ready once the accumulator has stored it.
struct AllReduceGradients::GradHook : torch::autograd::FunctionPostHook {
  GradHook(AllReduceGradients* owner, size_t var) : owner(owner), var(var) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    owner->GradReady(var);
    return outputs;
  }
  AllReduceGradients* owner;
  size_t var;
};

AllReduceGradients::AllReduceGradients(ProcessGroup group, int64_t bucket_bytes,
                                       int64_t first_bucket_bytes)
    : group_(std::move(group)),
      bucket_bytes_(bucket_bytes),
      first_bucket_bytes_(first_bucket_bytes) {
  SLIM_CHECK(bucket_bytes_ > 0 && first_bucket_bytes_ > 0,
             "bucket sizes must be positive");
}

AllReduceGradients::~AllReduceGradients() {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
  // A bucket in flight must not outlive its buffers' users.
  for (auto& b : buckets_) {
    try {
      b.pending.Wait();
    } catch (const Error&) {
    }
  }
}

bool AllReduceGradients::AgreeOnStop(bool local) {
  stop_seen_ = stop_seen_ || local;
  if (exchanged_) return stop_agreed_;
  std::vector<torch::Tensor> flag = {torch::full(
      {1}, local ? 1.0f : 0.0f, torch::dtype(torch::kFloat).device(device_))};
  group_.AllReduceSum(flag);
  return flag[0].item<float>() > 0;
}

void AllReduceGradients::Plan(const NamedTensors& trainable) {
  vars_ = trainable;
  // Where the small collectives go too (NCCL takes only CUDA tensors).
  device_ = vars_.empty() ? torch::Device(torch::kCPU)
                          : vars_.front().tensor.device();
  buckets_.clear();
  bucket_of_.assign(vars_.size(), 0);
  ready_.assign(vars_.size(), 0);
  // Last variable first; a new bucket at a dtype change or when full (the
  // first bucket at first_bucket_bytes).
  int64_t bytes = 0;
  for (size_t k = vars_.size(); k-- > 0;) {
    const torch::Tensor& v = vars_[k].tensor;
    const auto n = static_cast<int64_t>(v.nbytes());
    if (buckets_.empty() ||
        vars_[buckets_.back().vars.front()].tensor.scalar_type() !=
            v.scalar_type() ||
        bytes + n >
            (buckets_.size() == 1 ? first_bucket_bytes_ : bucket_bytes_)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().vars.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += n;
  }
  for (auto& b : buckets_) {
    int64_t numel = 0;
    for (size_t k : b.vars) numel += vars_[k].tensor.numel();
    b.flat = torch::empty(
        {numel}, vars_[b.vars.front()].tensor.options().requires_grad(false));
  }
  ResetStep();
}
void AllReduceGradients::Attach(const NamedTensors& trainable) {
  SLIM_CHECK(accumulators_.empty(), "gradient exchange attached twice");
  Plan(trainable);
  for (size_t k = 0; k < vars_.size(); ++k) {
    const torch::Tensor& v = vars_[k].tensor;
    SLIM_CHECK(v.is_leaf() && v.requires_grad(), "variable ", vars_[k].name,
               " is not a trainable leaf");
    NodePtr acc = torch::autograd::impl::grad_accumulator(v);
    hook_keys_.push_back(
        acc->add_post_hook(std::make_unique<GradHook>(this, k)));
    accumulators_.push_back(std::move(acc));
  }
}

void AllReduceGradients::ResetStep() {
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& b : buckets_) {
    b.waiting = static_cast<int>(b.vars.size());
    b.started = false;
  }
  next_bucket_ = 0;
  in_backward_ = true;
  overlapped_now_ = 0;
}

void AllReduceGradients::GradReady(size_t var) {
  // Backward outside a training step (none in slimtorch) leaves the
  // exchange alone.
  if (!in_backward_ || accumulate_only_ || ready_[var]) return;
  ready_[var] = 1;
  --buckets_[bucket_of_[var]].waiting;
  StartReadyBuckets();
}

void AllReduceGradients::StartReadyBuckets() {
  while (next_bucket_ < buckets_.size() &&
         buckets_[next_bucket_].waiting == 0) {
    StartBucket(buckets_[next_bucket_]);
    if (in_backward_) ++overlapped_now_;
    ++next_bucket_;
  }
}

void AllReduceGradients::StartBucket(Bucket& b) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t k : b.vars) {
    const torch::Tensor g = vars_[k].tensor.grad();
    SLIM_CHECK(g.defined(), "variable ", vars_[k].name,
               " has no gradient to exchange");
    const int64_t n = g.numel();
    b.flat.narrow(0, offset, n).view(g.sizes()).copy_(g);
    offset += n;
  }
  b.pending = group_.StartAllReduceSum({b.flat});
  b.started = true;
}

void AllReduceGradients::Exchange(const NamedTensors& trainable) {
  torch::NoGradGuard no_grad;
  bool same = trainable.size() == vars_.size();
  for (size_t k = 0; same && k < vars_.size(); ++k) {
    same = trainable[k].tensor.is_same(vars_[k].tensor);
  }
  if (!same) {
    SLIM_CHECK(accumulators_.empty(),
               "Exchange got other variables than those attached");
    Plan(trainable);
  }
  // Backward is over: what it did not reach goes now, in order.
  in_backward_ = false;
  for (auto& b : buckets_) b.waiting = 0;
  StartReadyBuckets();
  // The replicas' losses, each in its slot, and the stop requests.
  const int world_size = group_.world_size();
  torch::Tensor meta = torch::zeros({world_size + 1}, torch::kDouble);
  meta[world_size] = stop_seen_ ? 1.0 : 0.0;
  meta = meta.to(device_);
  if (loss_.defined()) {
    meta.narrow(0, group_.rank(), 1).copy_(loss_.reshape({1}));
  }
  ProcessGroup::Pending meta_pending = group_.StartAllReduceSum({meta});
  const double world = world_size;
  for (auto& b : buckets_) {
    b.pending.Wait();
    b.flat.div_(world);
    int64_t offset = 0;
    for (size_t k : b.vars) {
      torch::Tensor g = vars_[k].tensor.grad();
      const int64_t n = g.numel();
      g.copy_(b.flat.narrow(0, offset, n).view(g.sizes()));
      offset += n;
    }
  }
  meta_pending.Wait();
  meta = meta.cpu();
  losses_.assign(meta.data_ptr<double>(), meta.data_ptr<double>() + world_size);
  stop_agreed_ = meta[world_size].item<double>() > 0;
  exchanged_ = true;
  overlapped_ = overlapped_now_;
  ResetStep();
}

}  // namespace slimtorch
