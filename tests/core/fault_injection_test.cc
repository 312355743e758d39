#include "slimtorch/core/fault_injection.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing::ListDir;
using testing::ScopedFileFaults;

// The message of the slimtorch::Error `fn` throws ("" when none).
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(FaultInjectionTest, ParsesTheVariablesSyntax) {
  const std::vector<FileFault> f = ParseFileFaults(
      "write:*/model.ckpt-4.safetensors:1000:ENOSPC;;open:/a:b/*:2:EROFS;"
      "fsync:*:0:5;rename:*x*:3:EACCES");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].op, FileOp::kWrite);
  EXPECT_EQ(f[0].pattern, "*/model.ckpt-4.safetensors");
  EXPECT_EQ(f[0].after, 1000u);
  EXPECT_EQ(f[0].error, ENOSPC);
  EXPECT_EQ(f[1].op, FileOp::kOpen);
  EXPECT_EQ(f[1].pattern, "/a:b/*");  // a ':' in the pattern is kept
  EXPECT_EQ(f[1].error, EROFS);
  EXPECT_EQ(f[2].op, FileOp::kFsync);
  EXPECT_EQ(f[2].error, EIO);  // 5
  EXPECT_EQ(f[3].op, FileOp::kRename);
  EXPECT_EQ(f[3].error, EACCES);
  EXPECT_TRUE(ParseFileFaults("").empty());
  for (const char* bad : {"write:*:1", "delete:*:1:EIO", "write:*:-1:EIO",
                          "write:*:x:EIO", "write:*:1:ENOPE", "write::1:EIO"}) {
    const std::string e = ErrorOf([&] { ParseFileFaults(bad); });
    EXPECT_TRUE(Contains(e, "SLIMTORCH_FAULT_INJECT fault '" +
                                std::string(bad) + "'"))
        << bad << ": " << e;
  }
}

// A disk with 10 bytes free for the matching files: a write that crosses
// the limit fails after a short write, every later one fails, other files
// are not affected, and nothing is left under either name.
TEST(FaultInjectionTest, FullDiskFailsAWriteAndLeavesNoFile) {
  testing::TempDir dir;
  ScopedFileFaults faults("write:*/full*:10:ENOSPC");
  const std::string path = dir.Join("full.bin");
  {
    AtomicFileWriter w(path);
    w.Write("0123");
    const std::string e = ErrorOf([&] { w.Write("456789abcd"); });
    EXPECT_TRUE(Contains(e, "error writing '" + path + "'")) << e;
    EXPECT_TRUE(Contains(e, "at byte 10")) << e;
    EXPECT_TRUE(Contains(e, std::strerror(ENOSPC))) << e;
  }
  EXPECT_TRUE(ListDir(dir.path()).empty());
  {
    AtomicFileWriter w(dir.Join("full2.bin"));
    EXPECT_TRUE(Contains(ErrorOf([&] { w.Write("x"); }), "full2.bin"));
  }
  WriteFileAtomically(dir.Join("other.bin"), "fine");
  EXPECT_EQ(ListDir(dir.path()), std::vector<std::string>{"other.bin"});
}

TEST(FaultInjectionTest, OpenFsyncAndRenameFaultsLeaveTheOldFile) {
  testing::TempDir dir;
  const std::string path = dir.Join("f.txt");
  WriteFileAtomically(path, "old");
  {
    ScopedFileFaults faults("open:*/f.txt:0:EROFS");
    const std::string e = ErrorOf([&] { WriteFileAtomically(path, "new"); });
    EXPECT_TRUE(Contains(e, "cannot create '" + path + "'")) << e;
    EXPECT_TRUE(Contains(e, std::strerror(EROFS))) << e;
  }
  // The second commit's fsync fails (EIO), then the first rename (EACCES).
  for (const char* spec : {"fsync:*/f.txt:1:EIO", "rename:*/f.txt:0:EACCES"}) {
    ScopedFileFaults faults(spec);
    if (spec[0] == 'f') WriteFileAtomically(dir.Join("f.txt"), "old");
    const std::string e = ErrorOf([&] { WriteFileAtomically(path, "new"); });
    EXPECT_TRUE(Contains(e, path)) << spec << ": " << e;
    EXPECT_TRUE(Contains(e, "the file was not written")) << spec << ": " << e;
    EXPECT_EQ(ReadFileToString(path), "old") << spec;
    EXPECT_EQ(ListDir(dir.path()), std::vector<std::string>{"f.txt"}) << spec;
  }
  WriteFileAtomically(path, "new");  // no fault left
  EXPECT_EQ(ReadFileToString(path), "new");
}

TEST(FaultInjectionTest, ReadOnlyDirectoryFailsTheWritableCheck) {
  testing::TempDir dir;
  ScopedFileFaults faults("open:" + dir.path() + "/*:0:EROFS");
  const std::string e =
      ErrorOf([&] { CheckDirWritable(dir.Join("train"), "--train_dir"); });
  EXPECT_TRUE(Contains(e, "--train_dir '" + dir.Join("train") +
                              "' is not writable: " + std::strerror(EROFS)))
      << e;
}

// The real limit: past RLIMIT_FSIZE, with SIGXFSZ ignored (as the tools do),
// write(2) fails with EFBIG and the writer names the file.
TEST(FaultInjectionTest, FileSizeLimitIsAClearError) {
  testing::TempDir dir;
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct sigaction ignore = {}, old_action;
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string path = dir.Join("big.bin");
  const std::string e = ErrorOf([&] {
    AtomicFileWriter w(path);
    w.Write(std::string(100000, 'x'));
    w.Commit();
  });
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  EXPECT_TRUE(Contains(e, "'" + path + "'")) << e;
  EXPECT_TRUE(Contains(e, std::strerror(EFBIG))) << e;
  EXPECT_TRUE(ListDir(dir.path()).empty());
}

}  // namespace
}  // namespace slimtorch
