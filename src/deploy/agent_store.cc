#include "agent_store.h"

#ifdef SLIMTORCH_WITH_C10D
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint8_t kSet = 0, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5,
                  kGetNumKeys = 6, kDeleteKey = 8;  // 1.x's numbers
constexpr uint8_t kValidate2 = 0;                   // 2.x only
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr const char* kKeyPrefix = "/";

milliseconds Left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                       deadline - Clock::now()));
}

// A TCP connection to host:port, retried until `deadline`; -1 when none.
int ConnectBy(const std::string& host, int port, Clock::time_point deadline,
              std::string* error) {
  do {
    addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(),
                                 &hints, &found);
    if (rc != 0) {
      *error = StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc));
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        ::freeaddrinfo(found);
        return fd;
      }
      *error = std::strerror(errno);
      ::close(fd);
    }
    if (found != nullptr) ::freeaddrinfo(found);
    std::this_thread::sleep_for(milliseconds(100));
  } while (Clock::now() < deadline);
  return -1;
}

void SendAll(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    SLIM_CHECK(n > 0, "torchrun's store: send failed: ", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

// Reads n bytes before `deadline`; false on time-out, throws on a closed
// or failed connection.
bool ReceiveBy(int fd, uint8_t* out, size_t n, Clock::time_point deadline) {
  size_t done = 0;
  while (done < n) {
    pollfd p = {fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(Left(deadline).count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return false;
    SLIM_CHECK(ready > 0,
               "torchrun's store: poll failed: ", std::strerror(errno));
    const ssize_t got = ::recv(fd, out + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    SLIM_CHECK(got > 0, "torchrun's store closed the connection",
               got < 0 ? StrCat(" (", std::strerror(errno), ")") : "");
    done += static_cast<size_t>(got);
  }
  return true;
}

template <typename T>
void Append(std::vector<uint8_t>* out, T value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out->insert(out->end(), p, p + sizeof(T));
}

void AppendBytes(std::vector<uint8_t>* out, const std::string& s) {
  Append<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

void AppendKeys(std::vector<uint8_t>* out,
                const std::vector<std::string>& keys) {
  Append<uint64_t>(out, keys.size());
  for (const auto& k : keys) AppendBytes(out, kKeyPrefix + k);
}

// Whether the server answers `probe` with 8 bytes within `wait`, on a
// connection of its own (closed after, whatever the server made of it).
bool Answers(const std::string& host, int port,
             const std::vector<uint8_t>& probe, milliseconds wait,
             Clock::time_point connect_deadline, std::string* error) {
  const int fd = ConnectBy(host, port, connect_deadline, error);
  if (fd < 0) return false;
  bool answered = false;
  try {
    SendAll(fd, probe);
    uint8_t reply[8];
    answered = ReceiveBy(fd, reply, sizeof(reply), Clock::now() + wait);
  } catch (const Error& e) {
    *error = e.what();
  }
  ::close(fd);
  return answered;
}

}  // namespace

AgentStore::Protocol AgentStore::Detect(const std::string& host, int port,
                                        Protocol likely, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<uint8_t> probe1 = {kGetNumKeys};
  std::vector<uint8_t> probe2 = {kValidate2};
  Append<uint32_t>(&probe2, kValidationMagic);
  probe2.push_back(kGetNumKeys + 1);
  std::string error = "no answer";
  // A server answers its own probe in milliseconds; the other one's gets
  // no answer, so each waits a few seconds at most.
  const milliseconds wait(3000);
  for (int round = 0; round < 2; ++round) {
    const bool first = round == 0;
    const Protocol p = first == (likely == Protocol::kTorch1)
                           ? Protocol::kTorch1
                           : Protocol::kTorch2;
    if (Answers(host, port, p == Protocol::kTorch1 ? probe1 : probe2, wait,
                deadline, &error)) {
      return p;
    }
  }
  SLIM_FAIL("torchrun's store at ", host, ":", port,
            " answers neither PyTorch 1.x's nor 2.x's store protocol (", error,
            "): is MASTER_PORT torchrun's, and is it still running?");
}

AgentStore::AgentStore(std::string host, int port, Protocol protocol,
                       milliseconds timeout)
    : c10d::Store(timeout),
      host_(std::move(host)),
      port_(port),
      protocol_(protocol) {
  std::string error = "no answer";
  fd_ = ConnectBy(host_, port_, Clock::now() + timeout, &error);
  SLIM_CHECK(fd_ >= 0, "cannot connect to torchrun's store at ", host_, ":",
             port_, " within ", timeout.count(), " ms: ", error);
  if (protocol_ == Protocol::kTorch2) {
    std::vector<uint8_t> validate = {kValidate2};
    Append<uint32_t>(&validate, kValidationMagic);
    Send(validate);
  }
}

AgentStore::~AgentStore() {
  if (fd_ >= 0) ::close(fd_);
}

uint8_t AgentStore::Code(uint8_t torch1) const {
  return protocol_ == Protocol::kTorch2 && torch1 != kDeleteKey ? torch1 + 1
                                                                : torch1;
}

void AgentStore::Send(const std::vector<uint8_t>& bytes) {
  SLIM_CHECK(fd_ >= 0, "torchrun's store at ", host_, ":", port_,
             ": the connection was closed after a time-out");
  SendAll(fd_, bytes);
}

void AgentStore::Receive(void* out, size_t n, milliseconds timeout) {
  SLIM_CHECK(fd_ >= 0, "torchrun's store at ", host_, ":", port_,
             ": the connection was closed after a time-out");
  if (!ReceiveBy(fd_, static_cast<uint8_t*>(out), n, Clock::now() + timeout)) {
    // An answer may still come: the connection's place in the stream is
    // lost, so it goes.
    ::close(fd_);
    fd_ = -1;
    SLIM_FAIL("torchrun's store at ", host_, ":", port_,
              " did not answer within ", timeout.count(), " ms");
  }
}

void AgentStore::set(const std::string& key,
                     const std::vector<uint8_t>& value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> req = {Code(kSet)};
  AppendBytes(&req, kKeyPrefix + key);
  Append<uint64_t>(&req, value.size());
  req.insert(req.end(), value.begin(), value.end());
  Send(req);
}

void AgentStore::WaitLocked(const std::vector<std::string>& keys,
                            milliseconds timeout) {
  std::vector<uint8_t> req = {Code(kWait)};
  AppendKeys(&req, keys);
  Send(req);
  uint8_t done = 1;
  Receive(&done, 1, timeout);
  SLIM_CHECK(done == 0, "torchrun's store at ", host_, ":", port_,
             " answered a wait with ", int(done));
}

std::vector<uint8_t> AgentStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  WaitLocked({key}, timeout_);
  std::vector<uint8_t> req = {Code(kGet)};
  AppendBytes(&req, kKeyPrefix + key);
  Send(req);
  uint64_t size = 0;
  Receive(&size, sizeof(size), timeout_);
  SLIM_CHECK(size <= (uint64_t{1} << 30), "torchrun's store at ", host_, ":",
             port_, " answered a value of ", size, " bytes for ", key);
  std::vector<uint8_t> value(size);
  if (size > 0) Receive(value.data(), size, timeout_);
  return value;
}

int64_t AgentStore::add(const std::string& key, int64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> req = {Code(kAdd)};
  AppendBytes(&req, kKeyPrefix + key);
  Append<int64_t>(&req, value);
  Send(req);
  int64_t sum = 0;
  Receive(&sum, sizeof(sum), timeout_);
  return sum;
}

bool AgentStore::deleteKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> req = {Code(kDeleteKey)};
  AppendBytes(&req, kKeyPrefix + key);
  Send(req);
  int64_t deleted = 0;
  Receive(&deleted, sizeof(deleted), timeout_);
  return deleted == 1;
}

bool AgentStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> req = {Code(kCheck)};
  AppendKeys(&req, keys);
  Send(req);
  uint8_t answer = 2;
  Receive(&answer, 1, timeout_);
  SLIM_CHECK(answer <= 1, "torchrun's store at ", host_, ":", port_,
             " answered a check with ", int(answer));
  return answer == 0;
}

int64_t AgentStore::getNumKeys() {
  std::lock_guard<std::mutex> lock(mu_);
  Send({Code(kGetNumKeys)});
  int64_t n = 0;
  Receive(&n, sizeof(n), timeout_);
  return n;
}

void AgentStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void AgentStore::wait(const std::vector<std::string>& keys,
                      const milliseconds& timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  WaitLocked(keys, timeout);
}

#ifdef SLIMTORCH_STORE_HAS_CLONE
c10::intrusive_ptr<c10d::Store> AgentStore::clone() {
  return c10::make_intrusive<AgentStore>(host_, port_, protocol_, timeout_);
}
#endif

}  // namespace slimtorch
#endif  // SLIMTORCH_WITH_C10D
