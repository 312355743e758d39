#include "slimtorch/io/download.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/test_http_server.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "test_util.h"

namespace slimtorch {
namespace {
namespace fs = std::filesystem;
using testing_util::TestHttpServer;

std::string PatternBytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

DownloadOptions FastOptions() {
  return DownloadOptions()
      .connect_timeout_s(2)
      .low_speed_time_s(2)
      .max_attempts(3)
      .initial_backoff_ms(10)
      .max_backoff_ms(20)
      .show_progress(false);
}

class DownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("slimtorch_download_test_" + std::to_string(::getpid())))
               .string();
    testing::RemoveTree(dir_);
    MakeDirs(dir_);
    dest_ = JoinPath(dir_, "file.bin");
  }
  void TearDown() override { testing::RemoveTree(dir_); }

  std::string dir_;
  std::string dest_;
};

TEST_F(DownloadTest, ServesFile) {
  const std::string body = PatternBytes(100000);
  TestHttpServer server({{"/file.bin", body}});
  DownloadFile(server.Url(), dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), body);
  EXPECT_FALSE(PathExists(dest_ + ".part"));
  EXPECT_EQ(server.num_requests(), 1);
}

TEST_F(DownloadTest, RetriesAfter500) {
  const std::string body = PatternBytes(5000);
  TestHttpServer server({{"/file.bin", body}});
  server.fail_500 = 1;
  DownloadFile(server.Url(), dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), body);
  EXPECT_EQ(server.num_requests(), 2);
}

TEST_F(DownloadTest, GivesUpAfterMaxAttemptsNamingUrlAndStatus) {
  TestHttpServer server({{"/file.bin", PatternBytes(100)}});
  server.always_500 = true;
  try {
    DownloadFile(server.Url(), dest_, FastOptions().max_attempts(2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(server.Url()), std::string::npos) << msg;
    EXPECT_NE(msg.find("HTTP status 500"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 attempts"), std::string::npos) << msg;
  }
  EXPECT_EQ(server.num_requests(), 2);
  EXPECT_FALSE(PathExists(dest_));
}

TEST_F(DownloadTest, ResumesWithRangeAfterDroppedConnection) {
  const std::string body = PatternBytes(200000);
  TestHttpServer server({{"/file.bin", body}});
  server.drop_after_bytes = 70000;
  DownloadFile(server.Url(), dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), body);
  EXPECT_FALSE(PathExists(dest_ + ".part"));
  std::vector<std::string> ranges = server.ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=70000-");
}

TEST_F(DownloadTest, ContinuesPartFileFromEarlierRun) {
  const std::string body = PatternBytes(30000);
  TestHttpServer server({{"/file.bin", body}});
  WriteFileAtomically(dest_ + ".part", body.substr(0, 12345));
  DownloadFile(server.Url(), dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), body);
  ASSERT_EQ(server.ranges().size(), 1u);
  EXPECT_EQ(server.ranges()[0], "bytes=12345-");
}

TEST_F(DownloadTest, RestartsWhenServerIgnoresRange) {
  const std::string body = PatternBytes(30000);
  TestHttpServer server({{"/file.bin", body}});
  server.ignore_range = true;
  // A stale .part that is not a prefix of the body: must be discarded.
  WriteFileAtomically(dest_ + ".part", std::string(777, 'x'));
  DownloadFile(server.Url(), dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), body);
  ASSERT_EQ(server.ranges().size(), 1u);
  EXPECT_EQ(server.ranges()[0], "bytes=777-");
}

TEST_F(DownloadTest, NotFoundFailsAtOnceWithUrlAndStatus) {
  TestHttpServer server({{"/file.bin", PatternBytes(100)}});
  const std::string url = server.Url("/missing.gz");
  try {
    DownloadFile(url, dest_, FastOptions());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(url), std::string::npos) << msg;
    EXPECT_NE(msg.find("HTTP status 404"), std::string::npos) << msg;
  }
  EXPECT_EQ(server.num_requests(), 1);
  EXPECT_FALSE(PathExists(dest_));
  EXPECT_FALSE(PathExists(dest_ + ".part"));
}

