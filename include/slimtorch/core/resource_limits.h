#pragma once
// Limits on what the readers of outside bytes (TFRecord files, Examples,
// images, gzip files, archives) allocate because a header or a length field
// says so. A claim over a limit is refused before any memory is taken, with
// an error naming the file or record, the claimed size, the limit and the
// variable that raises it (docs/fuzzing.md, docs/runtime_switches.md).
// Read from the environment once, on the first call; tests change them with
// SetResourceLimits. Thread-safe.

#include <cstdint>
#include <functional>
#include <string>

namespace slimtorch {

struct ResourceLimits {
  // SLIMTORCH_MAX_RECORD_BYTES: the longest TFRecord record (default 1 GiB;
  // TF-Slim's records hold one encoded image).
  uint64_t max_record_bytes = uint64_t{1} << 30;
  // SLIMTORCH_MAX_IMAGE_PIXELS: height * width of the largest image decoded
  // (PNG, JPEG, BMP, GIF; default 2^28 = 268435456, e.g. 16384 x 16384, as
  // TensorFlow's BMP decoder).
  uint64_t max_image_pixels = uint64_t{1} << 28;
  // SLIMTORCH_MAX_MEMBER_BYTES: the largest archive member read into memory
  // and the largest decompressed gzip file (default 4 GiB; CIFAR's largest
  // member is 31 MB, MNIST's 47 MB).
  uint64_t max_member_bytes = uint64_t{4} << 30;
  // SLIMTORCH_MAX_EXAMPLE_VALUES: values in one feature list of a
  // tf.train.Example (default 2^24 = 16777216; TF-Slim's lists hold one
  // value, ImageNet's box lists a few).
  uint64_t max_example_values = uint64_t{1} << 24;

  // From a getenv-like lookup (null = unset): each variable a positive
  // integer; another value throws naming the variable.
  static ResourceLimits FromEnvironment(
      const std::function<const char*(const char*)>& lookup);
};

// The limits in force: the environment's until SetResourceLimits.
ResourceLimits GetResourceLimits();

// Replaces the limits for the whole process; returns the previous ones.
ResourceLimits SetResourceLimits(const ResourceLimits& limits);

// "limit 1073741824 bytes; set SLIMTORCH_MAX_RECORD_BYTES to raise it": the
// tail of every refusal.
std::string LimitHint(uint64_t limit, const char* unit, const char* variable);

// Throws slimtorch::Error "<context>: <what> of <height>x<width> pixels is
// over the limit of N pixels; set SLIMTORCH_MAX_IMAGE_PIXELS to raise it"
// when height * width exceeds max_image_pixels.
void CheckImagePixels(uint64_t height, uint64_t width, const char* what,
                      const std::string& context);

}  // namespace slimtorch
