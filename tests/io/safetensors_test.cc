#include "slimtorch/io/safetensors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

using testing_io::GoldenOutPath;
using testing_io::GoldenPath;
using testing_io::ScratchDir;

// golden_tensors() and METADATA of scripts/golden/safetensors_common.py.
CheckpointData ExpectedGoldenData() {
  CheckpointData d;
  auto add = [&](const std::string& name, torch::Tensor t) {
    d.tensors.push_back({name, t});
  };
  add("a/f64", (torch::arange(6, torch::kFloat64) * 0.5 - 1.0).reshape({2, 3}));
  add("a/f32",
      (torch::arange(6, torch::kFloat32) * 0.25 - 0.75).reshape({3, 2}));
  add("f16", torch::tensor({0.5, -1.5, 65504.0, 1.0 / 16384}).to(torch::kHalf));
  add("i64", torch::tensor({-(int64_t(1) << 40), int64_t(-1), int64_t(0),
                            (int64_t(1) << 40) + 3})
                 .reshape({2, 2}));
  add("i32", torch::tensor({-7, 0, 2147483647}, torch::kInt32));
  add("i16", torch::tensor({-32768, 32767}, torch::kInt16));
  add("i8", torch::tensor({-128, 127}, torch::kInt8));
  add("u8", torch::tensor({0, 1, 254, 255}, torch::kUInt8).reshape({2, 2}));
  add("bool", torch::tensor({true, false, true}));
  add("scalar", torch::tensor(3.5f));
  add("empty", torch::zeros({0, 4}, torch::kFloat32));
  d.metadata = {{"global_step", "1234"},
                {"model_name", "lenet"},
                {"note",
                 "quote \" backslash \\ newline \n tab \t unicode "
                 "\xc3\xa9\xe4\xb8\xad \xf0\x9f\x98\x80"}};
  return d;
}

void ExpectTensorsEqual(const torch::Tensor& got, const torch::Tensor& want,
                        const std::string& name) {
  ASSERT_TRUE(got.defined()) << name << " missing";
  EXPECT_EQ(got.scalar_type(), want.scalar_type()) << name;
  EXPECT_EQ(got.sizes(), want.sizes()) << name;
  EXPECT_TRUE(got.device().is_cpu()) << name;
  EXPECT_TRUE(got.is_contiguous()) << name;
  EXPECT_TRUE(torch::equal(got, want.cpu())) << name << "\n" << got << want;
}

void ExpectDataEqual(const CheckpointData& got, const CheckpointData& want) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (const auto& nt : want.tensors) {
    ExpectTensorsEqual(got.Find(nt.name), nt.tensor, nt.name);
  }
  EXPECT_EQ(got.metadata, want.metadata);
}

