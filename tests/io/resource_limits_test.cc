// The readers refuse sizes their input claims beyond ResourceLimits
// (core/resource_limits.h) before they take the memory: each case runs in a
// child that may map only 64 MiB more than the test (tests/memory_cap.h),
// where the claimed size would fail as "<out of memory>".
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <vector>

#include "data/example_scan.h"
#include "io_test_util.h"
#include "memory_cap.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/archive.h"
#include "slimtorch/io/crc32c.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/gzip.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/jpeg_decoder.h"
#include "slimtorch/io/tfrecord.h"
#include "test_jpeg.h"

namespace slimtorch {
namespace {

using testing::ErrorWithinMemory;
using testing_io::ScratchDir;

constexpr size_t kHeadroom = size_t{64} << 20;

void ExpectAll(const std::string& message,
               std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message: " << message << "\nmissing: " << part;
  }
}

// Restores the process's limits however the test leaves.
class LimitsGuard {
 public:
  explicit LimitsGuard(const ResourceLimits& l) : old_(SetResourceLimits(l)) {}
  ~LimitsGuard() { SetResourceLimits(old_); }

 private:
  ResourceLimits old_;
};

void PutLe(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutBe(std::string* s, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    s->push_back(static_cast<char>(v >> (8 * i)));
  }
}

// A TFRecord header (length and its masked CRC, both valid) and a little
// data: the file claims a record of `length` bytes.
std::string RecordHeader(uint64_t length) {
  std::string h;
  PutLe(&h, length, 8);
  PutLe(&h, crc32c::Mask(crc32c::Value(h.data(), 8)), 4);
  return h + std::string(100, 'x');
}

TEST(ResourceLimitsTest, DefaultsAndEnvironment) {
  const ResourceLimits d;
  EXPECT_EQ(d.max_record_bytes, uint64_t{1} << 30);
  EXPECT_EQ(d.max_image_pixels, uint64_t{1} << 28);
  EXPECT_EQ(d.max_member_bytes, uint64_t{4} << 30);
  EXPECT_EQ(d.max_example_values, uint64_t{1} << 24);
  const ResourceLimits l = ResourceLimits::FromEnvironment([](const char* n) {
    return std::string(n) == "SLIMTORCH_MAX_IMAGE_PIXELS" ? "1000" : nullptr;
  });
  EXPECT_EQ(l.max_image_pixels, 1000u);
  EXPECT_EQ(l.max_record_bytes, d.max_record_bytes);
  for (const char* bad : {"", "-5", "0", "12abc", "lots"}) {
    EXPECT_ERROR_CONTAINS(
        ResourceLimits::FromEnvironment([&](const char* n) {
          return std::string(n) == "SLIMTORCH_MAX_RECORD_BYTES" ? bad : nullptr;
        }),
        "SLIMTORCH_MAX_RECORD_BYTES='", "expected a positive integer");
  }
}

TEST(ResourceLimitsTest, TfRecordLengthOf2To60) {
  ScratchDir dir;
  const std::string path = dir.File("huge.tfrecord");
  WriteFileAtomically(path, RecordHeader(uint64_t{1} << 60));
  const std::string msg = ErrorWithinMemory(
      [&] {
        TFRecordReader reader(path);
        std::string record;
        reader.Read(&record);
      },
      kHeadroom);
  ExpectAll(msg, {path, "record 0 at byte offset 0",
                  "claims 1152921504606846976 bytes",
                  "the limit is 1073741824 bytes",
                  "set SLIMTORCH_MAX_RECORD_BYTES to raise it"});
}

TEST(ResourceLimitsTest, TfRecordLengthPastTheFileIsTruncation) {
  ScratchDir dir;
  const std::string path = dir.File("short.tfrecord");
  WriteFileAtomically(path, FrameTFRecord("first") + RecordHeader(512 << 20));
  const std::string msg = ErrorWithinMemory(
      [&] {
        TFRecordReader reader(path);
        std::string record;
        while (reader.Read(&record)) {
        }
      },
      kHeadroom);
  ExpectAll(msg, {path, "truncated record 1 at byte offset 21",
                  "claims 536870912 data bytes", "the file holds 100 more"});
}

// A PNG whose header (valid CRC) claims height x width RGB pixels.
std::string PngHeader(uint32_t height, uint32_t width) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string chunk = "IHDR";
  PutBe(&chunk, width, 4);
  PutBe(&chunk, height, 4);
  chunk += std::string("\x08\x02\x00\x00\x00", 5);
  PutBe(&png, 13, 4);
  png += chunk;
  PutBe(&png,
        crc32(0, reinterpret_cast<const Bytef*>(chunk.data()), chunk.size()),
        4);
  // png_read_info stops at the first IDAT, whose data is never read here.
  std::string idat = "IDAT" + std::string(16, '\0');
  PutBe(&png, 16, 4);
  png += idat;
  PutBe(&png,
        crc32(0, reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
        4);
  return png;
}

TEST(ResourceLimitsTest, PngOf100000x100000) {
  const std::string png = PngHeader(100000, 100000);
  const std::string msg = ErrorWithinMemory(
      [&] { DecodeImage(png, 3, "'huge.png'"); }, kHeadroom);
  ExpectAll(msg, {"'huge.png': PNG image of 100000x100000 = 10000000000 "
                  "pixels is too large",
                  "the limit is 268435456 pixels",
                  "set SLIMTORCH_MAX_IMAGE_PIXELS to raise it"});
}

// A real JPEG whose frame header is changed to claim 65000x65000.
std::string HugeJpeg() {
  std::string jpg = testing_io::TestJpeg(16, 16, 3, 2, 2, 7);
  for (size_t i = 0; i + 9 < jpg.size(); ++i) {
    if (static_cast<uint8_t>(jpg[i]) == 0xFF &&
        (static_cast<uint8_t>(jpg[i + 1]) & 0xFE) == 0xC0) {  // SOF0, SOF1
      jpg[i + 5] = jpg[i + 7] = static_cast<char>(65000 >> 8);
      jpg[i + 6] = jpg[i + 8] = static_cast<char>(65000 & 0xFF);
      return jpg;
    }
  }
  ADD_FAILURE() << "no SOF marker";
  return jpg;
}

TEST(ResourceLimitsTest, JpegOf65000x65000) {
  const std::string jpg = HugeJpeg();
  std::string msg = ErrorWithinMemory(
      [&] { DecodeImage(jpg, 3, "'huge.jpg'"); }, kHeadroom);
  ExpectAll(msg, {"'huge.jpg': JPEG image of 65000x65000 = 4225000000 "
                  "pixels is too large",
                  "the limit is 268435456 pixels",
                  "SLIMTORCH_MAX_IMAGE_PIXELS"});
  msg = ErrorWithinMemory(
      [&] {
        JpegDecoder decoder;
        std::vector<uint8_t> out(64 * 64 * 3);
        decoder.DecodeWindow(reinterpret_cast<const uint8_t*>(jpg.data()),
                             jpg.size(), 0, 0, 64, 64, 3, out.data(),
                             "'huge.jpg'");
      },
      kHeadroom);
  ExpectAll(msg, {"'huge.jpg'", "JPEG image of 65000x65000", "too large",
                  "SLIMTORCH_MAX_IMAGE_PIXELS"});
}

TEST(ResourceLimitsTest, GifFrameOf60000x60000) {
  std::string gif = "GIF89a";
  PutLe(&gif, 10, 2);
  PutLe(&gif, 10, 2);
  gif += std::string("\x80\x00\x00", 3);  // global table of 2 colours
  gif += std::string("\x00\x00\x00\xff\xff\xff", 6);
  gif += ',';
  PutLe(&gif, 0, 4);  // left, top
  PutLe(&gif, 60000, 2);
  PutLe(&gif, 60000, 2);
  gif += std::string("\x00\x02", 2);  // no local table; LZW code size 2
  gif += std::string(200000, '\x10');  // room enough for a compressed frame
  const std::string msg = ErrorWithinMemory(
      [&] { DecodeImage(gif, 3, "'huge.gif'"); }, kHeadroom);
  ExpectAll(msg, {"'huge.gif'", "frame of 60000x60000 = 3600000000 pixels "
                  "is too large",
                  "SLIMTORCH_MAX_IMAGE_PIXELS"});
}

void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}
std::string Delimited(int field, const std::string& payload) {
  std::string s;
  PutVarint(&s, static_cast<uint64_t>(field) << 3 | 2);
  PutVarint(&s, payload.size());
  return s + payload;
}
// An Example with image/encoded and `key` holding `list` (a Feature's
// serialized list field `kind`: 2 floats, 3 int64s).
std::string ExampleWithList(const std::string& key, int kind,
                            const std::string& list) {
  const std::string encoded =
      Delimited(1, Delimited(1, "image/encoded") +
                       Delimited(2, Delimited(1, Delimited(1, "png"))));
  const std::string listed = Delimited(
      1, Delimited(1, key) + Delimited(2, Delimited(kind, Delimited(1, list))));
  return Delimited(1, encoded + listed);
}