TEST_F(DownloadTest, ConnectionRefusedIsRetriedThenNamed) {
  int port;
  {
    TestHttpServer server({{"/file.bin", std::string()}});
    port = server.port();
  }  // closed: nothing listens on `port` now
  const std::string url =
      "http://127.0.0.1:" + std::to_string(port) + "/file.bin";
  try {
    DownloadFile(url, dest_, FastOptions().max_attempts(2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(url), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 attempts"), std::string::npos) << msg;
  }
  EXPECT_FALSE(PathExists(dest_));
}

TEST_F(DownloadTest, FileUrl) {
  const std::string body = PatternBytes(4000);
  const std::string src = JoinPath(dir_, "src.bin");
  WriteFileAtomically(src, body);
  DownloadFile("file://" + src, dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), body);
  EXPECT_FALSE(PathExists(dest_ + ".part"));

  const std::string missing = "file://" + JoinPath(dir_, "missing.bin");
  try {
    DownloadFile(missing, JoinPath(dir_, "out2"), FastOptions());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(PathExists(JoinPath(dir_, "out2")));
}

// The message of the error DownloadFile(url, dest) throws under the faults
// of `spec` (SLIMTORCH_FAULT_INJECT's syntax), or "(no error)".
std::string DownloadErrorUnder(const std::string& spec, const std::string& url,
                               const std::string& dest) {
  testing::ScopedFileFaults faults(spec);
  try {
    DownloadFile(url, dest, FastOptions());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Storage faults through the file layer's seam (SLIMTORCH_FAULT_INJECT):
// a disk that fills during a file:// copy leaves neither the file nor its
// .part.
TEST_F(DownloadTest, DiskFullDuringFileCopyLeavesNothing) {
  const std::string src = JoinPath(dir_, "src.bin");
  WriteFileAtomically(src, PatternBytes(5000));
  const std::string msg = DownloadErrorUnder("write:*/file.bin:1000:ENOSPC",
                                             "file://" + src, dest_);
  EXPECT_NE(
      msg.find("cannot write '" + dest_ + ".part': " + std::strerror(ENOSPC)),
      std::string::npos)
      << msg;
  EXPECT_FALSE(PathExists(dest_));
  EXPECT_FALSE(PathExists(dest_ + ".part"));
}

// Over HTTP the bytes written before the disk filled stay in the .part (the
// error says so), and the next run continues them with a Range request.
TEST_F(DownloadTest, DiskFullDuringHttpKeepsThePartForTheNextRun) {
  const std::string body = PatternBytes(30000);
  TestHttpServer server({{"/file.bin", body}});
  const std::string msg =
      DownloadErrorUnder("write:*/file.bin:12000:ENOSPC", server.Url(), dest_);
  EXPECT_NE(msg.find(server.Url()), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::strerror(ENOSPC)), std::string::npos) << msg;
  EXPECT_NE(msg.find("partial data kept in '" + dest_ + ".part'"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(PathExists(dest_));
  EXPECT_EQ(ReadFileToString(dest_ + ".part"), body.substr(0, 12000));
  DownloadFile(server.Url(), dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), body);
  EXPECT_FALSE(PathExists(dest_ + ".part"));
  const std::vector<std::string> ranges = server.ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[1], "bytes=12000-");
}

// A failed fsync or rename of the finished .part leaves no file under the
// final name; the error names the operation's file.
TEST_F(DownloadTest, FailedSyncOrRenameLeavesNoFinalFile) {
  const std::string src = "file://" + JoinPath(dir_, "src.bin");
  WriteFileAtomically(src.substr(7), PatternBytes(3000));
  std::string msg = DownloadErrorUnder("fsync:*/file.bin:0:EIO", src, dest_);
  EXPECT_NE(
      msg.find("cannot write '" + dest_ + ".part': " + std::strerror(EIO)),
      std::string::npos)
      << msg;
  EXPECT_FALSE(PathExists(dest_));
  msg = DownloadErrorUnder("rename:*/file.bin:0:EROFS", src, dest_);
  EXPECT_NE(msg.find("cannot rename '" + dest_ + ".part' to '" + dest_ +
                     "': " + std::strerror(EROFS)),
            std::string::npos)
      << msg;
  EXPECT_FALSE(PathExists(dest_));
  DownloadFile(src, dest_, FastOptions());
  EXPECT_EQ(ReadFileToString(dest_), PatternBytes(3000));
}

TEST_F(DownloadTest, RejectsUnsupportedScheme) {
  EXPECT_THROW(DownloadFile("ftp://example.com/x", dest_, FastOptions()),
               Error);
}

TEST(FileUrlTest, ToPath) {
  EXPECT_EQ(FileUrlToPath("file:///a/b.gz"), "/a/b.gz");
  EXPECT_EQ(FileUrlToPath("file://localhost/a/"), "/a/");
  EXPECT_TRUE(IsFileUrl("FILE:///x"));
  EXPECT_FALSE(IsFileUrl("http://x"));
  EXPECT_THROW(FileUrlToPath("file://relative/x"), Error);
  EXPECT_THROW(FileUrlToPath("http://x/y"), Error);
}

}  // namespace
}  // namespace slimtorch
