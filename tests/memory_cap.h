#pragma once
// Runs a piece of a test in a forked child whose address space may grow by
// at most a given amount (RLIMIT_AS): proof that a reader refused a claim
// before taking the memory it names.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <string>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace testing {

// The process's mapped bytes now (VmSize of /proc/self/status).
inline size_t MappedBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) {
      return static_cast<size_t>(std::stoull(line.substr(7))) * 1024;
    }
  }
  return 0;
}

// Runs fn in a child that may map at most `headroom` bytes more than this
// process does. Returns the message of the slimtorch::Error fn threw, or
// "<no error>", "<out of memory>" (an allocation failed: the memory was
// asked for), "<other exception: ...>", "<child died: signal N>".
inline std::string ErrorWithinMemory(const std::function<void()>& fn,
                                     size_t headroom) {
  int fds[2];
  if (::pipe(fds) != 0) return "<pipe failed>";
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const rlimit cap{MappedBytes() + headroom, MappedBytes() + headroom};
    ::setrlimit(RLIMIT_AS, &cap);
    std::string report = "<no error>";
    try {
      fn();
    } catch (const Error& e) {
      report = e.what();
    } catch (const std::bad_alloc&) {
      report = "<out of memory>";
    } catch (const std::exception& e) {
      report = std::string("<other exception: ") + e.what() + ">";
    }
    const ssize_t n = ::write(fds[1], report.data(), report.size());
    ::_exit(n == static_cast<ssize_t>(report.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) {
    report.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return "<child died: signal " + std::to_string(WTERMSIG(status)) + ">";
  }
  return report;
}

}  // namespace testing
}  // namespace slimtorch
