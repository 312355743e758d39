#pragma once
// The fuzz targets of tests/fuzz/: each reader of outside bytes gets a
// function from bytes to nothing. A slimtorch::Error is the reader refusing
// the input, as it should; anything else (a crash, another exception, a
// sanitizer report, an allocation over libFuzzer's limit, a broken property
// a target checks) is a finding.
//
//   SLIM_FUZZ_TARGET(tfrecord) { ... data, size ... return 0; }
//
// Built two ways from the same source:
//  - by tests/fuzz/run_fuzzers.sh with clang, libFuzzer, AddressSanitizer
//    and UndefinedBehaviorSanitizer (SLIMTORCH_LIBFUZZER defined): the
//    target is LLVMFuzzerTestOneInput, one executable per target;
//  - in the normal build: every target registers itself by name in one
//    executable, slimtorch_fuzz_replay (replay_main.cc), which CTest runs
//    over each target's checked-in corpus and regressions (label `fuzz`).

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace slimtorch {
namespace fuzz {

using TargetFn = int (*)(const uint8_t* data, size_t size);

// Registers `fn` under `name` for the replay main; returns true.
bool RegisterTarget(const char* name, TargetFn fn);
// The registered targets, by name (the replay main's table).
std::vector<std::pair<std::string, TargetFn>>& Targets();

// A scratch folder of this process (made on the first call, removed at a
// normal exit) and, under it, `name` emptied for the next input.
std::string FreshDir(const std::string& name);

// Writes `bytes` to `path` (plain write, no rename).
void WriteFile(const std::string& path, const std::string& bytes);

// The input as bytes, and a reader that takes fields from its front; past
// the end it gives zeros / empty strings.
struct Input {
  const uint8_t* p;
  const uint8_t* end;
  Input(const uint8_t* data, size_t size) : p(data), end(data + size) {}
  size_t left() const { return static_cast<size_t>(end - p); }
  uint8_t Byte() { return p < end ? *p++ : 0; }
  uint32_t U16() {
    const uint32_t low = Byte();
    return low | uint32_t{Byte()} << 8;
  }
  uint32_t U32() {
    const uint32_t low = U16();
    return low | U16() << 16;
  }
  // The next min(n, left()) bytes.
  std::string Take(size_t n);
  // The next U16()-sized field.
  std::string Field() { return Take(U16()); }
  std::string Rest() { return Take(left()); }
};

// Keeps the targets quick and within libFuzzer's memory limit: images of at
// most 2^22 pixels, records, members and decompressed files of at most
// 64 MiB (the refusals themselves are what the readers must get right).
void UseSmallLimits();

}  // namespace fuzz
}  // namespace slimtorch

#ifdef SLIMTORCH_LIBFUZZER
#define SLIM_FUZZ_TARGET(name) \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define SLIM_FUZZ_TARGET(name)                                            \
  static int SlimFuzzTarget_##name(const uint8_t* data, size_t size);     \
  [[maybe_unused]] static const bool slim_fuzz_registered_##name =        \
      ::slimtorch::fuzz::RegisterTarget(#name, SlimFuzzTarget_##name);    \
  static int SlimFuzzTarget_##name(const uint8_t* data, size_t size)
#endif