TEST(ResourceLimitsTest, ExampleListOverTheLimit) {
  // 2^24 + 1 zeros, one byte each packed: protobuf would take 128 MiB.
  const std::string record = ExampleWithList(
      "image/class/label", 3, std::string((size_t{1} << 24) + 1, '\0'));
  const std::string msg = ErrorWithinMemory(
      [&] { DecodeImageExample(record, "shard.tfrecord record 5"); },
      kHeadroom);
  ExpectAll(msg, {"shard.tfrecord record 5: feature 'image/class/label' "
                  "holds 16777217 values",
                  "the limit is 16777216 values",
                  "set SLIMTORCH_MAX_EXAMPLE_VALUES to raise it"});
}

TEST(ResourceLimitsTest, BoxListOverTheLimitInThePhotoPath) {
  ResourceLimits small;
  small.max_example_values = 1000;
  LimitsGuard guard(small);
  const std::string record = ExampleWithList("image/object/bbox/ymin", 2,
                                             std::string(4 * 1001, '\0'));
  internal::ExampleScan scan;
  EXPECT_ERROR_CONTAINS(internal::ScanExample(record, "photos record 2", &scan),
                        "photos record 2: feature 'image/object/bbox/ymin' "
                        "holds 1001 values",
                        "the limit is 1000 values");
  EXPECT_ERROR_CONTAINS(DecodeBoundingBoxes(record, "photos record 2"),
                        "holds 1001 values");
  // At the limit the list is read; what fails next is the missing label.
  EXPECT_ERROR_CONTAINS(
      internal::ScanExample(ExampleWithList("image/object/bbox/ymin", 2,
                                            std::string(4 * 1000, '\0')),
                            "photos record 3", &scan),
      "photos record 3: Example has no 'image/class/label' feature");
}

