#pragma once
// RemoveTree, shared by the unit tests (test_util.h) and the fuzz targets
// (fuzz/fuzz_util.cc), which do not link LibTorch.

#include <ftw.h>

#include <cstdio>
#include <string>

namespace slimtorch {
namespace testing {

// Removes `path` and everything under it (no error when it is missing).
// POSIX nftw rather than std::filesystem::remove_all, which crashes in test
// binaries linked against PyTorch's pip LibTorch on Ubuntu 24.04 (a call
// through a null pointer inside remove_all; the tools do not use it).
inline void RemoveTree(const std::string& path) {
  ::nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) {
        ::remove(p);
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace testing
}  // namespace slimtorch
