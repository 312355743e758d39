#pragma once
// Helpers shared by the io tests: scratch directories, golden file paths and
// an expectation on error messages.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "test_util.h"

namespace slimtorch {
namespace testing_io {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") +
                       "/slimtorch_io_test.XXXXXX";
    char* made = ::mkdtemp(&tmpl[0]);
    if (made == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~ScratchDir() { slimtorch::testing::RemoveTree(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const {
    return JoinPath(path_, name);
  }

 private:
  std::string path_;
};

// tests/golden/<name>, written by the scripts in scripts/golden/.
inline std::string GoldenPath(const std::string& name) {
  return std::string(SLIMTORCH_TEST_DATA_DIR) + "/golden/" + name;
}

// <build>/golden_out/<name>: files the tests leave for the Python checks in
// scripts/golden/check_*.py.
inline std::string GoldenOutPath(const std::string& name) {
  const std::string dir = std::string(SLIMTORCH_BINARY_DIR) + "/golden_out";
  MakeDirs(dir);
  return dir + "/" + name;
}

inline std::string ErrorMessage(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no slimtorch::Error thrown>";
}

// One entry of tests/golden/codec_goldens.inc (TensorFlow's decoded pixels
// of small PNG/JPEG/BMP files, written by scripts/golden/).
struct CodecGolden {
  const char* name;
  const unsigned char* data;
  size_t size;
  int channels;
  int height, width, out_channels;  // height -1: TensorFlow fails
  const unsigned char* expected;    // [height, width, out_channels]
};

}  // namespace testing_io
}  // namespace slimtorch

// Expects `stmt` to throw slimtorch::Error whose message contains every
// one of the following strings.
#define EXPECT_ERROR_CONTAINS(stmt, ...)                              \
  do {                                                                \
    const std::string slim_msg_ =                                     \
        ::slimtorch::testing_io::ErrorMessage([&] { stmt; });         \
    for (const std::string& slim_part_ :                              \
         std::initializer_list<std::string>{__VA_ARGS__}) {           \
      EXPECT_NE(slim_msg_.find(slim_part_), std::string::npos)        \
          << "message: " << slim_msg_ << "\nmissing: " << slim_part_; \
    }                                                                 \
  } while (0)
