#include "slimtorch/core/environment.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

extern char** environ;

namespace slimtorch {
namespace {

using Kind = SlimtorchVariableInfo::Kind;

constexpr char kPrefix[] = "SLIMTORCH_";

// The SLIMTORCH_* variables of the environment the process started with.
const std::map<std::string, std::string>& StartValues() {
  static const std::map<std::string, std::string> start = [] {
    std::map<std::string, std::string> values;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq == nullptr || std::strncmp(*e, kPrefix, sizeof(kPrefix) - 1)) {
        continue;
      }
      values.emplace(std::string(*e, static_cast<size_t>(eq - *e)),
                     std::string(eq + 1));
    }
    return values;
  }();
  return start;
}

struct Overrides {
  std::mutex mu;
  std::map<std::string, std::optional<std::string>> values;
};

Overrides& TheOverrides() {
  static Overrides* overrides = new Overrides();
  return *overrides;
}

const SlimtorchVariableInfo* Find(const char* name) {
  for (const SlimtorchVariableInfo& v : SlimtorchVariables()) {
    if (std::strcmp(v.name, name) == 0) return &v;
  }
  return nullptr;
}

// Edits (insert, delete, substitute) from a to b.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const std::vector<SlimtorchVariableInfo>& SlimtorchVariables() {
  static const std::vector<SlimtorchVariableInfo> variables = {
      {"SLIMTORCH_NO_REEXEC", Kind::kSwitch,
       "the tools do not re-execute themselves to set the thread spins"},
      {"SLIMTORCH_CPU_ALLOCATOR", Kind::kSwitch,
       "system: LibTorch's CPU allocator instead of the caching one"},
      {"SLIMTORCH_HEAP_TRIM_SECS", Kind::kSwitch,
       "seconds between the trainer's returns of idle memory (0: never)"},
      {"SLIMTORCH_CPU_ISA", Kind::kSwitch,
       "caps the instruction set of slimtorch's CPU loops"},
      {"SLIMTORCH_FUSED_KERNELS", Kind::kSwitch, "0: every fused kernel off"},
      {"SLIMTORCH_DNNL_BATCH_NORM", Kind::kSwitch,
       "0: slimtorch's CPU batch norms instead of oneDNN's"},
      {"SLIMTORCH_WINOGRAD", Kind::kSwitch,
       "0: LibTorch's 3x3 CPU convolutions instead of oneDNN's Winograd"},
      {"SLIMTORCH_DNNL_POOLING", Kind::kSwitch,
       "0: LibTorch's bfloat16 CPU max pooling instead of oneDNN's"},
      {"SLIMTORCH_DEPTHWISE", Kind::kSwitch,
       "0: LibTorch's depthwise backward instead of slimtorch's"},
      {"SLIMTORCH_FAULT_INJECT", Kind::kSwitch, "storage faults for tests"},
      {"SLIMTORCH_MAX_RECORD_BYTES", Kind::kSwitch,
       "the longest TFRecord record read"},
      {"SLIMTORCH_MAX_IMAGE_PIXELS", Kind::kSwitch,
       "height x width of the largest image decoded"},
      {"SLIMTORCH_MAX_MEMBER_BYTES", Kind::kSwitch,
       "the largest archive member or gzip file read into memory"},
      {"SLIMTORCH_MAX_EXAMPLE_VALUES", Kind::kSwitch,
       "values in one feature list of a tf.train.Example"},
      {"SLIMTORCH_CLONE_OF", Kind::kHandover,
       "set by the --num_clones launcher in its clones"},
      {"SLIMTORCH_DIR_LOCK_FDS", Kind::kHandover,
       "the train_dir locks a launcher shares with its clones"},
      {"SLIMTORCH_EXTRA_TORCHRUNS", Kind::kScript,
       "more torchruns for tests/e2e/torchrun.sh"},
      {"SLIMTORCH_CLUSTER_TESTS", Kind::kScript,
       "0: scripts/test.sh leaves out the cluster tests"},
      {"SLIMTORCH_TF_TESTS", Kind::kScript,
       "1: scripts/test.sh runs the tensorflow tests"},
      {"SLIMTORCH_SLOW_TESTS", Kind::kScript,
       "1: scripts/test.sh runs the slow tests"},
      {"SLIMTORCH_ONNXRUNTIME_LIBRARY", Kind::kSwitch,
       "the onnxruntime library label_image loads"},
      {"SLIMTORCH_QUANTIZED_ENGINE_TESTS", Kind::kScript,
       "1: the quantized-engine unit tests run"},
      {"SLIMTORCH_QUANTIZED_EXPORT_DIR", Kind::kScript,
       "where a skipped-by-default test writes its ONNX files"},
      {"SLIMTORCH_PYTHON", Kind::kScript,
       "the Python with TensorFlow of the e2e export test"},
      {"SLIMTORCH_TF_ALL_NETS_DIR", Kind::kScript,
       "TensorFlow checkpoints of every net, for a unit test"},
      {"SLIMTORCH_CUDA_VENV", Kind::kScript,
       "where install_deps.sh --cuda puts PyTorch's CUDA wheel"},
  };
  return variables;
}