// A ustar header for `name` whose size field (GNU base-256) claims `size`.
std::string TarHeaderClaiming(const std::string& name, uint64_t size) {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), name.size());
  std::memcpy(&h[100], "0000644", 7);
  std::memcpy(&h[108], "0000000", 7);
  std::memcpy(&h[116], "0000000", 7);
  h[124] = static_cast<char>(0x80);
  for (int i = 0; i < 8; ++i) h[135 - i] = static_cast<char>(size >> (8 * i));
  std::memcpy(&h[136], "00000000000", 11);
  h[156] = '0';
  std::memcpy(&h[257], "ustar\0" "00", 8);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<uint8_t>(c);
  std::snprintf(&h[148], 8, "%06o", sum);
  return h + std::string(4096, 'x');
}

TEST(ResourceLimitsTest, TarMemberClaimingATerabyte) {
  ScratchDir dir;
  const std::string path = dir.File("cifar-10-binary.tar");
  const std::string member = "cifar-10-batches-bin/data_batch_1.bin";
  WriteFileAtomically(path, TarHeaderClaiming(member, uint64_t{1} << 40));
  const std::string msg = ErrorWithinMemory(
      [&] { ReadArchiveMembers(path, {member}); }, kHeadroom);
  ExpectAll(msg, {"archive '" + path + "': entry '" + member +
                      "' claims 1099511627776 bytes",
                  "the limit is 4294967296 bytes",
                  "set SLIMTORCH_MAX_MEMBER_BYTES to raise it"});
}

TEST(ResourceLimitsTest, GzipBombStopsAtTheLimit) {
  ResourceLimits small;
  small.max_member_bytes = 1 << 20;
  LimitsGuard guard(small);
  const std::string bomb = GzipString(std::string(16 << 20, '\0'), 9);
  EXPECT_LT(bomb.size(), 100000u);
  EXPECT_ERROR_CONTAINS(GunzipString(bomb, "bomb.gz"),
                        "'bomb.gz' decompresses to more than 1048576 bytes",
                        "set SLIMTORCH_MAX_MEMBER_BYTES to raise it");
  EXPECT_EQ(GunzipPrefix(bomb, "bomb.gz", 16), std::string(16, '\0'));
  EXPECT_EQ(GunzipString(GzipString("small"), "small.gz"), "small");
}

}  // namespace
}  // namespace slimtorch
