#pragma once
// The process environment, read in one place: src/core/environment.cc is
// the only file of the library and the tools that calls getenv, setenv or
// walks environ (tests/deps/check_deps.py checks it).
//
// slimtorch's own variables (SLIMTORCH_*) are listed once, in
// SlimtorchVariables(), with what each changes; docs/runtime_switches.md
// has the same table (a test compares them). They are read once: the
// values they had at the first call of any function here (the tools call
// one first thing in main), whatever the process sets later. The modules
// that own a variable parse it (kernel switches, resource limits, fault
// injection, the heap trim, ...); a test replaces one with
// OverrideSlimtorchVariable.
//
// Other programs' variables (torchrun's, SLURM's, gflags' FLAGS_*,
// OpenMP's, Gloo's) belong to those programs and are read when asked for.

#include <map>
#include <string>
#include <vector>

namespace slimtorch {

struct SlimtorchVariableInfo {
  enum class Kind {
    kSwitch,    // set by users; read by the tools and the library
    kHandover,  // set by slimtorch for the processes it starts
    kScript,    // read by scripts/ and tests/ only (known, so never "unknown")
  };
  const char* name;
  Kind kind;
  const char* what;  // one line
};

// Every SLIMTORCH_* variable, in docs/runtime_switches.md's order.
const std::vector<SlimtorchVariableInfo>& SlimtorchVariables();

// The value of one of SlimtorchVariables() (another name is a programming
// error: a check fails) as the process started with it, or its override;
// null when unset. The pointer stays valid until the variable is
// overridden again.
const char* SlimtorchVariable(const char* name);

// Replaces a SLIMTORCH_* variable's value for this process (null: unset),
// for tests; ClearSlimtorchVariableOverride returns to the start value.
// Modules that read theirs once (kernel switches, resource limits) keep
// what they read; those that read theirs at each use see the override.
void OverrideSlimtorchVariable(const char* name, const char* value);
void ClearSlimtorchVariableOverride(const char* name);

// "SLIMTORCH_WINOGRAD=0 SLIMTORCH_HEAP_TRIM_SECS=30": the switches the
// process started with (kSwitch, set and not empty), for the tools' start
// log line; "none set" when none is.
std::string DescribeSlimtorchSwitches();

// The SLIMTORCH_* names the process started with that no slimtorch program
// reads, each with the known name it most likely misspells ("" when none
// is close): a misspelt switch is otherwise silently ignored.
struct UnknownVariable {
  std::string name;
  std::string closest;
};
std::vector<UnknownVariable> UnknownSlimtorchVariables();

namespace internal {
// UnknownSlimtorchVariables() of an environment given as NAME -> value
// (exposed for tests).
std::vector<UnknownVariable> UnknownVariablesIn(
    const std::map<std::string, std::string>& env);
}  // namespace internal

// Another program's variable, read now; null when unset.
const char* EnvironmentVariable(const char* name);

// Sets a variable for this process and the processes it starts.
void SetEnvironmentVariable(const char* name, const std::string& value);

// The whole environment now, NAME -> value.
std::map<std::string, std::string> EnvironmentMap();

}  // namespace slimtorch
