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

TEST(RegistryTest, AnAliasNamesItsTargetWhicheverRegistersFirst) {
  Registry<std::function<int()>> r("widget");
  r.Alias("early", "gadget");  // before its target
  EXPECT_FALSE(r.Has("early"));
  EXPECT_EQ(r.Names(), std::vector<std::string>{});
  r.Register("gadget", [] { return 7; });
  r.Alias("late", "gadget");  // after it
  r.Alias("orphan", "missing");
  EXPECT_TRUE(r.Has("early"));
  EXPECT_EQ(r.Get("early")(), 7);
  EXPECT_EQ(r.Get("late")(), 7);
  EXPECT_EQ(r.Resolve("late"), "gadget");
  EXPECT_EQ(r.Resolve("gadget"), "gadget");
  EXPECT_FALSE(r.Has("orphan"));
  EXPECT_EQ(r.Names(), (std::vector<std::string>{"early", "gadget", "late"}));
  try {
    r.Get("orphan");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown widget name 'orphan'; valid names: early, gadget, "
                 "late");
  }
  EXPECT_THROW(r.Alias("late", "gadget"), Error);             // twice
  EXPECT_THROW(r.Alias("gadget", "late"), Error);             // an entry's name
  EXPECT_THROW(r.Register("late", [] { return 1; }), Error);  // an alias's
  EXPECT_THROW(r.Alias("self", "self"), Error);
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
