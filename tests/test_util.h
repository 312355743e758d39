#pragma once
// Helpers shared by the unit tests.

#include <ATen/Context.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "remove_tree.h"
#include "slimtorch/core/fault_injection.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace testing {

// While alive, matrix products and convolutions run in full float32 on
// NVIDIA GPUs (no TensorFloat-32); restores cuDNN's and cuBLAS's settings
// however the test leaves.
class FullFloat32 {
 public:
  FullFloat32()
      : cudnn_(at::globalContext().allowTF32CuDNN()),
        cublas_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  ~FullFloat32() {
    at::globalContext().setAllowTF32CuDNN(cudnn_);
    at::globalContext().setAllowTF32CuBLAS(cublas_);
  }
  FullFloat32(const FullFloat32&) = delete;
  FullFloat32& operator=(const FullFloat32&) = delete;

 private:
  bool cudnn_, cublas_;
};

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "slimtorch_test_XXXXXX")
            .string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data());
  }
  ~TempDir() { RemoveTree(path_); }
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Injects storage faults (core/fault_injection.h) while alive; none after,
// however the test leaves.
class ScopedFileFaults {
 public:
  explicit ScopedFileFaults(std::vector<FileFault> faults) {
    SetFileFaults(std::move(faults));
  }
  explicit ScopedFileFaults(const std::string& spec)
      : ScopedFileFaults(ParseFileFaults(spec)) {}
  ~ScopedFileFaults() { SetFileFaults({}); }
  ScopedFileFaults(const ScopedFileFaults&) = delete;
  ScopedFileFaults& operator=(const ScopedFileFaults&) = delete;
};

// Every file directly in `dir`, sorted (names only).
inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Writes a TFRecord file of `n` PNG examples, h x w x c, whose pixels all
// equal (first_value + i) % 256 and whose label is labels[i % labels.size()].
inline void WriteTinyImageRecords(const std::string& path, int n,
                                  int first_value,
                                  const std::vector<int64_t>& labels, int h = 4,
                                  int w = 4, int c = 1) {
  TFRecordWriter writer(path);
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> pixels(h * w * c,
                                static_cast<uint8_t>((first_value + i) % 256));
    ImageExample ex;
    ex.encoded = EncodePng(pixels.data(), h, w, c);
    ex.format = "png";
    ex.label = labels[i % labels.size()];
    ex.height = h;
    ex.width = w;
    writer.Write(EncodeImageExample(ex));
  }
  writer.Close();
}

}  // namespace testing
}  // namespace slimtorch
