#pragma once
// Shared start-up and error handling of the command-line tools.

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <string>
#include <thread>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace tools {

// Throws "--X is not supported yet" for each named flag set away from its
// default on the command line or in a --flagfile.
inline void FailIfSet(std::initializer_list<const char*> flags) {
  for (const char* name : flags) {
    gflags::CommandLineFlagInfo info =
        gflags::GetCommandLineFlagInfoOrDie(name);
    if (!info.is_default && info.current_value != info.default_value) {
      SLIM_FAIL("--", name, " is not supported yet (got '",
                info.current_value, "', only the default '",
                info.default_value, "' works)");
    }
  }
}

// Parses flags, initialises logging to stderr, runs `body` and turns any
// exception into one error line and exit code 1.
inline int RunTool(int argc, char** argv, const char* usage,
                   const std::function<void()>& body) {
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    std::cerr << "error: unexpected argument '" << argv[1]
              << "' (flags are written --name=value)\n";
    return 1;
  }
  try {
    body();
  } catch (const std::exception& e) {
    std::string what = e.what();
    // LibTorch errors carry a C++ backtrace after the first line.
    if (dynamic_cast<const slimtorch::Error*>(&e) == nullptr) {
      size_t nl = what.find('\n');
      if (nl != std::string::npos) what = what.substr(0, nl);
    }
    std::cerr << "error: " << what << std::endl;
    return 1;
  }
  return 0;
}

// Sets LibTorch's intra-op threads: n > 0, else every core.
inline void SetThreads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(1, n));
}

}  // namespace tools
}  // namespace slimtorch