uint64_t HeaderLength(const std::string& path) {
  const std::string bytes = ReadFileToString(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  return n;
}

TEST(CheckpointTest, RoundTripEveryDtypeWithMetadata) {
  ScratchDir dir;
  CheckpointData data = ExpectedGoldenData();
  data.tensors.push_back(
      {"bf16", torch::tensor({1.0f, -2.5f, 0.0078125f}).to(torch::kBFloat16)});
  // Non-contiguous views are saved as their values.
  torch::Tensor base = torch::arange(24, torch::kFloat32).reshape({4, 6});
  data.tensors.push_back({"transposed", base.t()});
  data.tensors.push_back({"sliced", base.slice(1, 2, 5)});
  const std::string path = dir.File("all.safetensors");
  SaveCheckpoint(path, data);
  EXPECT_EQ(HeaderLength(path) % 8, 0u);

  CheckpointData loaded = LoadCheckpoint(path);
  ExpectDataEqual(loaded, data);
  // File order is the save order (data offsets ascend with it).
  for (size_t i = 0; i < data.tensors.size(); ++i) {
    EXPECT_EQ(loaded.tensors[i].name, data.tensors[i].name);
  }
  EXPECT_FALSE(loaded.Find("nope").defined());
  EXPECT_EQ(Glob(dir.File("*")), std::vector<std::string>{path});
}

TEST(CheckpointTest, EmptyCheckpointRoundTrips) {
  ScratchDir dir;
  SaveCheckpoint(dir.File("e.safetensors"), CheckpointData{});
  CheckpointData loaded = LoadCheckpoint(dir.File("e.safetensors"));
  EXPECT_TRUE(loaded.tensors.empty());
  EXPECT_TRUE(loaded.metadata.empty());
}

TEST(CheckpointTest, LoadsFileWrittenByPythonSafetensors) {
  CheckpointData loaded = LoadCheckpoint(GoldenPath("python.safetensors"));
  ExpectDataEqual(loaded, ExpectedGoldenData());
}

// Leaves <build>/golden_out/slimtorch.safetensors for
// scripts/golden/check_safetensors.py.
TEST(CheckpointTest, WritesFileForPythonCheck) {
  CheckpointData data = ExpectedGoldenData();
  data.tensors.push_back(
      {"bf16", torch::tensor({1.0f, -2.5f, 0.0078125f}).to(torch::kBFloat16)});
  const std::string path = GoldenOutPath("slimtorch.safetensors");
  SaveCheckpoint(path, data);
  ExpectDataEqual(LoadCheckpoint(path), data);
}

TEST(CheckpointTest, LargeTensorsLoadIntoOwnedStorage) {
  ScratchDir dir;
  CheckpointData data;
  data.tensors.push_back({"big", torch::rand({4, 1 << 20})});  // 16 MB
  data.tensors.push_back({"small", torch::arange(7, torch::kInt64)});
  SaveCheckpoint(dir.File("big.safetensors"), data);
  const auto start = std::chrono::steady_clock::now();
  CheckpointData loaded = LoadCheckpoint(dir.File("big.safetensors"));
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  ExpectDataEqual(loaded, data);
  EXPECT_LT(ms, 5000.0);
  // Tensors own separate storage (modifying one leaves the other intact).
  loaded.tensors[0].tensor.zero_();
  EXPECT_TRUE(torch::equal(loaded.tensors[1].tensor, data.tensors[1].tensor));
}

// Manual benchmark: ./slimtorch_tests --gtest_also_run_disabled_tests
//   --gtest_filter='*LoadSpeed*'  (writes and reads a 400 MB checkpoint).
TEST(CheckpointTest, DISABLED_LoadSpeed) {
  ScratchDir dir;
  CheckpointData data;
  for (int i = 0; i < 100; ++i) {
    data.tensors.push_back(
        {"layer" + std::to_string(i), torch::rand({1024, 1024})});
  }
  const std::string path = dir.File("speed.safetensors");
  SaveCheckpoint(path, data);
  const auto start = std::chrono::steady_clock::now();
  CheckpointData loaded = LoadCheckpoint(path);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("loaded 400 MB in %.3f s (%.0f MB/s)\n", s, 400 / s);
  ExpectDataEqual(loaded, data);
}

// ----------------------------------------------------------- bad files

std::string LittleEndian64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// Writes a safetensors file with the given header and data bytes.
std::string MakeFile(const ScratchDir& dir, const std::string& header,
                     const std::string& data, const std::string& name = "bad") {
  const std::string path = dir.File(name + ".safetensors");
  WriteFileAtomically(path, LittleEndian64(header.size()) + header + data);
  return path;
}

const char kOneF32[] =
    R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(CheckpointTest, HandWrittenHeaderWithWhitespaceAndEscapesParses) {
  ScratchDir dir;
  const std::string header =
      " {\n \"__metadata__\" : { \"k\\u00e9\\/\" : \"\\ud83d\\ude00\\n\\\"\" } "
      ","
      "\t\"b\\\\a\" : {\"data_offsets\":[0,3],\"shape\":[3],\"dtype\":\"U8\"}}"
      "   ";
  CheckpointData d = LoadCheckpoint(MakeFile(dir, header, "\x01\x02\x03"));
  ASSERT_EQ(d.tensors.size(), 1u);
  EXPECT_EQ(d.tensors[0].name, "b\\a");
  EXPECT_EQ(d.tensors[0].tensor.sum().item<int64_t>(), 6);
  EXPECT_EQ(d.metadata.at("k\xc3\xa9/"), "\xf0\x9f\x98\x80\n\"");
}

TEST(CheckpointTest, CorruptedHeadersAreClearErrors) {
  ScratchDir dir;
  const std::string data(8, '\0');
  struct Case {
    std::string header;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", "expected"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x)",
       "unexpected data after"},
      {R"([1,2])", "expected '{'"},
      {R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})",
       "unsupported dtype 'F8_E4M3'"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
       "non-negative integer"},
      {R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})",
       "fraction"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", "missing \"data_offsets\""},
      {R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", "missing \"shape\""},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})",
       "unknown field \"x\""},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})",
       "must hold 2 integers"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "tensor 'w' appears twice"},
      {R"({"__metadata__":{"k":1},"w":{"dtype":"U8","shape":[8],)"
       R"("data_offsets":[0,8]}})",
       "expected '\"'"},
      {R"({"w\q":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
       "bad escape"},
      {R"({"\ud800":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
       "unpaired surrogate"},
      {"{\"w\xff\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",
       "not valid UTF-8"},
      {R"({"w":{"dtype":"U8","shape":[99999999999999999999],)"
       R"("data_offsets":[0,8]}})",
       "out of range"},
  };
  for (const auto& c : cases) {
    const std::string path = MakeFile(dir, c.header, data);
    EXPECT_ERROR_CONTAINS(LoadCheckpoint(path), path, c.expect);
  }
}

