#pragma once
// Shared start-up and error handling of the command-line tools.

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <string>
#include <thread>

#include "slimtorch/core/cpu_allocator.h"
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

// OpenMP threads that spin while waiting (libgomp's default) steal the
// cores OpenBLAS's own threads need for the fully-connected layers: on a
// 2-core machine LeNet trains ~1.6x faster with OMP_WAIT_POLICY=passive.
// libgomp reads the variable when it loads, before main(), so when the user
// has not chosen a policy the tool re-executes itself once with it set.
// SLIMTORCH_NO_REEXEC=1 turns this off.
inline void EnsurePassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr ||
      std::getenv("SLIMTORCH_NO_REEXEC") != nullptr) {
    return;
  }
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
  // execv failed (no /proc): carry on with the policy libgomp already has.
}

// SIGINT and SIGTERM ask for a graceful stop: the first sets the returned
// flag (the trainer finishes its step, saves and exits 0; the evaluation
// loop finishes its evaluation) and says so on stderr with `what`; a second
// exits at once with 128 + the signal's number. Installed once; later calls
// return the same flag.
inline const std::atomic<bool>* InstallStopSignals(
    const char* what = "stopping after this step and saving a checkpoint") {
  static std::atomic<bool> stop{false};
  static std::atomic<int> count{0};
  static std::string message;  // written once, before the handler exists
  static_assert(std::atomic<bool>::is_always_lock_free &&
                    std::atomic<int>::is_always_lock_free,
                "the signal handler needs lock-free atomics");
  static const bool installed = [what] {
    message = std::string("signal received: ") + what +
              " (send it again to exit at once)\n";
    struct sigaction sa = {};
    sa.sa_handler = [](int sig) {
      if (count.fetch_add(1) > 0) ::_exit(128 + sig);
      stop.store(true);
      ssize_t ignored = ::write(2, message.data(), message.size());
      (void)ignored;
    };
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // reads and waits carry on
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    return true;
  }();
  (void)installed;
  return &stop;
}

// Parses flags, initialises logging to stderr, runs `body` and turns any
// exception into one error line and exit code 1.
inline int RunTool(int argc, char** argv, const char* usage,
                   const std::function<void()>& body) {
  EnsurePassiveOpenMpWait(argv);
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
    // Before any tensor: LibTorch's CPU tensors from the caching allocator.
    UseCachingCpuAllocator();
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

// The device the tools train or evaluate on, as TF-Slim places clones: the
// first CUDA GPU when one is present, unless `cpu_only` (--clone_on_cpu).
inline torch::Device PickDevice(bool cpu_only) {
  if (!cpu_only && torch::cuda::is_available()) {
    return torch::Device(torch::kCUDA, 0);
  }
  return torch::kCPU;
}

// Sets LibTorch's intra-op threads: n > 0, else every core.
// --tf32: float32 matrix products and convolutions on NVIDIA GPUs from
// Ampere on in TensorFloat-32 (TensorFlow's default since 2.4,
// tf.config.experimental.enable_tensor_float_32_execution), or in full
// float32. LibTorch's own default is TF32 for cuDNN only.
inline void SetTf32(bool on) {
  at::globalContext().setAllowTF32CuBLAS(on);
  at::globalContext().setAllowTF32CuDNN(on);
}

inline void SetThreads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(1, n));
}

}  // namespace tools
}  // namespace slimtorch
