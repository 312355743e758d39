#include "slimtorch/io/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/resource_limits.h"

namespace slimtorch {
namespace {

// zlib's avail_in/avail_out are 32-bit; feed at most this much per call.
constexpr size_t kMaxChunk = size_t{1} << 30;

}  // namespace

namespace {

// Throws unless `compressed` starts with gzip's magic bytes.
void CheckGzipMagic(const std::string& compressed, const std::string& name) {
  SLIM_CHECK(compressed.size() >= 2 &&
                 static_cast<uint8_t>(compressed[0]) == 0x1f &&
                 static_cast<uint8_t>(compressed[1]) == 0x8b,
             "'", name, "' is not a gzip file (expected magic bytes 1f 8b",
             compressed.empty() ? ", file is empty)" : ")");
}

// Fails naming the zlib error `rc` (after inflateEnd).
[[noreturn]] void FailInflate(z_stream* zs, int rc, const std::string& name,
                              size_t at) {
  std::string msg = zs->msg != nullptr ? zs->msg : "zlib error";
  inflateEnd(zs);
  if (rc == Z_MEM_ERROR) SLIM_FAIL("'", name, "': out of memory");
  SLIM_FAIL("'", name, "' is corrupt: ", msg, " (at compressed byte ", at,
            ")");
}

// Inflates gzip members one after the other into *out. Stops quietly once
// `prefix` bytes are out (prefix > 0); otherwise refuses output over
// `max_bytes` before it grows past it.
void Inflate(const std::string& compressed, const std::string& name,
             uint64_t max_bytes, size_t prefix, std::string* out) {
  z_stream zs{};
  // 15 + 16: a gzip wrapper is required (no raw deflate, no zlib header).
  SLIM_CHECK(inflateInit2(&zs, 15 + 16) == Z_OK, "'", name,
             "': zlib inflateInit2 failed");
  size_t in_pos = 0;
  char buf[1 << 16];
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
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t got = sizeof(buf) - zs.avail_out;
    if (prefix > 0 && out->size() + got >= prefix) {
      out->append(buf, prefix - out->size());
      break;
    }
    if (out->size() + got > max_bytes) {
      inflateEnd(&zs);
      SLIM_FAIL("'", name, "' decompresses to more than ", max_bytes,
                " bytes (", LimitHint(max_bytes, "bytes",
                                       "SLIMTORCH_MAX_MEMBER_BYTES"), ")");
    }
    out->append(buf, got);
    if (rc == Z_STREAM_END) {
      size_t consumed = in_pos - zs.avail_in;
      if (consumed == compressed.size()) break;
      // Another member follows (or trailing garbage, which gunzip rejects).
      if (inflateReset(&zs) != Z_OK) break;
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_pos == compressed.size()) {
      if (prefix > 0) break;
      inflateEnd(&zs);
      SLIM_FAIL("'", name, "' is truncated: gzip stream ended early (after ",
                compressed.size(), " compressed bytes, ", out->size(),
                " decompressed)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      FailInflate(&zs, rc, name, in_pos - zs.avail_in);
    }
  }
  inflateEnd(&zs);
}

}  // namespace

std::string GunzipString(const std::string& compressed,
                         const std::string& name) {
  CheckGzipMagic(compressed, name);
  const uint64_t max_bytes = GetResourceLimits().max_member_bytes;
  std::string out;
  // ISIZE (uncompressed size mod 2^32) of the last member, as a size hint:
  // no more than the limit, nor than deflate's best ratio (1032:1) allows.
  if (compressed.size() >= 18) {
    const auto* p = reinterpret_cast<const uint8_t*>(compressed.data()) +
                    compressed.size() - 4;
    uint32_t isize = p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24);
    out.reserve(std::min<uint64_t>(
        {isize, max_bytes, uint64_t{compressed.size()} * 1032}));
  }
  Inflate(compressed, name, max_bytes, 0, &out);
  return out;
}

std::string GunzipPrefix(const std::string& compressed, const std::string& name,
                         size_t n) {
  CheckGzipMagic(compressed, name);
  std::string out;
  if (n > 0) Inflate(compressed, name, n, n, &out);
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