TEST(CheckpointTest, BadOffsetsAndSizesAreClearErrors) {
  ScratchDir dir;
  const std::string data(12, '\0');
  struct Case {
    std::string header;
    std::string expect;
  };
  const std::vector<Case> cases = {
      // Byte size must equal numel * itemsize.
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})",
       "need 8 bytes but data_offsets [0, 12] hold 12"},
      // A gap between tensors.
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       "tensor 'b': data_offsets [8, 12] are not contiguous (expected to "
       "begin at 4)"},
      // Overlapping tensors.
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       "not contiguous"},
      // end < begin.
      {R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
       R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,4]}})",
       "not contiguous"},
      // Past the end of the data section.
      {R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       "run past the end of the data section (12 bytes"},
      // Data section longer than the tensors.
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "trailing bytes"},
  };
  for (const auto& c : cases) {
    const std::string path = MakeFile(dir, c.header, data);
    EXPECT_ERROR_CONTAINS(LoadCheckpoint(path), path, c.expect);
  }
  // Not 0/1 in a BOOL tensor.
  const std::string path = MakeFile(
      dir, R"({"w":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
      std::string("\x01\x00\x02", 3));
  EXPECT_ERROR_CONTAINS(LoadCheckpoint(path), path, "'w'",
                        "other than 0 and 1");
}

TEST(CheckpointTest, TruncatedFilesAreClearErrors) {
  ScratchDir dir;
  CheckpointData data;
  data.tensors.push_back({"w", torch::arange(10, torch::kFloat32)});
  const std::string good = dir.File("good.safetensors");
  SaveCheckpoint(good, data);
  const std::string bytes = ReadFileToString(good);

  const std::string cut_data = dir.File("cut_data.safetensors");
  WriteFileAtomically(cut_data, bytes.substr(0, bytes.size() - 4));
  EXPECT_ERROR_CONTAINS(LoadCheckpoint(cut_data), cut_data, "tensor 'w'",
                        "run past the end", "truncated");

  const std::string cut_header = dir.File("cut_header.safetensors");
  WriteFileAtomically(cut_header, bytes.substr(0, 20));
  EXPECT_ERROR_CONTAINS(LoadCheckpoint(cut_header), cut_header, "truncated",
                        "header length");

  const std::string tiny = dir.File("tiny.safetensors");
  WriteFileAtomically(tiny, "abc");
  EXPECT_ERROR_CONTAINS(LoadCheckpoint(tiny), tiny, "truncated", "3 bytes");

  const std::string huge = dir.File("huge.safetensors");
  WriteFileAtomically(huge, LittleEndian64(uint64_t(1) << 40) + "{}");
  EXPECT_ERROR_CONTAINS(LoadCheckpoint(huge), huge,
                        "implausible header length");

  EXPECT_ERROR_CONTAINS(LoadCheckpoint(dir.File("missing.safetensors")),
                        dir.File("missing.safetensors"), "cannot open");
  EXPECT_ERROR_CONTAINS(LoadCheckpoint(dir.path()), dir.path(),
                        "not a regular file");
}

TEST(CheckpointTest, SaveRejectsBadInputAndLeavesNoFile) {
  ScratchDir dir;
  const std::string path = dir.File("x.safetensors");
  auto with = [](std::vector<NamedTensor> t) {
    CheckpointData d;
    d.tensors = std::move(t);
    return d;
  };
  EXPECT_ERROR_CONTAINS(SaveCheckpoint(path, with({{"a", torch::ones(1)},
                                                   {"a", torch::ones(1)}})),
                        path, "'a' appears twice");
  EXPECT_ERROR_CONTAINS(SaveCheckpoint(path, with({{"u", torch::Tensor()}})),
                        "'u' is undefined");
  EXPECT_ERROR_CONTAINS(
      SaveCheckpoint(path, with({{"c", torch::ones(2, torch::kComplexFloat)}})),
      "'c' has unsupported dtype");
  EXPECT_ERROR_CONTAINS(
      SaveCheckpoint(path, with({{"__metadata__", torch::ones(1)}})),
      "reserved");
  EXPECT_ERROR_CONTAINS(SaveCheckpoint(path, with({{"", torch::ones(1)}})),
                        "empty tensor name");
  EXPECT_TRUE(Glob(dir.File("*")).empty());
}

// ------------------------------------------------------------ checksum

// The checksum of {"a": I64 [] 7, "w": F32 [2] {1, 2}} with metadata
// {"k": "v", "global_step": "12"}, computed by the Python reference of
// scripts/golden/check_safetensors.py (content_checksum).
constexpr const char* kSmallChecksum = "52dd2360";