const char* SlimtorchVariable(const char* name) {
  CHECK(Find(name) != nullptr)
      << name << " is not one of slimtorch's variables (core/environment.cc)";
  const std::map<std::string, std::string>& start = StartValues();
  {
    Overrides& o = TheOverrides();
    std::lock_guard<std::mutex> lock(o.mu);
    auto it = o.values.find(name);
    if (it != o.values.end()) {
      return it->second ? it->second->c_str() : nullptr;
    }
  }
  auto it = start.find(name);
  return it == start.end() ? nullptr : it->second.c_str();
}

void OverrideSlimtorchVariable(const char* name, const char* value) {
  CHECK(Find(name) != nullptr)
      << name << " is not one of slimtorch's variables";
  Overrides& o = TheOverrides();
  std::lock_guard<std::mutex> lock(o.mu);
  o.values[name] =
      value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

void ClearSlimtorchVariableOverride(const char* name) {
  Overrides& o = TheOverrides();
  std::lock_guard<std::mutex> lock(o.mu);
  o.values.erase(name);
}

std::string DescribeSlimtorchSwitches() {
  std::string out;
  for (const SlimtorchVariableInfo& v : SlimtorchVariables()) {
    if (v.kind != Kind::kSwitch) continue;
    const char* value = SlimtorchVariable(v.name);
    if (value == nullptr || *value == '\0') continue;
    out += (out.empty() ? "" : " ") + std::string(v.name) + "=" + value;
  }
  return out.empty() ? "none set" : out;
}

namespace internal {

std::vector<UnknownVariable> UnknownVariablesIn(
    const std::map<std::string, std::string>& env) {
  std::vector<UnknownVariable> unknown;
  for (const auto& [name, value] : env) {
    if (name.compare(0, sizeof(kPrefix) - 1, kPrefix) != 0 ||
        Find(name.c_str()) != nullptr) {
      continue;
    }
    UnknownVariable u{name, ""};
    size_t best = 4;  // more edits than 3 is no likely misspelling
    for (const SlimtorchVariableInfo& v : SlimtorchVariables()) {
      const size_t d = EditDistance(name, v.name);
      if (d < best) best = d, u.closest = v.name;
    }
    unknown.push_back(u);
  }
  return unknown;
}

}  // namespace internal

std::vector<UnknownVariable> UnknownSlimtorchVariables() {
  return internal::UnknownVariablesIn(StartValues());
}

const char* EnvironmentVariable(const char* name) { return std::getenv(name); }

void SetEnvironmentVariable(const char* name, const std::string& value) {
  ::setenv(name, value.c_str(), 1);
}

std::map<std::string, std::string> EnvironmentMap() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) {
      env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
    }
  }
  return env;
}

}  // namespace slimtorch
