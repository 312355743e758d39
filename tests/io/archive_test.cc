#include "slimtorch/io/archive.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "io/archive_test_util.h"
#include "io/io_test_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "test_util.h"

namespace slimtorch {
namespace {
using testing_util::TarEntry;
using testing_util::WriteTarGz;

std::string ErrorOf(const std::string& archive,
                    const std::vector<std::string>& wanted) {
  try {
    ReadArchiveMembers(archive, wanted);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ArchiveTest, ReadsWantedMembersOnly) {
  testing::TempDir dir;
  const std::string path = dir.Join("a.tar.gz");
  std::string big(200000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31);
  WriteTarGz(path, {{"top", "", TarEntry::kDir},
                    {"top/a.bin", big},
                    {"./top/b.txt", "hello\n"},
                    {"top/c", "unwanted"},
                    {"top/link", "", TarEntry::kSymlink, "a.bin"},
                    {"top/hard", "", TarEntry::kHardlink, "top/a.bin"}});
  auto members = ReadArchiveMembers(path, {"top/a.bin", "top/b.txt"});
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members["top/a.bin"], big);
  EXPECT_EQ(members["top/b.txt"], "hello\n");
}

TEST(ArchiveTest, LacksMemberListsWhatIsMissingAndTopLevel) {
  testing::TempDir dir;
  const std::string path = dir.Join("a.tar.gz");
  WriteTarGz(path, {{"other/x", "1"}});
  EXPECT_EQ(ErrorOf(path, {"top/a", "top/b"}),
            "archive '" + path +
                "' lacks 'top/a', 'top/b' (its top-level entries: 'other')");
}

TEST(ArchiveTest, RefusesEntriesLeavingTheTarget) {
  testing::TempDir dir;
  struct Case {
    TarEntry entry;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"../evil", "x"}, "entry '../evil' has a '..' component"},
      {{"top/../../evil", "x"}, "entry 'top/../../evil' has a '..' component"},
      {{"/etc/evil", "x"}, "entry '/etc/evil' has an absolute path"},
      {{"top/l", "", TarEntry::kSymlink, "../../etc"},
       "entry 'top/l' is a symlink to '../../etc', which would leave"},
      {{"top/l", "", TarEntry::kSymlink, "/etc/passwd"},
       "entry 'top/l' is a symlink to the absolute path '/etc/passwd'"},
      {{"top/h", "", TarEntry::kHardlink, "../outside"},
       "entry 'top/h' is a hardlink to '../outside', which would leave"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.Join("bad.tar.gz");
    WriteTarGz(path, {{"top/a", "1"}, c.entry});
    // Checked even when the entry is not wanted.
    std::string error = ErrorOf(path, {"top/a"});
    EXPECT_NE(error.find("archive '" + path + "': " + c.error),
              std::string::npos)
        << error;
  }
  // A symlink inside its folder tree is fine.
  EXPECT_NO_THROW(CheckArchiveEntryPath("x", "top/sub/l", "../a", true));
  EXPECT_THROW(CheckArchiveEntryPath("x", "top/l", "../../a", true), Error);
  EXPECT_THROW(CheckArchiveEntryPath("x", "", ""), Error);
  // Found by the archive fuzz target (tests/fuzz/regressions/archive/): a
  // symlink named "." or "././" had no folder to be relative to.
  for (const char* root : {".", "./", "././."}) {
    EXPECT_ERROR_CONTAINS(CheckArchiveEntryPath("x.tar", root, "vx", true),
                          "archive 'x.tar': entry '", root,
                          "' is a symlink in place of the target folder");
  }
  EXPECT_NO_THROW(CheckArchiveEntryPath("x.tar", "./", ""));  // a folder
}

TEST(ArchiveTest, TruncatedOrCorrupt) {
  testing::TempDir dir;
  const std::string path = dir.Join("t.tar.gz");
  std::string payload(100000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) {
    payload[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  WriteTarGz(path, {{"top/a", payload}, {"top/b", "tail"}});
  std::string bytes = ReadFileToString(path);
  WriteFileAtomically(path, bytes.substr(0, bytes.size() / 2));
  std::string error = ErrorOf(path, {"top/a", "top/b"});
  EXPECT_NE(error.find("archive '" + path + "' is truncated or corrupt"),
            std::string::npos)
      << error;

  WriteFileAtomically(path, "this is not an archive at all");
  error = ErrorOf(path, {"top/a"});
  EXPECT_NE(error.find(path), std::string::npos) << error;

  error = ErrorOf(dir.Join("missing.tar.gz"), {"top/a"});
  EXPECT_NE(error.find("cannot open archive '" + dir.Join("missing.tar.gz")),
            std::string::npos)
      << error;
}

TEST(ArchiveTest, WantedNameThatIsNotAFile) {
  testing::TempDir dir;
  const std::string path = dir.Join("d.tar.gz");
  WriteTarGz(path, {{"top/a", "", TarEntry::kDir}});
  EXPECT_EQ(ErrorOf(path, {"top/a"}),
            "archive '" + path + "': entry 'top/a/' is not a regular file");
}

}  // namespace
}  // namespace slimtorch