CheckpointData SmallData() {
  CheckpointData d;
  d.tensors.push_back({"w", torch::tensor({1.0f, 2.0f})});
  d.tensors.push_back({"a", torch::tensor(int64_t{7})});
  d.metadata = {{"k", "v"}, {"global_step", "12"}};
  return d;
}

TEST(CheckpointTest, ChecksumIsInTheMetadataAndLayoutIndependent) {
  ScratchDir dir;
  const std::string path = dir.File("small.safetensors");
  SaveCheckpoint(path, SmallData());
  const std::string bytes = ReadFileToString(path);
  EXPECT_NE(bytes.find(std::string("\"slimtorch/crc32c\":\"") +
                       kSmallChecksum + "\""),
            std::string::npos)
      << bytes.substr(8, HeaderLength(path));
  // Not part of the metadata a caller sees.
  ExpectDataEqual(LoadCheckpoint(path), SmallData());
  // Another writer's layout of the same content (tensors in another order,
  // other spacing) verifies too; a changed metadata value does not.
  const std::string w = std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  const std::string a = std::string("\x07\0\0\0\0\0\0\0", 8);
  const std::string header = std::string(
      R"({ "__metadata__": {"slimtorch/crc32c": ")") + kSmallChecksum +
      R"(", "global_step": "12", "k": "v"},)"
      R"( "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
      R"( "a": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]}})";
  ExpectDataEqual(LoadCheckpoint(MakeFile(dir, header, w + a, "other")),
                  SmallData());
  std::string edited = header;
  edited.replace(edited.find("\"12\""), 4, "\"13\"");
  const std::string bad = MakeFile(dir, edited, w + a, "edited");
  EXPECT_ERROR_CONTAINS(LoadCheckpoint(bad), "checkpoint '" + bad + "'",
                        "is damaged", kSmallChecksum);
  CheckpointData reserved = SmallData();
  reserved.metadata["slimtorch/crc32c"] = "0";
  EXPECT_ERROR_CONTAINS(SaveCheckpoint(dir.File("r.safetensors"), reserved),
                        "'slimtorch/crc32c' is reserved");
}

// Damage after writing: every single-bit flip anywhere in the file and
// every truncation is refused with an error naming the file (a flip in the
// tensors or metadata by the checksum, one in the structure by the header
// checks).
TEST(CheckpointTest, EveryBitFlipAndTruncationIsRefused) {
  ScratchDir dir;
  const std::string path = dir.File("golden.safetensors");
  SaveCheckpoint(path, ExpectedGoldenData());
  const std::string bytes = ReadFileToString(path);
  const std::string damaged = dir.File("damaged.safetensors");
  // Plain writes of a new file each time: thousands of them, no fsync (nor
  // ext4's flush on truncating a file to rewrite it).
  const auto write = [&damaged](const std::string& b) {
    std::remove(damaged.c_str());
    std::FILE* f = std::fopen(damaged.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), f), b.size());
    std::fclose(f);
  };
  int by_checksum = 0, flips = 0, missed = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string copy = bytes;
      copy[i] = static_cast<char>(copy[i] ^ (1 << bit));
      write(copy);
      const std::string e =
          testing_io::ErrorMessage([&] { LoadCheckpoint(damaged); });
      if (e.find(damaged) == std::string::npos && ++missed <= 10) {
        ADD_FAILURE() << "flip of bit " << bit << " of byte " << i << " ('"
                      << bytes.substr(i > 8 ? i - 8 : 0, 16) << "'): '" << e
                      << "'";
      }
      by_checksum += e.find("is damaged") != std::string::npos;
      ++flips;
    }
  }
  EXPECT_EQ(missed, 0);
  // Every flip in the data section is the checksum's to find, but those
  // that make a BOOL byte other than 0 or 1 (3 BOOL bytes, 7 flips each).
  const uint64_t data_bytes = bytes.size() - 8 - HeaderLength(path);
  EXPECT_GE(by_checksum, static_cast<int>(8 * data_bytes - 3 * 7));
  std::printf("%zu-byte file: %d bit flips refused, %d by the checksum\n",
              bytes.size(), flips, by_checksum);
  for (size_t n = 0; n < bytes.size(); ++n) {
    write(bytes.substr(0, n));
    EXPECT_ERROR_CONTAINS(LoadCheckpoint(damaged), damaged);
  }
}

TEST(CheckpointTest, SavesTensorsFromAnyDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ScratchDir dir;
  CheckpointData data;
  data.tensors.push_back({"g", torch::arange(5, torch::kFloat32).cuda()});
  SaveCheckpoint(dir.File("g.safetensors"), data);
  ExpectDataEqual(LoadCheckpoint(dir.File("g.safetensors")), data);
}

}  // namespace
}  // namespace slimtorch
