#include "slimtorch/core/fault_injection.h"

#include <fnmatch.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

constexpr const char* kEnvVar = "SLIMTORCH_FAULT_INJECT";

struct ActiveFault {
  FileFault fault;
  uint64_t count = 0;  // matching calls (kWrite: bytes) that went ahead
};

struct FaultState {
  std::mutex mu;
  std::vector<ActiveFault> faults;
  bool initialized = false;  // SetFileFaults or the environment was read
};

FaultState& State() {
  static FaultState* state = new FaultState;  // never destroyed: used at exit
  return *state;
}

// Whether any fault is installed; false until the environment is read.
std::atomic<bool> g_any{false};
std::atomic<bool> g_env_read{false};

const struct {
  const char* name;
  int value;
} kErrnoNames[] = {{"ENOSPC", ENOSPC}, {"EIO", EIO},       {"EROFS", EROFS},
                   {"EACCES", EACCES}, {"EFBIG", EFBIG},   {"EDQUOT", EDQUOT},
                   {"ENOENT", ENOENT}, {"EPERM", EPERM}};

int ParseErrno(const std::string& s, const std::string& where) {
  for (const auto& e : kErrnoNames) {
    if (s == e.name) return e.value;
  }
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  SLIM_CHECK(!s.empty() && *end == '\0' && v > 0 && v < 4096, where,
             ": unknown errno '", s,
             "' (expected ENOSPC, EIO, EROFS, EACCES, EFBIG, EDQUOT, ENOENT, "
             "EPERM or a positive number)");
  return static_cast<int>(v);
}

FileOp ParseOp(const std::string& s, const std::string& where) {
  if (s == "open") return FileOp::kOpen;
  if (s == "write") return FileOp::kWrite;
  if (s == "fsync") return FileOp::kFsync;
  SLIM_CHECK(s == "rename", where, ": unknown operation '", s,
             "' (expected open, write, fsync or rename)");
  return FileOp::kRename;
}

FileFault ParseOne(const std::string& item) {
  const std::string where = StrCat(kEnvVar, " fault '", item, "'");
  const size_t a = item.find(':');
  const size_t c = item.rfind(':');
  const size_t b = c == std::string::npos || c == 0
                       ? std::string::npos
                       : item.rfind(':', c - 1);
  SLIM_CHECK(a != std::string::npos && b != std::string::npos && a < b,
             where, ": expected <op>:<pattern>:<after>:<errno>");
  FileFault f;
  f.op = ParseOp(item.substr(0, a), where);
  f.pattern = item.substr(a + 1, b - a - 1);
  SLIM_CHECK(!f.pattern.empty(), where, ": empty path pattern");
  const std::string after = item.substr(b + 1, c - b - 1);
  char* end = nullptr;
  f.after = std::strtoull(after.c_str(), &end, 10);
  SLIM_CHECK(!after.empty() && *end == '\0' && after[0] != '-', where,
             ": <after> must be a non-negative integer, got '", after, "'");
  f.error = ParseErrno(item.substr(c + 1), where);
  return f;
}

void Install(FaultState& s, std::vector<FileFault> faults) {
  s.faults.clear();
  for (FileFault& f : faults) s.faults.push_back({std::move(f), 0});
  s.initialized = true;
  g_any.store(!s.faults.empty());
}

// Reads SLIMTORCH_FAULT_INJECT once (unless SetFileFaults came first).
void ReadEnvironmentOnce() {
  if (g_env_read.load(std::memory_order_acquire)) return;
  FaultState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) {
    const char* spec = SlimtorchVariable(kEnvVar);
    s.initialized = true;  // a bad value fails once, not at every write
    if (spec != nullptr && *spec != '\0') Install(s, ParseFileFaults(spec));
  }
  g_env_read.store(true, std::memory_order_release);
}

}  // namespace

std::vector<FileFault> ParseFileFaults(const std::string& spec) {
  std::vector<FileFault> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(';', start);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(start, end - start);
    if (!item.empty()) out.push_back(ParseOne(item));
    start = end + 1;
  }
  return out;
}

void SetFileFaults(std::vector<FileFault> faults) {
  FaultState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  Install(s, std::move(faults));
  g_env_read.store(true, std::memory_order_release);
}

int CheckFileFault(FileOp op, const std::string& path, size_t* size) {
  ReadEnvironmentOnce();
  if (!g_any.load(std::memory_order_relaxed)) return 0;
  FaultState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t want = op == FileOp::kWrite && size != nullptr ? *size : 1;
  for (ActiveFault& a : s.faults) {
    if (a.fault.op != op ||
        ::fnmatch(a.fault.pattern.c_str(), path.c_str(), 0) != 0) {
      continue;
    }
    if (a.count + want <= a.fault.after) {
      a.count += want;
      continue;
    }
    if (op == FileOp::kWrite && size != nullptr) {
      *size = static_cast<size_t>(a.fault.after - std::min(a.count,
                                                           a.fault.after));
    }
    a.count = std::max(a.count, a.fault.after);
    return a.fault.error;
  }
  return 0;
}

}  // namespace slimtorch
