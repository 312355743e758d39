#include <gtest/gtest.h>

#include <functional>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/registry.h"
#include "test_util.h"

namespace slimtorch {
namespace {

TEST(RegistryTest, UnknownNameListsSortedNamesAndDuplicatesFail) {
  Registry<std::function<int()>> r("widget");
  r.Register("zeta", [] { return 1; });
  r.Register("alpha", [] { return 2; });
  EXPECT_EQ(r.Get("alpha")(), 2);
  EXPECT_EQ(r.Names(), (std::vector<std::string>{"alpha", "zeta"}));
  try {
    r.Get("beta");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown widget name 'beta'; valid names: alpha, zeta");
  }
  EXPECT_THROW(r.Register("zeta", [] { return 3; }), Error);
  EXPECT_THROW(r.Register("", [] { return 3; }), Error);
}

TEST(AtomicFileWriterTest, NothingUnderTheFinalNameUntilCommit) {
  testing::TempDir dir;
  std::string path = dir.Join("out.bin");
  {
    AtomicFileWriter w(path);
    w.Write("partial");
    EXPECT_FALSE(PathExists(path));
  }  // destroyed without Commit
  EXPECT_FALSE(PathExists(path));
  EXPECT_TRUE(Glob(dir.Join("*")).empty());  // temporary removed too
  AtomicFileWriter w(path);
  w.Write("hello ");
  w.Write(std::string("world"));
  EXPECT_EQ(w.offset(), 11u);
  w.Commit();
  EXPECT_EQ(ReadFileToString(path), "hello world");
  EXPECT_EQ(Glob(dir.Join("*")), std::vector<std::string>{path});
}

TEST(FileUtilTest, PathsGlobAndWritableDirs) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  testing::TempDir dir;
  WriteFileAtomically(dir.Join("x_2"), "2");
  WriteFileAtomically(dir.Join("x_1"), "1");
  EXPECT_EQ(Glob(dir.Join("x_*")),
            (std::vector<std::string>{dir.Join("x_1"), dir.Join("x_2")}));
  CheckDirWritable(dir.Join("new/sub"), "--train_dir");
  EXPECT_TRUE(PathExists(dir.Join("new/sub")));
  try {
    CheckDirWritable(dir.Join("x_1/sub"), "--train_dir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--train_dir '" + dir.Join("x_1/sub") +
                                         "' is not writable"),
              std::string::npos);
  }
  EXPECT_THROW(ReadFileToString(dir.Join("missing")), Error);
}

}  // namespace
}  // namespace slimtorch
