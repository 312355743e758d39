// TensorFlow checkpoints without TensorFlow: the table format (round trips,
// corruption), our V2 writer read back, path resolution and bad input.
// TensorFlow's own bytes: tf_checkpoint_golden_test.cc.
#include "slimtorch/io/tf_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/sstable.h"
#include "test_util.h"

namespace slimtorch {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(SstableTest, RoundTripAcrossBlocksAndRestarts) {
  for (size_t block_size : {64, 4096, 262144}) {
    sstable::Builder b(block_size);
    std::vector<std::pair<std::string, std::string>> entries;
    for (int i = 0; i < 300; ++i) {
      // Shared prefixes (restarts matter), keys of any byte, empty values.
      std::string key = "scope/" + std::to_string(1000 + i) + "/w";
      if (i % 7 == 0) key += std::string("\x00\xff", 2);
      entries.emplace_back(key,
                           std::string(i % 5, static_cast<char>('a' + i % 26)));
    }
    std::sort(entries.begin(), entries.end());
    entries.insert(entries.begin(), {"", "header"});
    for (const auto& e : entries) b.Add(e.first, e.second);
    const std::string table = b.Finish();
    ASSERT_TRUE(sstable::HasTableMagic(table.data(), table.size()));
    std::vector<std::pair<std::string, std::string>> read;
    sstable::ForEachEntry(table.data(), table.size(), "t",
                          [&](std::string_view k, std::string_view v) {
                            read.emplace_back(std::string(k), std::string(v));
                          });
    EXPECT_EQ(read, entries) << block_size;
  }
}

TEST(SstableTest, EmptyTableIsTensorFlowsBytes) {
  // LevelDB's empty table, worked by hand: an empty meta-index block and an
  // empty index block (each: restart 0, count 1, type 0, masked CRC), then
  // the footer (handles 0/8 and 13/8, zero padding, magic).
  sstable::Builder b;
  const std::string t = b.Finish();
  ASSERT_EQ(t.size(), 13u + 13u + 48u);
  EXPECT_EQ(t.substr(0, 8), std::string("\0\0\0\0\1\0\0\0", 8));
  EXPECT_EQ(t[8], '\0');  // uncompressed
  EXPECT_EQ(t.substr(26, 4), std::string("\x00\x08\x0d\x08", 4));
  EXPECT_EQ(t.substr(t.size() - 8),
            std::string("\x57\xfb\x80\x8b\x24\x75\x47\xdb", 8));
  int n = 0;
  sstable::ForEachEntry(t.data(), t.size(), "t",
                        [&](std::string_view, std::string_view) { ++n; });
  EXPECT_EQ(n, 0);
}

TEST(SstableTest, CorruptionAndTruncationAreNamed) {
  sstable::Builder b;
  b.Add("a", "1");
  b.Add("b", std::string(100, 'x'));
  const std::string t = b.Finish();
  auto read = [](const std::string& bytes) {
    sstable::ForEachEntry(bytes.data(), bytes.size(), "'x.index'",
                          [](std::string_view, std::string_view) {});
  };
  for (size_t i = 0; i < t.size() - 8; ++i) {  // every byte but the magic
    std::string bad = t;
    bad[i] ^= 0x20;
    // Either a clear error or (a padding byte of the footer) no change in
    // what is read; never a crash.
    try {
      read(bad);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'x.index'"), std::string::npos);
    }
  }
  std::string bad = t;
  bad[5] ^= 1;  // inside the data block
  EXPECT_ERROR_CONTAINS(read(bad), "'x.index'", "CRC mismatch", "data block");
  EXPECT_ERROR_CONTAINS(read(t.substr(0, t.size() - 1)), "'x.index'",
                        "no table footer magic");
  EXPECT_ERROR_CONTAINS(read("not a table at all, just some words of text "
                             "long enough to hold a footer."),
                        "not a TensorFlow checkpoint table");
  sstable::Builder order;
  order.Add("b", "");
  EXPECT_ERROR_CONTAINS(order.Add("a", ""), "keys must increase");
}

NamedTensors EveryDtype() {
  NamedTensors t;
  t.push_back({"scope/weights",
               torch::arange(72, torch::kFloat).reshape({3, 3, 2, 4}) / 7});
  t.push_back({"scope/biases", torch::tensor({1.5f, -2.f, 0.f, 1e-30f})});
  t.push_back({"f64", torch::tensor({{1.0, -2.5, 3e300}, {0.0, -0.0, 1e-300}},
                                    torch::kDouble)});
  t.push_back({"i32", torch::tensor({-1, 0, 2147483647, -2147483647 - 1, 5},
                                    torch::kInt)});
  t.push_back({"i64", torch::tensor({int64_t{1} << 40, -(int64_t{1} << 50)},
                                    torch::kLong)});
  t.push_back({"u8", torch::tensor({0, 1, 254, 255}, torch::kByte)});
  t.push_back({"i8", torch::tensor({-128, -1, 0, 127}, torch::kChar)});
  t.push_back({"i16", torch::tensor({-32768, 7, 32767}, torch::kShort)});
  t.push_back({"b", torch::tensor({true, false, true})});
  t.push_back({"h", torch::tensor({0.5f, -1.25f, 65504.f}).to(torch::kHalf)});
  t.push_back(
      {"bf", torch::tensor({0.5f, -1.25f, 3.0e38f}).to(torch::kBFloat16)});
  t.push_back({"scalar", torch::tensor(3.25f)});
  t.push_back({"empty", torch::zeros({0, 3})});
  t.push_back({"global_step", torch::tensor(int64_t{1234})});
  return t;
}

TEST(TfCheckpointTest, WrittenBundleReadsBackExactly) {
  TempDir dir;
  const std::string prefix = dir.Join("run/model.ckpt-1234");
  const NamedTensors tensors = EveryDtype();
  SaveTfCheckpoint(prefix, tensors);
  EXPECT_TRUE(PathExists(prefix + ".index"));
  EXPECT_TRUE(PathExists(prefix + ".data-00000-of-00001"));
  TfCheckpointReader reader(prefix);
  EXPECT_EQ(reader.format(), TfCheckpointFormat::kV2);
  ASSERT_EQ(reader.tensors().size(), tensors.size());
  for (size_t i = 1; i < reader.tensors().size(); ++i) {
    EXPECT_LT(reader.tensors()[i - 1].name, reader.tensors()[i].name);
  }
  for (const NamedTensor& t : tensors) {
    const TfTensorInfo* info = reader.Find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_TRUE(info->supported);
    EXPECT_EQ(info->shape, t.tensor.sizes().vec()) << t.name;
    const torch::Tensor read = reader.Read(t.name);
    EXPECT_EQ(read.scalar_type(), t.tensor.scalar_type()) << t.name;
    EXPECT_TRUE(torch::equal(read, t.tensor)) << t.name;
  }
  EXPECT_EQ(reader.ReadAll().size(), tensors.size());
  EXPECT_EQ(reader.Find("nope"), nullptr);
  EXPECT_ERROR_CONTAINS(reader.Read("nope"), "has no tensor 'nope'");

  // Writing what was read gives the same bytes.
  SaveTfCheckpoint(dir.Join("copy"), reader.ReadAll());
  EXPECT_EQ(ReadFileToString(dir.Join("copy.index")),
            ReadFileToString(prefix + ".index"));
  EXPECT_EQ(ReadFileToString(dir.Join("copy.data-00000-of-00001")),
            ReadFileToString(prefix + ".data-00000-of-00001"));
}

TEST(TfCheckpointTest, PathsResolveAsTensorFlowResolvesThem) {
  TempDir dir;
  const std::string prefix = dir.Join("model.ckpt-7");
  SaveTfCheckpoint(prefix, {{"w", torch::ones({2})}});
  for (const std::string& p : {prefix, prefix + ".index",
                               prefix + ".data-00000-of-00001", dir.path()}) {
    if (p == dir.path()) {
      EXPECT_FALSE(FindTfCheckpoint(p).has_value());  // no "checkpoint" yet
      WriteFileAtomically(dir.Join("checkpoint"),
                          "model_checkpoint_path: \"model.ckpt-7\"\n"
                          "all_model_checkpoint_paths: \"model.ckpt-7\"\n");
    }
    const auto loc = FindTfCheckpoint(p);
    ASSERT_TRUE(loc.has_value()) << p;
    EXPECT_EQ(loc->prefix, prefix) << p;
    EXPECT_EQ(loc->format, TfCheckpointFormat::kV2);
    EXPECT_EQ(TfCheckpointReader(p).Read("w").sum().item<float>(), 2.f);
  }
  EXPECT_FALSE(FindTfCheckpoint(dir.Join("model.ckpt-8")).has_value());
  EXPECT_ERROR_CONTAINS(TfCheckpointReader{dir.Join("model.ckpt-8")},
                        "no TensorFlow checkpoint at",
                        "model.ckpt-8.index' (V2)", "(V1)", "sharded V1");
  // A file that is not a checkpoint is not taken for a V1 one.
  WriteFileAtomically(dir.Join("notes.ckpt"), std::string(100, 'x'));
  EXPECT_FALSE(FindTfCheckpoint(dir.Join("notes.ckpt")).has_value());
}

TEST(TfCheckpointTest, BadBundlesAreClearErrors) {
  TempDir dir;
  const std::string prefix = dir.Join("m");
  SaveTfCheckpoint(prefix, EveryDtype());
  const std::string data_path = prefix + ".data-00000-of-00001";
  const std::string data = ReadFileToString(data_path);

  // A flipped byte in a tensor: its CRC fails, naming it and the file.
  std::string flipped = data;
  flipped[0] ^= 1;  // "b" (bool) comes first in name order
  WriteFileAtomically(data_path, flipped);
  {
    TfCheckpointReader reader(prefix);
    EXPECT_ERROR_CONTAINS(reader.Read("b"), data_path,
                          "CRC mismatch for tensor 'b'");
    EXPECT_NO_THROW(reader.Read("scope/weights"));
  }
  // A truncated shard: the tensors past the end name the file.
  WriteFileAtomically(data_path, data.substr(0, data.size() - 10));
  {
    TfCheckpointReader reader(prefix);
    EXPECT_ERROR_CONTAINS(reader.Read("scope/weights"), data_path,
                          "is truncated", "tensor 'scope/weights'");
  }
  // A missing shard.
  fs::remove(data_path);
  EXPECT_ERROR_CONTAINS(TfCheckpointReader{prefix}, "missing its data shard",
                        data_path);
  // An index that is not a checkpoint's.
  WriteFileAtomically(data_path, data);
  sstable::Builder other;
  other.Add("key", "value");
  WriteFileAtomically(prefix + ".index", other.Finish());
  EXPECT_ERROR_CONTAINS(TfCheckpointReader{prefix}, prefix + ".index",
                        "no bundle header");
  WriteFileAtomically(prefix + ".index", std::string(200, '\x07'));
  EXPECT_ERROR_CONTAINS(TfCheckpointReader{prefix}, prefix + ".index",
                        "not a TensorFlow checkpoint table");
}

TEST(TfCheckpointTest, WriterLeavesNothingOnError) {
  TempDir dir;
  const std::string prefix = dir.Join("m");
  EXPECT_ERROR_CONTAINS(
      SaveTfCheckpoint(prefix, {{"a", torch::ones({2})},
                                {"z", torch::ones({2}, torch::kComplexFloat)}}),
      "tensor 'z'", "cannot hold");
  EXPECT_ERROR_CONTAINS(SaveTfCheckpoint(prefix, {{"a", torch::ones({2})},
                                                  {"a", torch::ones({1})}}),
                        "'a' given twice");
  EXPECT_TRUE(Glob(dir.Join("*")).empty());
}

TEST(TfCheckpointTest, SliceKeysAreTensorFlowsOrderedCode) {
  // Worked by hand from OrderedCode: 0 → "\x00"; the name, NUL escaped as
  // 00 ff and 0xff as ff 00, then 00 01; rank 2 → "\x01\x02". A signed
  // number of L bytes starts with L one-bits, then its sign bit, then its
  // two's complement: start 0 → 0x80, length -1 → 0x7f, 3 → 0x83, 4 → 0x84;
  // 100 (7 bits) takes two bytes, 110 + 0x0064 → c0 64; -65 takes two,
  // 0xffbf with the header bits flipped by 0xc0 → 3f bf.
  EXPECT_EQ(TfSliceKey("v", {{0, -1}, {3, 4}}),
            std::string("\x00v\x00\x01\x01\x02\x80\x7f\x83\x84", 10));
  EXPECT_EQ(TfSliceKey(std::string("a\0b\xff", 4), {{100, 1}}),
            std::string("\x00"
                        "a\x00\xff"
                        "b\xff\x00"
                        "\x00\x01\x01\x01\xc0\x64\x81",
                        14));
  EXPECT_EQ(TfSliceKey("w", {{-65, 0}}),
            std::string("\x00w\x00\x01\x01\x01\x3f\xbf\x80", 9));
}

}  // namespace
}  // namespace slimtorch
