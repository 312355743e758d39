#include "slimtorch/io/tfrecord.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

using testing_io::GoldenPath;
using testing_io::ScratchDir;

// The records of tests/golden/tf_records.tfrecord (RECORDS in
// scripts/golden/make_tf_goldens.py).
std::vector<std::string> GoldenRecords() {
  std::string all(256, '\0');
  for (int i = 0; i < 256; ++i) all[i] = static_cast<char>(i);
  return {"", "hello", all, std::string(1000, 'x')};
}

std::vector<std::string> ReadAll(const std::string& path) {
  TFRecordReader reader(path);
  std::vector<std::string> out;
  std::string record;
  while (reader.Read(&record)) out.push_back(record);
  return out;
}

void WriteAll(const std::string& path, const std::vector<std::string>& recs) {
  TFRecordWriter writer(path);
  for (const auto& r : recs) writer.Write(r);
  EXPECT_EQ(writer.num_records(), recs.size());
  writer.Close();
}

TEST(TFRecordTest, RoundTripEmptySmallAndLargeRecords) {
  ScratchDir dir;
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31);
  const std::vector<std::string> records = {"", "a", std::string(3, '\0'), big,
                                            "tail"};
  const std::string path = dir.File("rt.tfrecord");
  WriteAll(path, records);
  EXPECT_EQ(ReadAll(path), records);
  EXPECT_EQ(CountTFRecords(path), records.size());

  TFRecordReader reader(path);
  std::string r;
  ASSERT_TRUE(reader.Read(&r));
  EXPECT_EQ(reader.offset(), 16u);
  EXPECT_EQ(reader.record_index(), 1u);
}

TEST(TFRecordTest, EmptyFileHasNoRecords) {
  ScratchDir dir;
  WriteAll(dir.File("empty.tfrecord"), {});
  EXPECT_TRUE(ReadAll(dir.File("empty.tfrecord")).empty());
}

TEST(TFRecordTest, ReadsTensorFlowGolden) {
  EXPECT_EQ(ReadAll(GoldenPath("tf_records.tfrecord")), GoldenRecords());
}

TEST(TFRecordTest, WriterReproducesTensorFlowGoldenBytes) {
  ScratchDir dir;
  WriteAll(dir.File("ours.tfrecord"), GoldenRecords());
  const std::string golden =
      ReadFileToString(GoldenPath("tf_records.tfrecord"));
  EXPECT_EQ(ReadFileToString(dir.File("ours.tfrecord")), golden);
  std::string framed;
  for (const auto& r : GoldenRecords()) framed += FrameTFRecord(r);
  EXPECT_EQ(framed, golden);
}

constexpr size_t kNoFlip = std::string::npos;
constexpr size_t kAll = std::string::npos;

// Writes the golden records with one byte changed (or the file cut) and
// returns the path.
std::string Corrupted(const ScratchDir& dir, size_t flip_at, size_t keep) {
  std::string bytes = ReadFileToString(GoldenPath("tf_records.tfrecord"));
  if (flip_at < bytes.size()) bytes[flip_at] ^= 0x01;
  bytes.resize(std::min(keep, bytes.size()));
  const std::string path = dir.File("bad.tfrecord");
  WriteFileAtomically(path, bytes);
  return path;
}

// Offsets of the golden records: 0 (""), 16 ("hello"), 37 (256 bytes), 309.
constexpr size_t kThirdRecord = 16 + 21;

TEST(TFRecordTest, FlippedDataByteIsDataCrcErrorWithOffset) {
  ScratchDir dir;
  const std::string path = Corrupted(dir, kThirdRecord + 12 + 100, kAll);
  EXPECT_ERROR_CONTAINS(ReadAll(path), path, "data CRC", "record 2",
                        "byte offset 37");
  // Without CRC verification the record is returned as is.
  TFRecordReader reader(path, /*verify_crc=*/false);
  std::string r;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reader.Read(&r));
  EXPECT_EQ(static_cast<uint8_t>(r[100]), 101u);
  EXPECT_EQ(CountTFRecords(path), 4u);
}

TEST(TFRecordTest, FlippedLengthByteIsLengthCrcError) {
  ScratchDir dir;
  const std::string path = Corrupted(dir, kThirdRecord + 1, kAll);
  EXPECT_ERROR_CONTAINS(ReadAll(path), path, "length CRC", "record 2",
                        "byte offset 37");
  EXPECT_ERROR_CONTAINS(CountTFRecords(path), "length CRC");
}

TEST(TFRecordTest, FlippedCrcBytesAreDetected) {
  ScratchDir dir;
  EXPECT_ERROR_CONTAINS(ReadAll(Corrupted(dir, kThirdRecord + 9, kAll)),
                        "length CRC");
  EXPECT_ERROR_CONTAINS(
      ReadAll(Corrupted(dir, kThirdRecord + 12 + 256 + 2, kAll)), "data CRC");
}

TEST(TFRecordTest, TruncatedHeaderAndDataAreReportedWithOffset) {
  ScratchDir dir;
  EXPECT_ERROR_CONTAINS(ReadAll(Corrupted(dir, kNoFlip, kThirdRecord + 5)),
                        "truncated", "record 2", "byte offset 37");
  EXPECT_ERROR_CONTAINS(
      ReadAll(Corrupted(dir, kNoFlip, kThirdRecord + 12 + 50)), "truncated",
      "record 2", "byte offset 37");
  // Data complete but the footer CRC cut.
  EXPECT_ERROR_CONTAINS(
      ReadAll(Corrupted(dir, kNoFlip, kThirdRecord + 12 + 258)), "truncated",
      "byte offset 37");
  EXPECT_ERROR_CONTAINS(
      CountTFRecords(Corrupted(dir, kNoFlip, kThirdRecord + 3)), "truncated");
}

TEST(TFRecordTest, MissingFileNamesThePath) {
  EXPECT_ERROR_CONTAINS(TFRecordReader("/nonexistent/x.tfrecord"),
                        "/nonexistent/x.tfrecord");
}

TEST(TFRecordTest, UnclosedWriterLeavesNoFile) {
  ScratchDir dir;
  const std::string path = dir.File("partial.tfrecord");
  {
    TFRecordWriter writer(path);
    writer.Write("some data");
    EXPECT_FALSE(PathExists(path));
  }
  EXPECT_FALSE(PathExists(path));
  EXPECT_TRUE(Glob(dir.File("*")).empty());
}

TEST(TFRecordTest, CloseMakesFileAppearAtomically) {
  ScratchDir dir;
  const std::string path = dir.File("done.tfrecord");
  TFRecordWriter writer(path);
  writer.Write("r");
  EXPECT_FALSE(PathExists(path));
  writer.Close();
  EXPECT_TRUE(PathExists(path));
  EXPECT_EQ(Glob(dir.File("*")), std::vector<std::string>{path});
  EXPECT_ERROR_CONTAINS(writer.Write("late"), path);
}

}  // namespace
}  // namespace slimtorch
