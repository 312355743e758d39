#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../remove_tree.h"
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/resource_limits.h"

namespace slimtorch {
namespace fuzz {
namespace {

namespace fs = std::filesystem;

using testing::RemoveTree;

const std::string& Scratch() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") +
                       "/slimtorch_fuzz.XXXXXX";
    if (::mkdtemp(&tmpl[0]) == nullptr) std::abort();
    static const std::string removed = tmpl;
    std::atexit([] { RemoveTree(removed); });
    // Converters log each file they write: quiet, so that the fuzzer's
    // own lines stay readable.
    FLAGS_minloglevel = 2;
    return tmpl;
  }();
  return dir;
}

}  // namespace

bool RegisterTarget(const char* name, TargetFn fn) {
  Targets().emplace_back(name, fn);
  return true;
}

std::vector<std::pair<std::string, TargetFn>>& Targets() {
  static std::vector<std::pair<std::string, TargetFn>> targets;
  return targets;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = Scratch() + "/" + name;
  RemoveTree(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) std::abort();
  return dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();
}

std::string Input::Take(size_t n) {
  n = std::min(n, left());
  std::string s(reinterpret_cast<const char*>(p), n);
  p += n;
  return s;
}

void UseSmallLimits() {
  static const bool once = [] {
    ResourceLimits l;
    l.max_image_pixels = uint64_t{1} << 22;
    l.max_record_bytes = uint64_t{64} << 20;
    l.max_member_bytes = uint64_t{64} << 20;
    l.max_example_values = uint64_t{1} << 20;
    SetResourceLimits(l);
    return true;
  }();
  (void)once;
}

}  // namespace fuzz
}  // namespace slimtorch
