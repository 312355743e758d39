#include "slimtorch/io/labels_file.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

using testing_io::ScratchDir;

TEST(LabelsFileTest, RoundTripInTfSlimFormat) {
  ScratchDir dir;
  const std::map<int64_t, std::string> labels = {
      {0, "daisy"}, {1, "dandelion"}, {2, "roses"}, {10, "a:b c"}};
  WriteLabelsFile(labels, dir.path());
  const std::string path = dir.File(kLabelsFilename);
  EXPECT_EQ(ReadFileToString(path),
            "0:daisy\n1:dandelion\n2:roses\n10:a:b c\n");
  EXPECT_EQ(ReadLabelsFile(path), labels);
  WriteLabelsFile(labels, dir.path(), "other.txt");
  EXPECT_EQ(ReadLabelsFile(dir.File("other.txt")), labels);
}

TEST(LabelsFileTest, ParsesLikeTfSlim) {
  ScratchDir dir;
  const std::string path = dir.File("labels.txt");
  // Split at the first ':', empty lines skipped, no trailing newline needed,
  // CRLF line ends tolerated, the name kept verbatim (spaces included).
  WriteFileAtomically(path, "\n3:x:y\n\n-1: spaced name \r\n5:\n7:last");
  const std::map<int64_t, std::string> want = {
      {3, "x:y"}, {-1, " spaced name "}, {5, ""}, {7, "last"}};
  EXPECT_EQ(ReadLabelsFile(path), want);
}

TEST(LabelsFileTest, ErrorsNameFileAndLine) {
  ScratchDir dir;
  const std::string path = dir.File("labels.txt");
  WriteFileAtomically(path, "0:a\n\nno colon here\n");
  EXPECT_ERROR_CONTAINS(ReadLabelsFile(path), path + ":3", "no colon here");
  WriteFileAtomically(path, "0:a\n1x:b\n");
  EXPECT_ERROR_CONTAINS(ReadLabelsFile(path), path + ":2", "'1x'",
                        "not an integer");
  WriteFileAtomically(path, ":nameless\n");
  EXPECT_ERROR_CONTAINS(ReadLabelsFile(path), path + ":1", "not an integer");
  WriteFileAtomically(path, "1:a\n1:b\n");
  EXPECT_ERROR_CONTAINS(ReadLabelsFile(path), path + ":2", "twice");
  EXPECT_ERROR_CONTAINS(ReadLabelsFile(dir.File("missing.txt")),
                        dir.File("missing.txt"));
}

TEST(LabelsFileTest, NewlineInNameIsRejected) {
  ScratchDir dir;
  EXPECT_ERROR_CONTAINS(WriteLabelsFile({{4, "a\nb"}}, dir.path()), "class 4",
                        "newline");
  // Found by the labels_file fuzz target (tests/fuzz/regressions/): a name
  // ending in '\r' lost it on the way back (CRLF lines drop one).
  EXPECT_ERROR_CONTAINS(WriteLabelsFile({{0, "To\r\r"}}, dir.path()),
                        "class 0", "carriage return");
  EXPECT_FALSE(PathExists(dir.File(kLabelsFilename)));
}

}  // namespace
}  // namespace slimtorch
