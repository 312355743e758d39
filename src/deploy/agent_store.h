#pragma once
// A client of the c10d TCPStore that torchrun's agent serves on
// MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), speaking the wire
// protocol of whichever PyTorch runs that torchrun, not only the one this
// build links: Debian's torchrun is PyTorch 1.x, PyPI's 2.x, and the two
// number their requests differently (2.x starts each connection with a
// validation message and numbers every request one higher), so LibTorch's
// own TCPStore of one generation hangs against the other's server.
//
// The protocols, as both generations' clients send them (little-endian):
// a request is one byte and its arguments; a string or byte vector is a
// uint64 length and its bytes; keys carry TCPStore's "/" prefix.
//   request       1.x  2.x  arguments             answer
//   VALIDATE       -    0   uint32 0x3C85F7CE      none
//   SET            0    1   key, value             none
//   GET            2    3   key                    value
//   ADD            3    4   key, int64             int64
//   CHECK          4    5   uint64 n, n keys       uint8 0 ready, 1 not
//   WAIT           5    6   uint64 n, n keys       uint8 0 when all set
//   GETNUMKEYS     6    7   -                      int64
//   DELETE_KEY     8    8   key                    int64 deleted
// Which one a server speaks is found with probes on connections of their
// own that neither server can misread into harm: GETNUMKEYS of 1.x (one
// byte; a 2.x server takes it for an unfinished request and says
// nothing), or VALIDATE + GETNUMKEYS of 2.x (a 1.x server waits for the
// rest of what it reads as a SET until the probe's connection closes).

#ifdef SLIMTORCH_WITH_C10D
#include <chrono>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace slimtorch {

class AgentStore : public c10d::Store {
 public:
  enum class Protocol { kTorch1, kTorch2 };

  // The protocol of the server at host:port; `likely` is probed first.
  // Throws naming the address when it cannot be reached within `timeout`
  // or answers neither probe.
  static Protocol Detect(const std::string& host, int port, Protocol likely,
                         std::chrono::milliseconds timeout);

  // Connects (retrying until `timeout`), and validates under 2.x.
  AgentStore(std::string host, int port, Protocol protocol,
             std::chrono::milliseconds timeout);
  ~AgentStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
#ifdef SLIMTORCH_STORE_HAS_CLONE
  c10::intrusive_ptr<c10d::Store> clone() override;
#endif

 private:
  // The request's byte in this protocol (1.x's numbering given).
  uint8_t Code(uint8_t torch1) const;
  void Send(const std::vector<uint8_t>& bytes);
  // Reads exactly n bytes, waiting at most `timeout` in all.
  void Receive(void* out, size_t n, std::chrono::milliseconds timeout);
  void WaitLocked(const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout);

  const std::string host_;
  const int port_;
  const Protocol protocol_;
  int fd_ = -1;
  std::mutex mu_;
};

}  // namespace slimtorch
#endif  // SLIMTORCH_WITH_C10D
