#pragma once
// Shared start-up and error handling of the command-line tools.

#include <dlfcn.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "slimtorch/core/command_line.h"
#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/cpu_isa.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/flag_help.h"
#include "slimtorch/core/kernel_switches.h"

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

// Two thread pools share the cores: LibTorch's OpenMP threads (convolutions,
// element-wise ops) and OpenBLAS's own (the matrix products of
// fully-connected layers and 1x1 convolutions of 1x1 maps). Each spins
// after its work by default, taking the core the other one needs: libgomp
// for 300000 rounds (near a millisecond), OpenBLAS for 2^28 cycles (about a
// tenth of a second, yielding). A thread that sleeps at once
// (OMP_WAIT_POLICY=passive, what the tools set before) instead pays a futex
// wake-up at each of the thousands of parallel regions of a NASNet or
// MobileNet step. The tools set short spins for both: GOMP_SPINCOUNT=30000
// and OPENBLAS_THREAD_TIMEOUT=16 (2^16 cycles, tens of microseconds).
// 2-core AMD EPYC VM, step_profile images/s: NASNet-A Mobile 8.5 passive ->
// 10.4-11.0 with the OpenMP spin -> 10.9-11.2 with both; MobileNet v3 Small
// minimalistic 93-94 with the OpenMP spin alone -> 153-162; LeNet (batch
// 50) 1097-1178 -> 1426-1522; VGG-A unchanged (5.8-6.9 -> 7.0-7.2).
// Both libraries read the variables when they load, before main(), so a
// tool re-executes itself once with them set; a variable the user set (or
// OMP_WAIT_POLICY, for libgomp) is left alone. SLIMTORCH_NO_REEXEC=1 turns
// this off.
inline void EnsureShortThreadSpins(char** argv) {
  if (std::getenv("SLIMTORCH_NO_REEXEC") != nullptr) return;
  bool set = false;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr &&
      std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("GOMP_SPINCOUNT", "30000", 1);
    set = true;
  }
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr) {
    ::setenv("OPENBLAS_THREAD_TIMEOUT", "16", 1);
    set = true;
  }
  if (!set) return;
  ::execv("/proc/self/exe", argv);
  // execv failed (no /proc): carry on with the spins the libraries have.
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

// A tool's flags as --help groups them: titled groups in order, each naming
// its flags in the order shown. Every flag a tool defines belongs in one;
// one left out is shown last under "More flags".
struct FlagGroup {
  const char* title;
  std::vector<const char*> flags;
};
using FlagGroups = std::vector<FlagGroup>;

