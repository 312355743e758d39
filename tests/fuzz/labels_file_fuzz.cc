// Fuzz target: labels.txt (io/labels_file.h), the bytes as the file.
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/labels_file.h"

SLIM_FUZZ_TARGET(labels_file) {
  using namespace slimtorch;  // NOLINT
  const std::string path = fuzz::FreshDir("labels") + "/labels.txt";
  fuzz::WriteFile(path, std::string(reinterpret_cast<const char*>(data), size));
  try {
    const auto labels = ReadLabelsFile(path);
    // What was read writes back and reads the same.
    const std::string dir = fuzz::FreshDir("labels_again");
    WriteLabelsFile(labels, dir);
    if (ReadLabelsFile(dir + "/labels.txt") != labels) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
