#pragma once
// gzip (RFC 1952) files through zlib, read whole into memory.

#include <string>

namespace slimtorch {

// Returns the decompressed contents of the gzip file at `path`. Concatenated
// gzip members are decompressed one after the other, as gunzip does.
// Throws slimtorch::Error naming the file when it cannot be read, is not a
// gzip file, is corrupt (bad deflate data or CRC) or is truncated
// ("'x.gz' is truncated: gzip stream ended early"), or decompresses to more
// than ResourceLimits::max_member_bytes (core/resource_limits.h; refused
// before the output grows past it).
std::string ReadGzipFile(const std::string& path);

// Decompresses gzip bytes held in memory; `name` names the source in errors
// exactly as `path` does for ReadGzipFile.
std::string GunzipString(const std::string& compressed,
                         const std::string& name);

// The first `n` decompressed bytes of gzip bytes (fewer when the data holds
// fewer; a short or truncated stream is not an error here): a header read
// before deciding to decompress the rest. Throws as GunzipString on data
// that is not gzip or is corrupt within those bytes.
std::string GunzipPrefix(const std::string& compressed, const std::string& name,
                         size_t n);

// Compresses `data` into one gzip member (zlib level 0-9, -1 = default).
std::string GzipString(const std::string& data, int level = -1);

}  // namespace slimtorch
