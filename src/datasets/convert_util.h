#pragma once
// Private helpers shared by the dataset converters (mnist.cc, cifar.cc):
// fetching a source file from a mirror and the threaded writer of PNG
// examples. Not installed.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace slimtorch {
namespace internal {

// `source_url` when set, else `default_url`, with a trailing '/'.
std::string SourceBaseUrl(const std::string& source_url,
                          const std::string& default_url);

// Makes `file` of the mirror folder `base_url` (ends with '/') available
// locally and returns its path. A file:// base is read in place (throws when
// the file is missing, naming the path); otherwise the file is downloaded to
// <dir>/<file> (an earlier complete download there is reused) and that path
// is appended to *downloaded, so the caller can delete it afterwards.
std::string FetchSourceFile(const std::string& base_url,
                            const std::string& file, const std::string& dir,
                            std::vector<std::string>* downloaded);

// Calls fn(begin, end) over [0, n) in small ranges on `num_threads` threads
// (0 = hardware concurrency, at most 8), the caller's included. The first
// exception stops the others and is rethrown here.
void ParallelFor(int64_t n, int num_threads,
                 const std::function<void(int64_t begin, int64_t end)>& fn);

// Writes the HWC uint8 pixels of example `index` (height*width*channels
// bytes) to `hwc`. Called concurrently from several threads with distinct
// indices; must not throw except slimtorch::Error.
using PixelFn = std::function<void(int64_t index, uint8_t* hwc)>;

// Writes `labels.size()` examples as one TFRecord file at `path` (atomically,
// see TFRecordWriter): record i is EncodeImageExample({PNG of pixels(i),
// "png", labels[i], height, width}). PNGs are encoded by `num_threads` threads
// (0 = hardware concurrency, at most 8); the output does not depend on it.
// An exception in a worker is rethrown here and nothing is written.
void WritePngExamplesTFRecord(const std::string& path, int height, int width,
                              int channels, const std::vector<int64_t>& labels,
                              const PixelFn& pixels, int num_threads = 0);

}  // namespace internal
}  // namespace slimtorch
