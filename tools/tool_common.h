#pragma once
// Shared start-up and error handling of the command-line tools (and of
// bench/'s programs): tools/tool_common.cc, in the slimtorch_cli library.

#include <c10/core/Device.h>

#include <atomic>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace slimtorch {
namespace tools {

// Throws "--X is not supported yet" for each named flag set away from its
// default on the command line or in a --flagfile.
void FailIfSet(std::initializer_list<const char*> flags);

// The tools set short spins for LibTorch's OpenMP threads and OpenBLAS's
// (GOMP_SPINCOUNT=30000, OPENBLAS_THREAD_TIMEOUT=16; docs/kernels.md says
// why). Both libraries read the variables when they load, before main(),
// so a tool re-executes itself once with them set; a variable the user set
// (or OMP_WAIT_POLICY, for libgomp) is left alone. SLIMTORCH_NO_REEXEC
// turns this off. RunTool calls it first.
void EnsureShortThreadSpins(char** argv);

// SIGINT and SIGTERM ask for a graceful stop: the first sets the returned
// flag (the trainer finishes its step, saves and exits 0; the evaluation
// loop finishes its evaluation) and says so on stderr with `what`; a second
// exits at once with 128 + the signal's number. Installed once; later calls
// return the same flag.
const std::atomic<bool>* InstallStopSignals(
    const char* what = "stopping after this step and saving a checkpoint");

// A tool's flags as --help groups them: titled groups in order, each naming
// its flags in the order shown. Every flag a tool defines belongs in one;
// one left out is shown last under "More flags".
// `note`, when set, adds a sentence to each of the group's flags' help
// (derived from the registries: which optimizers read the flag).
struct FlagGroup {
  const char* title;
  std::vector<const char*> flags;
  std::function<std::string(const std::string& flag)> note = nullptr;
};
using FlagGroups = std::vector<FlagGroup>;

// The start log line of the tools that run nets (train, eval, export): the
// kernel switches as the environment set them (core/kernel_switches.h),
// the instruction set the CPU loops run and the SLIMTORCH_* variables set
// (core/environment.h), so that an A/B log says which side it is. The
// converter and the other tools keep stderr to their errors.
void LogKernelSwitches();

// Reads the command line and its flagfiles (cli/command_line.h) and sets
// the flags: every flagfile's values, then the command line's; handles
// --help, --helpshort and --helpfull (exit 0) and gflags' other reporting
// flags (--helpxml, --version, ...) as gflags does. Then initialises
// logging to stderr, logs the flagfile values the command line overrode,
// warns of SLIMTORCH_* variables no program reads, installs the caching
// CPU allocator, runs `body` and turns any exception into one "error: "
// line on stderr and exit code 1. Returns the exit status.
int RunTool(int argc, char** argv, const char* usage, const FlagGroups& groups,
            const std::function<void()>& body);

// A program without --help groups (the bench/ programs): its flags listed
// by name.
int RunTool(int argc, char** argv, const char* usage,
            const std::function<void()>& body);

// The device the tools train or evaluate on, as TF-Slim places clones: the
// first CUDA GPU when one is present, unless `cpu_only` (--clone_on_cpu).
c10::Device PickDevice(bool cpu_only);

// --tf32: float32 matrix products and convolutions on NVIDIA GPUs from
// Ampere on in TensorFloat-32 (TensorFlow's default since 2.4,
// tf.config.experimental.enable_tensor_float_32_execution), or in full
// float32. LibTorch's own default is TF32 for cuDNN only.
void SetTf32(bool on);

// Sets LibTorch's intra-op threads: n > 0, else every core. OpenBLAS (the
// BLAS of Debian's LibTorch) keeps a thread count of its own, read from
// OPENBLAS_NUM_THREADS or OMP_NUM_THREADS when it loads: it gets the same
// n, so that neither the speed nor the numbers of a run depend on a
// launcher's OMP_NUM_THREADS (torchrun sets 1) and processes sharing a
// machine do not oversubscribe its cores.
void SetThreads(int n);

}  // namespace tools
}  // namespace slimtorch