namespace internal {

inline std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The files defining the tool's own flags: those of the flags `groups`
// names, else (no groups) gflags' --helpshort rule: a file named like the
// program (".../<program>.cc").
inline std::set<std::string> OwnFlagFiles(
    const std::vector<gflags::CommandLineFlagInfo>& all,
    const FlagGroups& groups, const std::string& program) {
  std::set<std::string> files;
  for (const FlagGroup& group : groups) {
    for (const char* name : group.flags) {
      gflags::CommandLineFlagInfo info;
      SLIM_CHECK(gflags::GetCommandLineFlagInfo(name, &info),
                 "--help's group '", group.title, "' names --", name,
                 ", which is not a flag");
      files.insert(info.filename);
    }
  }
  if (files.empty()) {
    for (const auto& info : all) {
      if (info.filename.find("/" + Basename(program) + ".") !=
          std::string::npos) {
        files.insert(info.filename);
      }
    }
  }
  return files;
}

// Columns for --help: the terminal's (60 to 120) when stdout is one, else 80.
inline size_t HelpWidth() {
  struct winsize ws = {};
  if (::isatty(1) && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return std::clamp<size_t>(ws.ws_col, 60, 120);
  }
  return 80;
}

inline FlagHelpLine HelpLine(const gflags::CommandLineFlagInfo& info) {
  return {info.name, DisplayFlagValue(info.type, info.default_value),
          info.description};
}

// --helpshort (`all` false: the usage line, the usage message, how flags
// and flagfiles combine, the tool's own flags by group) and --help (`all`:
// also every other flag: gflags', glog's and LibTorch's).
inline std::string HelpText(const std::string& program, const char* usage,
                            const FlagGroups& groups, bool all) {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  const std::set<std::string> files = OwnFlagFiles(flags, groups, program);
  std::vector<FlagHelpGroup> sections;
  std::set<std::string> shown;
  for (const FlagGroup& group : groups) {
    FlagHelpGroup section{group.title, {}};
    for (const char* name : group.flags) {
      SLIM_CHECK(shown.insert(name).second, "--help's groups name --", name,
                 " twice");
      section.flags.push_back(
          HelpLine(gflags::GetCommandLineFlagInfoOrDie(name)));
    }
    sections.push_back(section);
  }
  FlagHelpGroup rest{groups.empty() ? "Flags" : "More flags", {}};
  FlagHelpGroup others{"Other flags (gflags, glog, LibTorch)", {}};
  for (const auto& info : flags) {
    if (shown.count(info.name) > 0) continue;
    if (files.count(info.filename) > 0) {
      rest.flags.push_back(HelpLine(info));
    } else if (all) {
      others.flags.push_back(HelpLine(info));
    }
  }
  auto by_name = [](const FlagHelpLine& a, const FlagHelpLine& b) {
    return a.name < b.name;
  };
  std::sort(rest.flags.begin(), rest.flags.end(), by_name);
  std::sort(others.flags.begin(), others.flags.end(), by_name);
  sections.push_back(rest);
  sections.push_back(others);
  std::string text = "usage: " + Basename(program) +
                     " [--flagfile=FILE] [--name=value ...]\n" + usage + "\n\n";
  const size_t width = HelpWidth();
  for (const std::string& line : WrapText(
           "Flags are written --name=value (true/false flags also --name, "
           "--noname). A flagfile holds one --name=value a line (# starts a "
           "comment; --flagfile lines read more files in place). Flags on "
           "the command line win over the flagfiles' wherever they stand, "
           "and a log line names the flagfile values they override. --help "
           "also lists the flags of gflags, glog and LibTorch; --helpxml "
           "lists all flags as XML.",
           width)) {
    text += line + "\n";
  }
  return text + "\n" + FormatFlagHelp(sections, width);
}

inline bool BoolFlag(const char* name) {
  std::string value;
  return gflags::GetCommandLineOption(name, &value) && value == "true";
}

// Reads the command line and its flagfiles (slimtorch/core/command_line.h)
// and sets the flags: every flagfile's values, then the command line's.
// Handles --help, --helpshort and --helpfull itself (exit 0), gflags' other
// reporting flags (--helpxml, --version, ...) as gflags does. Returns -1 to
// go on, else the exit status; errors are one "error: " line on stderr.
// `overrides`: the flagfile values the command line overrode.
inline int ParseFlags(int argc, char** argv, const char* usage,
                      const FlagGroups& groups,
                      std::vector<std::string>* overrides) {
  gflags::SetUsageMessage(usage);
  gflags::SetArgv(argc, const_cast<const char**>(argv));
  const std::string program = argv[0];
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  try {
    const std::set<std::string> files = OwnFlagFiles(flags, groups, program);
    // The tool's own flags first: the suggestions prefer them.
    std::stable_partition(flags.begin(), flags.end(), [&](const auto& info) {
      return files.count(info.filename) > 0;
    });
    std::vector<KnownFlag> known;
    for (const auto& info : flags) {
      known.push_back({info.name, info.type == "bool"});
    }
    const ArrangedCommandLine line = ArrangeCommandLine(
        std::vector<std::string>(argv + 1, argv + argc), known, program);
    for (const FlagSetting& s : line.Settings()) {
      if (gflags::SetCommandLineOption(s.name.c_str(), s.value.c_str())
              .empty()) {
        const std::string type =
            gflags::GetCommandLineFlagInfoOrDie(s.name.c_str()).type;
        SLIM_FAIL("--", s.name, ": '", s.value, "' is not a valid ", type,
                  " value",
                  s.origin == FlagSetting::Origin::kCommandLine
                      ? std::string()
                      : " (" + s.Where() + ")");
      }
    }
    if (BoolFlag("help") || BoolFlag("helpfull") || BoolFlag("helpshort")) {
      std::cout << HelpText(program, usage, groups, !BoolFlag("helpshort"));
      return 0;
    }
    gflags::HandleCommandLineHelpFlags();  // --helpxml, --version, ...: exit
    if (!line.arguments.empty()) {
      SLIM_FAIL("unexpected argument '", line.arguments[0],
                "' (flags are written --name=value)");
    }
    *overrides = line.overrides;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return -1;
}

}  // namespace internal

// The start log line of the tools that run nets (train, eval, export): the
// kernel switches as the environment set them (core/kernel_switches.h) and
// the instruction set the CPU loops run, so that an A/B log says which side
// it is. The converter and the other tools keep stderr to their errors.
inline void LogKernelSwitches() {
  LOG(INFO) << "kernels: " << DescribeKernelSwitches() << " (CPU loops run "
            << CpuIsaName(ActiveCpuIsa()) << ")";
}

// Reads the flags (ParseFlags above: --help, unknown flags, flagfiles),
// initialises logging to stderr, runs `body` and turns any exception into
// one error line and exit code 1.
inline int RunTool(int argc, char** argv, const char* usage,
                   const FlagGroups& groups,
                   const std::function<void()>& body) {
  EnsureShortThreadSpins(argv);
  std::vector<std::string> overrides;
  const int status =
      internal::ParseFlags(argc, argv, usage, groups, &overrides);
  if (status >= 0) return status;
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // A file past the RLIMIT_FSIZE limit (ulimit -f): write fails with EFBIG
  // and the writer reports the file, instead of SIGXFSZ killing the process
  // without a word (docs/storage_faults.md).
  ::signal(SIGXFSZ, SIG_IGN);
  if (!overrides.empty()) {
    std::string joined;
    for (const std::string& o : overrides) {
      joined += (joined.empty() ? "" : "; ") + o;
    }
    LOG(INFO) << "flags: " << joined;
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

// A program without --help groups (the bench/ programs): its flags listed
// by name.
inline int RunTool(int argc, char** argv, const char* usage,
                   const std::function<void()>& body) {
  return RunTool(argc, argv, usage, FlagGroups{}, body);
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

// OpenBLAS (the BLAS of Debian's LibTorch) keeps a thread count of its
// own, read from OPENBLAS_NUM_THREADS or OMP_NUM_THREADS when it loads: it
// gets the same n, so that neither the speed nor the numbers of a run
// depend on a launcher's OMP_NUM_THREADS (torchrun sets 1) and processes
// sharing a machine do not oversubscribe its cores.
inline void SetThreads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(1, n);
  at::set_num_threads(n);
  using SetBlasThreads = void (*)(int);
  if (auto set_blas = reinterpret_cast<SetBlasThreads>(
          ::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas(n);
  }
}

}  // namespace tools
}  // namespace slimtorch
