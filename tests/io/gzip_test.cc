#include "slimtorch/io/gzip.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

// "hello\n" compressed by `printf 'hello\n' | gzip -n` (GNU gzip 1.12).
const unsigned char kHelloGz[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00,
                                  0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd, 0xc9,
                                  0xc9, 0xe7, 0x02, 0x00, 0x20, 0x30, 0x3a,
                                  0x36, 0x06, 0x00, 0x00, 0x00};

std::string HelloGz() {
  return std::string(reinterpret_cast<const char*>(kHelloGz), sizeof(kHelloGz));
}

void ExpectErrorContains(const std::string& data, const std::string& what) {
  try {
    GunzipString(data, "x.gz");
    FAIL() << "expected an error containing: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(GzipTest, DecodesGnuGzipOutput) {
  EXPECT_EQ(GunzipString(HelloGz(), "hello.gz"), "hello\n");
}

TEST(GzipTest, RoundTripsAndConcatenatedMembers) {
  std::string data;
  for (int i = 0; i < 300000; ++i) data.push_back(static_cast<char>(i % 97));
  EXPECT_EQ(GunzipString(GzipString(data), "a.gz"), data);
  EXPECT_EQ(GunzipString(GzipString(""), "empty.gz"), "");
  EXPECT_EQ(GunzipString(GzipString("ab") + GzipString("cd", 9), "c.gz"),
            "abcd");
}

TEST(GzipTest, TruncatedStreamNamesFile) {
  std::string gz = GzipString(std::string(5000, 'z') + "tail");
  ExpectErrorContains(gz.substr(0, gz.size() - 6),
                      "'x.gz' is truncated: gzip stream ended early");
  ExpectErrorContains(HelloGz().substr(0, 12),
                      "'x.gz' is truncated: gzip stream ended early");
}

TEST(GzipTest, CorruptDataAndCrcNameFile) {
  std::string bad_crc = HelloGz();
  bad_crc[sizeof(kHelloGz) - 6] ^= 0x01;
  ExpectErrorContains(bad_crc, "'x.gz' is corrupt");
  std::string bad_deflate = HelloGz();
  bad_deflate[10] = static_cast<char>(0xff);
  ExpectErrorContains(bad_deflate, "'x.gz' is corrupt");
}

TEST(GzipTest, NotGzipNamesFile) {
  ExpectErrorContains("plain text", "'x.gz' is not a gzip file");
  ExpectErrorContains("", "'x.gz' is not a gzip file");
}

TEST(GzipTest, ReadGzipFileNamesPath) {
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("slimtorch_gzip_test_" + std::to_string(::getpid()) + ".gz"))
          .string();
  std::string gz = GzipString("payload");
  WriteFileAtomically(path, gz);
  EXPECT_EQ(ReadGzipFile(path), "payload");
  WriteFileAtomically(path, gz.substr(0, gz.size() / 2));
  try {
    ReadGzipFile(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + path + "' is truncated"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
  EXPECT_THROW(ReadGzipFile(path), Error);
}

}  // namespace
}  // namespace slimtorch
