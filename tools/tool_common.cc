#include "tool_common.h"

#include <dlfcn.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <set>
#include <thread>

#include "cli/command_line.h"
#include "cli/flag_help.h"
#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/cpu_isa.h"
#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"

namespace slimtorch {
namespace tools {

void FailIfSet(std::initializer_list<const char*> flags) {
  for (const char* name : flags) {
    gflags::CommandLineFlagInfo info =
        gflags::GetCommandLineFlagInfoOrDie(name);
    if (!info.is_default && info.current_value != info.default_value) {
      SLIM_FAIL("--", name, " is not supported yet (got '", info.current_value,
                "', only the default '", info.default_value, "' works)");
    }
  }
}

void EnsureShortThreadSpins(char** argv) {
  if (SlimtorchVariable("SLIMTORCH_NO_REEXEC") != nullptr) return;
  bool set = false;
  if (EnvironmentVariable("OMP_WAIT_POLICY") == nullptr &&
      EnvironmentVariable("GOMP_SPINCOUNT") == nullptr) {
    SetEnvironmentVariable("GOMP_SPINCOUNT", "30000");
    set = true;
  }
  if (EnvironmentVariable("OPENBLAS_THREAD_TIMEOUT") == nullptr) {
    SetEnvironmentVariable("OPENBLAS_THREAD_TIMEOUT", "16");
    set = true;
  }
  if (!set) return;
  ::execv("/proc/self/exe", argv);
  // execv failed (no /proc): carry on with the spins the libraries have.
}

const std::atomic<bool>* InstallStopSignals(const char* what) {
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

namespace {

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The files defining the tool's own flags: those of the flags `groups`
// names, else (no groups) gflags' --helpshort rule: a file named like the
// program (".../<program>.cc").
std::set<std::string> OwnFlagFiles(
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
size_t HelpWidth() {
  struct winsize ws = {};
  if (::isatty(1) && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return std::clamp<size_t>(ws.ws_col, 60, 120);
  }
  return 80;
}

FlagHelpLine HelpLine(const gflags::CommandLineFlagInfo& info) {
  return {info.name, DisplayFlagValue(info.type, info.default_value),
          info.description};
}

// --helpshort (`all` false: the usage line, the usage message, how flags
// and flagfiles combine, the tool's own flags by group) and --help (`all`:
// also every other flag: gflags', glog's and LibTorch's).
std::string HelpText(const std::string& program, const char* usage,
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
      FlagHelpLine line = HelpLine(gflags::GetCommandLineFlagInfoOrDie(name));
      const std::string note = group.note ? group.note(name) : "";
      if (!note.empty()) line.help += (line.help.empty() ? "" : " ") + note;
      section.flags.push_back(std::move(line));
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

bool BoolFlag(const char* name) {
  std::string value;
  return gflags::GetCommandLineOption(name, &value) && value == "true";
}

// Reads the command line and its flagfiles (cli/command_line.h)
// and sets the flags: every flagfile's values, then the command line's.
// Handles --help, --helpshort and --helpfull itself (exit 0), gflags' other
// reporting flags (--helpxml, --version, ...) as gflags does. Returns -1 to
// go on, else the exit status; errors are one "error: " line on stderr.
// `overrides`: the flagfile values the command line overrode.
int ParseFlags(int argc, char** argv, const char* usage,
               const FlagGroups& groups, std::vector<std::string>* overrides) {
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

}  // namespace

void LogKernelSwitches() {
  LOG(INFO) << "kernels: " << DescribeKernelSwitches() << " (CPU loops run "
            << CpuIsaName(ActiveCpuIsa())
            << "); environment: " << DescribeSlimtorchSwitches();
}

int RunTool(int argc, char** argv, const char* usage, const FlagGroups& groups,
            const std::function<void()>& body) {
  EnsureShortThreadSpins(argv);
  std::vector<std::string> overrides;
  const int status = ParseFlags(argc, argv, usage, groups, &overrides);
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
  for (const UnknownVariable& u : UnknownSlimtorchVariables()) {
    LOG(WARNING) << u.name << " is set but no slimtorch program reads it"
                 << (u.closest.empty() ? std::string()
                                       : "; did you mean " + u.closest + "?")
                 << " (docs/runtime_switches.md lists the variables)";
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

int RunTool(int argc, char** argv, const char* usage,
            const std::function<void()>& body) {
  return RunTool(argc, argv, usage, FlagGroups{}, body);
}

c10::Device PickDevice(bool cpu_only) {
  if (!cpu_only && torch::cuda::is_available()) {
    return torch::Device(torch::kCUDA, 0);
  }
  return torch::kCPU;
}

void SetTf32(bool on) {
  at::globalContext().setAllowTF32CuBLAS(on);
  at::globalContext().setAllowTF32CuDNN(on);
}

void SetThreads(int n) {
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
