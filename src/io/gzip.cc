#include "slimtorch/io/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

// zlib's avail_in/avail_out are 32-bit; feed at most this much per call.
constexpr size_t kMaxChunk = size_t{1} << 30;

}  // namespace

std::string GunzipString(const std::string& compressed,
                         const std::string& name) {
  SLIM_CHECK(compressed.size() >= 2 &&
                 static_cast<uint8_t>(compressed[0]) == 0x1f &&
                 static_cast<uint8_t>(compressed[1]) == 0x8b,
             "'", name, "' is not a gzip file (expected magic bytes 1f 8b",
             compressed.empty() ? ", file is empty)" : ")");
  std::string out;
  // ISIZE (uncompressed size mod 2^32) of the last member, as a size hint.
  if (compressed.size() >= 18) {
    const auto* p = reinterpret_cast<const uint8_t*>(compressed.data()) +
                    compressed.size() - 4;
    uint32_t isize = p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24);
    out.reserve(std::min<size_t>(isize, size_t{1} << 31));
  }
  z_stream zs{};
  // 15 + 16: a gzip wrapper is required (no raw deflate, no zlib header).
  SLIM_CHECK(inflateInit2(&zs, 15 + 16) == Z_OK, "'", name,
             "': zlib inflateInit2 failed");
  size_t in_pos = 0;
  char buf[1 << 16];
  int rc = Z_OK;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < compressed.size()) {
      size_t n = std::min(kMaxChunk, compressed.size() - in_pos);
      zs.next_in = reinterpret_cast<Bytef*>(
          const_cast<char*>(compressed.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (rc == Z_STREAM_END) {
      size_t consumed = in_pos - zs.avail_in;
      if (consumed == compressed.size()) break;
      // Another member follows (or trailing garbage, which gunzip rejects).
      if (inflateReset(&zs) != Z_OK) break;
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_pos == compressed.size()) {
      inflateEnd(&zs);
      SLIM_FAIL("'", name, "' is truncated: gzip stream ended early (after ",
                compressed.size(), " compressed bytes, ", out.size(),
                " decompressed)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string msg = zs.msg != nullptr ? zs.msg : "zlib error";
      inflateEnd(&zs);
      if (rc == Z_MEM_ERROR) SLIM_FAIL("'", name, "': out of memory");
      SLIM_FAIL("'", name, "' is corrupt: ", msg, " (at compressed byte ",
                in_pos - zs.avail_in, ")");
    }
  }
  inflateEnd(&zs);
  return out;
}

std::string ReadGzipFile(const std::string& path) {
  return GunzipString(ReadFileToString(path), path);
}

std::string GzipString(const std::string& data, int level) {
  z_stream zs{};
  SLIM_CHECK(deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8,
                          Z_DEFAULT_STRATEGY) == Z_OK,
             "GzipString: deflateInit2 failed for level ", level);
  std::string out;
  size_t in_pos = 0;
  char buf[1 << 16];
  int rc = Z_OK;
  do {
    if (zs.avail_in == 0 && in_pos < data.size()) {
      size_t n = std::min(kMaxChunk, data.size() - in_pos);
      zs.next_in =
          reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    int flush = in_pos == data.size() ? Z_FINISH : Z_NO_FLUSH;
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = deflate(&zs, flush);
    out.append(buf, sizeof(buf) - zs.avail_out);
  } while (rc == Z_OK || rc == Z_BUF_ERROR);
  deflateEnd(&zs);
  SLIM_CHECK(rc == Z_STREAM_END, "GzipString: deflate failed (", rc, ")");
  return out;
}

}  // namespace slimtorch
