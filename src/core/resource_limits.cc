#include "slimtorch/core/resource_limits.h"

#include <atomic>
#include <cstdlib>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// The variables, in ResourceLimits' field order (documented in
// docs/runtime_switches.md).
constexpr const char* kRecordBytes = "SLIMTORCH_MAX_RECORD_BYTES";
constexpr const char* kImagePixels = "SLIMTORCH_MAX_IMAGE_PIXELS";
constexpr const char* kMemberBytes = "SLIMTORCH_MAX_MEMBER_BYTES";
constexpr const char* kExampleValues = "SLIMTORCH_MAX_EXAMPLE_VALUES";

void ReadLimit(const std::function<const char*(const char*)>& lookup,
               const char* variable, uint64_t* out) {
  const char* v = lookup(variable);
  if (v == nullptr) return;
  const std::string s(v);
  char* end = nullptr;
  const unsigned long long n = std::strtoull(s.c_str(), &end, 10);
  SLIM_CHECK(!s.empty() && s[0] != '-' && end != nullptr && *end == '\0' &&
                 n > 0,
             "environment variable ", variable, "='", s,
             "': expected a positive integer");
  *out = n;
}

struct LiveLimits {
  std::atomic<uint64_t> record_bytes, image_pixels, member_bytes,
      example_values;
  explicit LiveLimits(const ResourceLimits& l)
      : record_bytes(l.max_record_bytes),
        image_pixels(l.max_image_pixels),
        member_bytes(l.max_member_bytes),
        example_values(l.max_example_values) {}
};

LiveLimits& Live() {
  static LiveLimits live(ResourceLimits::FromEnvironment(
      [](const char* name) { return SlimtorchVariable(name); }));
  return live;
}

}  // namespace

ResourceLimits ResourceLimits::FromEnvironment(
    const std::function<const char*(const char*)>& lookup) {
  ResourceLimits l;
  ReadLimit(lookup, kRecordBytes, &l.max_record_bytes);
  ReadLimit(lookup, kImagePixels, &l.max_image_pixels);
  ReadLimit(lookup, kMemberBytes, &l.max_member_bytes);
  ReadLimit(lookup, kExampleValues, &l.max_example_values);
  return l;
}

ResourceLimits GetResourceLimits() {
  LiveLimits& live = Live();
  ResourceLimits l;
  l.max_record_bytes = live.record_bytes.load();
  l.max_image_pixels = live.image_pixels.load();
  l.max_member_bytes = live.member_bytes.load();
  l.max_example_values = live.example_values.load();
  return l;
}

ResourceLimits SetResourceLimits(const ResourceLimits& limits) {
  LiveLimits& live = Live();
  ResourceLimits old;
  old.max_record_bytes = live.record_bytes.exchange(limits.max_record_bytes);
  old.max_image_pixels = live.image_pixels.exchange(limits.max_image_pixels);
  old.max_member_bytes = live.member_bytes.exchange(limits.max_member_bytes);
  old.max_example_values =
      live.example_values.exchange(limits.max_example_values);
  return old;
}

std::string LimitHint(uint64_t limit, const char* unit, const char* variable) {
  return StrCat("the limit is ", limit, " ", unit, "; set ", variable,
                " to raise it");
}

void CheckImagePixels(uint64_t height, uint64_t width, const char* what,
                      const std::string& context) {
  const uint64_t limit = GetResourceLimits().max_image_pixels;
  // height and width are below 2^32 (every format stores 32 bits or fewer).
  SLIM_CHECK(height * width <= limit, context, ": ", what, " of ", height,
             "x", width, " = ", height * width, " pixels is too large (",
             LimitHint(limit, "pixels", kImagePixels), ")");
}

}  // namespace slimtorch
