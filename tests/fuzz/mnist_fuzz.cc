// Fuzz target: MNIST's gzip-compressed IDX files (datasets/mnist.h,
// io/gzip.h). Input: a mode byte, a U32 size n, n bytes of the images file,
// the rest the labels file. Mode bit 0 set: the parts are the .gz files as
// they are (the gzip reader's input); clear: they are the IDX bytes, which
// the target compresses (so that the fuzzer works on the IDX headers).
// Both go through ReadIdxSplit as the converter reads them.
#include <cstdlib>
#include <vector>

#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/datasets/mnist.h"
#include "slimtorch/io/gzip.h"

SLIM_FUZZ_TARGET(mnist) {
  using namespace slimtorch;  // NOLINT
  fuzz::UseSmallLimits();
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  std::string images = in.Take(in.U32());
  std::string labels = in.Rest();
  if (!(mode & 1)) {
    images = GzipString(images, 1);
    labels = GzipString(labels, 1);
  }
  const std::string dir = fuzz::FreshDir("mnist");
  fuzz::WriteFile(dir + "/train-images-idx3-ubyte.gz", images);
  fuzz::WriteFile(dir + "/train-labels-idx1-ubyte.gz", labels);
  try {
    const IdxSplit split = ReadIdxSplit(dir + "/train-images-idx3-ubyte.gz",
                                        dir + "/train-labels-idx1-ubyte.gz");
    if (split.labels.size() != static_cast<size_t>(split.images.count)) {
      std::abort();
    }
  } catch (const Error&) {
  }
  try {
    GunzipString(images, "images");
  } catch (const Error&) {
  }
  return 0;
}
