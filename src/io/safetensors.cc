#include "slimtorch/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/crc32c.h"

namespace slimtorch {
namespace {

// The safetensors package refuses headers above this size; so do we.
constexpr uint64_t kMaxHeaderBytes = 100000000;
constexpr const char* kMetadataKey = "__metadata__";
// The content checksum slimtorch keeps among the metadata (persisted format,
// do not change): 8 lowercase hex digits of ContentChecksum().
constexpr const char* kChecksumKey = "slimtorch/crc32c";

// Safetensors dtype names (persisted format, do not change).
struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  size_t itemsize;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4},
    {"F16", torch::kFloat16, 2}, {"BF16", torch::kBFloat16, 2},
    {"I64", torch::kInt64, 8},   {"I32", torch::kInt32, 4},
    {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},
    {"U8", torch::kUInt8, 1},    {"BOOL", torch::kBool, 1},
};

const DtypeInfo* DtypeByName(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

const DtypeInfo* DtypeByType(torch::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (type == d.type) return &d;
  }
  return nullptr;
}

bool IsLittleEndian() {
  const uint16_t probe = 1;
  return *reinterpret_cast<const uint8_t*>(&probe) == 1;
}

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values
// above U+10FFFF), as the safetensors package requires of the header.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      const uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

// ------------------------------------------------------------ JSON writing

void AppendJsonString(const std::string& s, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char ch : s) {
    const uint8_t c = static_cast<uint8_t>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          *out += "\\u00";
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

// --------------------------------------------------------- JSON parsing
//
// A strict parser for exactly the safetensors header grammar:
//   header  := '{' (entry (',' entry)*)? '}'
//   entry   := string ':' (tensor | metadata)     metadata iff "__metadata__"
//   tensor  := '{' "dtype": string, "shape": [uint*],
//                  "data_offsets": [uint, uint] '}'  (any key order, no others)
//   metadata:= '{' (string ':' string)* '}'
// Whitespace is allowed between tokens; strings take all JSON escapes.

struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Header {
  std::vector<TensorEntry> tensors;  // in header order
  std::map<std::string, std::string> metadata;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path)
      : s_(text), path_(path) {}

  Header Parse() {
    Header header;
    std::set<std::string> seen;
    bool have_metadata = false;
    Expect('{');
    if (!Consume('}')) {
      do {
        std::string key = ParseString();
        Expect(':');
        if (key == kMetadataKey) {
          if (have_metadata) Fail("\"__metadata__\" appears twice");
          have_metadata = true;
          ParseMetadata(&header.metadata);
        } else {
          if (!seen.insert(key).second) {
            Fail("tensor '" + key + "' appears twice");
          }
          header.tensors.push_back(ParseTensor(key));
        }
      } while (Consume(','));
      Expect('}');
    }
    SkipSpace();
    if (pos_ != s_.size()) Fail("unexpected data after the header object");
    return header;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    SLIM_FAIL("invalid safetensors header in '", path_, "' (JSON byte ", pos_,
              "): ", what);
  }

  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void Expect(char c) {
    if (!Consume(c)) {
      Fail(std::string("expected '") + c + "', got " +
           (pos_ < s_.size() ? "'" + std::string(1, s_[pos_]) + "'"
                             : std::string("end of header")));
    }
  }

  uint32_t ParseHex4() {
    if (pos_ + 4 > s_.size()) Fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else {
        Fail("bad hex digit in \\u escape");
      }
    }
    return v;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  std::string ParseString() {
    Expect('"');
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) Fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<uint8_t>(c) < 0x20) Fail("control character in string");
      if (c == '\\') {
        ParseEscape(&out);
      } else {
        out.push_back(c);
      }
    }
  }

  // The escape after a backslash, appended to `out` as UTF-8.
  void ParseEscape(std::string* out) {
    if (pos_ >= s_.size()) Fail("unterminated string");
    const char e = s_[pos_++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out->push_back(e);
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'u':
        AppendUtf8(ParseCodePoint(), out);
        break;
      default:
        Fail(std::string("bad escape '\\") + e + "'");
    }
  }

  // The code point of a \u escape (after its "\u"), joining a surrogate
  // pair.
  uint32_t ParseCodePoint() {
    const uint32_t cp = ParseHex4();
    if (cp >= 0xdc00 && cp <= 0xdfff) Fail("unpaired surrogate in \\u escape");
    if (cp < 0xd800 || cp > 0xdbff) return cp;
    if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') {
      Fail("unpaired surrogate in \\u escape");
    }
    pos_ += 2;
    const uint32_t lo = ParseHex4();
    if (lo < 0xdc00 || lo > 0xdfff) Fail("unpaired surrogate in \\u escape");
    return 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
  }

  uint64_t ParseUint() {
    SkipSpace();
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const uint64_t d = s_[pos_] - '0';
      if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) {
        Fail("integer out of range");
      }
      v = v * 10 + d;
      ++pos_;
    }
    if (pos_ == start) Fail("expected a non-negative integer");
    if (pos_ - start > 1 && s_[start] == '0') Fail("integer with leading zero");
    if (pos_ < s_.size() &&
        (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      Fail("expected an integer, got a fraction or exponent");
    }
    return v;
  }

  std::vector<uint64_t> ParseUintArray() {
    std::vector<uint64_t> out;
    Expect('[');
    if (Consume(']')) return out;
    do {
      out.push_back(ParseUint());
    } while (Consume(','));
    Expect(']');
    return out;
  }

  TensorEntry ParseTensor(const std::string& name) {
    TensorEntry t;
    t.name = name;
    bool have_dtype = false, have_shape = false, have_offsets = false;
    const std::string where = "tensor '" + name + "': ";
    Expect('{');
    if (!Consume('}')) {
      do {
        const std::string key = ParseString();
        Expect(':');
        if (key == "dtype") {
          if (have_dtype) Fail(where + "\"dtype\" appears twice");
          have_dtype = true;
          t.dtype = ParseString();
        } else if (key == "shape") {
          if (have_shape) Fail(where + "\"shape\" appears twice");
          have_shape = true;
          for (uint64_t d : ParseUintArray()) {
            if (d > uint64_t(std::numeric_limits<int64_t>::max())) {
              Fail(where + "dimension out of range");
            }
            t.shape.push_back(static_cast<int64_t>(d));
          }
        } else if (key == "data_offsets") {
          if (have_offsets) Fail(where + "\"data_offsets\" appears twice");
          have_offsets = true;
          std::vector<uint64_t> offsets = ParseUintArray();
          if (offsets.size() != 2) {
            Fail(where + "\"data_offsets\" must hold 2 integers, got " +
                 std::to_string(offsets.size()));
          }
          t.begin = offsets[0];
          t.end = offsets[1];
        } else {
          Fail(where + "unknown field \"" + key + "\"");
        }
      } while (Consume(','));
      Expect('}');
    }
    if (!have_dtype) Fail(where + "missing \"dtype\"");
    if (!have_shape) Fail(where + "missing \"shape\"");
    if (!have_offsets) Fail(where + "missing \"data_offsets\"");
    return t;
  }

  void ParseMetadata(std::map<std::string, std::string>* out) {
    Expect('{');
    if (Consume('}')) return;
    do {
      std::string key = ParseString();
      Expect(':');
      std::string value = ParseString();
      if (!out->emplace(std::move(key), std::move(value)).second) {
        Fail("metadata key appears twice");
      }
    } while (Consume(','));
    Expect('}');
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

// ------------------------------------------------------------ checksum

// One tensor as the checksum sees it.
struct ChecksumItem {
  std::string name;
  std::string dtype;  // safetensors name: "F32", ...
  std::vector<int64_t> shape;
  const void* data;
  uint64_t bytes;
};

// CRC-32C of the file's content, independent of its layout (persisted
// format, do not change): for each tensor in byte order of the names,
// name NUL dtype NUL the dimensions in decimal joined by ',' NUL the
// tensor's bytes; then for each metadata entry but the checksum itself, in
// byte order of the keys, key NUL value NUL.
uint32_t ContentChecksum(std::vector<ChecksumItem> items,
                         const std::map<std::string, std::string>& metadata) {
  std::sort(items.begin(), items.end(),
            [](const ChecksumItem& a, const ChecksumItem& b) {
              return a.name < b.name;
            });
  uint32_t crc = 0;
  const auto add = [&crc](const std::string& s) {
    crc = crc32c::Extend(crc, s.data(), s.size());
    crc = crc32c::Extend(crc, "", 1);
  };
  for (const ChecksumItem& t : items) {
    add(t.name);
    add(t.dtype);
    std::string dims;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      dims += (i ? "," : "") + std::to_string(t.shape[i]);
    }
    add(dims);
    crc = crc32c::Extend(crc, t.data, static_cast<size_t>(t.bytes));
  }
  for (const auto& kv : metadata) {
    if (kv.first == kChecksumKey) continue;
    add(kv.first);
    add(kv.second);
  }
  return crc;
}

std::string Hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

// Whether `a` and `b` differ in exactly one bit.
bool OneBitApart(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  int bits = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bits += __builtin_popcount(static_cast<uint8_t>(a[i] ^ b[i]));
  }
  return bits == 1;
}

// Checks a loaded file against its checksum (none: a file another writer
// made, accepted as it is) and drops the checksum from its metadata.
void VerifyChecksum(const std::string& path, CheckpointData* data) {
  const auto it = data->metadata.find(kChecksumKey);
  if (it == data->metadata.end()) {
    for (const auto& kv : data->metadata) {
      SLIM_CHECK(!OneBitApart(kv.first, kChecksumKey), "checkpoint '", path,
                 "' is damaged: its metadata key '", kv.first, "' is '",
                 kChecksumKey, "' with a bit flipped");
    }
    return;
  }
  std::vector<ChecksumItem> items;
  for (const NamedTensor& nt : data->tensors) {
    const torch::Tensor& t = nt.tensor;
    items.push_back({nt.name, DtypeByType(t.scalar_type())->name,
                     t.sizes().vec(), t.data_ptr(),
                     static_cast<uint64_t>(t.numel()) * t.element_size()});
  }
  const std::string computed = Hex8(ContentChecksum(items, data->metadata));
  SLIM_CHECK(it->second == computed, "checkpoint '", path,
             "' is damaged: its checksum (", kChecksumKey, " in the header) is '",
             it->second, "' but its tensors and metadata give '", computed,
             "' (the file changed after it was written: a bit flip, a "
             "partial copy or an edit)");
  data->metadata.erase(it);
}

// ------------------------------------------------------------ file I/O

// Reads exactly `n` bytes at `offset`; throws naming the file on failure.
void PreadFully(int fd, void* buf, uint64_t n, uint64_t offset,
                const std::string& path) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
    const ssize_t got = ::pread(fd, p, chunk, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    SLIM_CHECK(got > 0, "error reading '", path, "' at byte ", offset, ": ",
               got == 0 ? "unexpected end of file" : std::strerror(errno));
    p += got;
    n -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // Keeps the descriptor open: the caller owns it now.
  void Release() { fd_ = -1; }

 private:
  int fd_;
};

// ------------------------------------------------------------ writing

// Checks `nt` and appends its header entry (data at `*offset`, which
// advances past it); returns the contiguous CPU copy to write.
torch::Tensor AppendTensorEntry(const NamedTensor& nt, const std::string& path,
                                std::set<std::string>* names, uint64_t* offset,
                                std::string* header) {
  const std::string where =
      "cannot save '" + path + "': tensor '" + nt.name + "'";
  SLIM_CHECK(nt.tensor.defined(), where, " is undefined");
  SLIM_CHECK(!nt.name.empty(), "cannot save '", path, "': empty tensor name");
  SLIM_CHECK(nt.name != kMetadataKey, where, ": the name is reserved");
  SLIM_CHECK(IsValidUtf8(nt.name), where, ": name is not valid UTF-8");
  SLIM_CHECK(names->insert(nt.name).second, where, " appears twice");
  const DtypeInfo* dtype = DtypeByType(nt.tensor.scalar_type());
  SLIM_CHECK(dtype != nullptr, where, " has unsupported dtype ",
             nt.tensor.scalar_type());
  torch::Tensor t = nt.tensor.detach().to(torch::kCPU).contiguous();
  const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype->itemsize;
  if (header->size() > 1) *header += ",";
  AppendJsonString(nt.name, header);
  *header += ":{\"dtype\":\"";
  *header += dtype->name;
  *header += "\",\"shape\":[";
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i > 0) *header += ",";
    *header += std::to_string(t.size(i));
  }
  *header += "],\"data_offsets\":[" + std::to_string(*offset) + "," +
             std::to_string(*offset + bytes) + "]}";
  *offset += bytes;
  return t;
}

// Appends the "__metadata__" entry (none when `metadata` is empty).
void AppendMetadata(const std::map<std::string, std::string>& metadata,
                    const std::string& path, std::string* header) {
  if (metadata.empty()) return;
  if (header->size() > 1) *header += ",";
  AppendJsonString(kMetadataKey, header);
  *header += ":{";
  bool first = true;
  for (const auto& kv : metadata) {
    SLIM_CHECK(IsValidUtf8(kv.first) && IsValidUtf8(kv.second), "cannot save '",
               path, "': metadata '", kv.first, "' is not valid UTF-8");
    if (!first) *header += ",";
    first = false;
    AppendJsonString(kv.first, header);
    *header += ":";
    AppendJsonString(kv.second, header);
  }
  *header += "}";
}

// ------------------------------------------------------------ reading

// Opens `path`, a regular file of at least the 8-byte length field; sets
// *file_size.
int OpenForRead(const std::string& path, uint64_t* file_size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SLIM_CHECK(fd >= 0, "cannot open checkpoint '", path,
             "': ", std::strerror(errno));
  FdCloser closer_on_error(fd);
  struct stat st;
  SLIM_CHECK(::fstat(fd, &st) == 0, "cannot stat '", path,
             "': ", std::strerror(errno));
  SLIM_CHECK(S_ISREG(st.st_mode), "checkpoint '", path,
             "' is not a regular file");
  *file_size = static_cast<uint64_t>(st.st_size);
  SLIM_CHECK(*file_size >= 8, "checkpoint '", path,
             "' is truncated: ", *file_size,
             " bytes, less than the 8-byte header length");
  closer_on_error.Release();
  return fd;
}

// Reads and parses the JSON header; sets *header_size (its length in bytes).
Header ReadHeader(int fd, uint64_t file_size, const std::string& path,
                  uint64_t* header_size) {
  uint8_t size_le[8];
  PreadFully(fd, size_le, 8, 0, path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(size_le[i]) << (8 * i);
  SLIM_CHECK(n >= 2 && n <= kMaxHeaderBytes, "checkpoint '", path,
             "': implausible header length ", n, " (not a safetensors file?)");
  SLIM_CHECK(n <= file_size - 8, "checkpoint '", path,
             "' is truncated: header length ", n, " but only ", file_size - 8,
             " bytes follow the length field");
  std::string text(n, '\0');
  PreadFully(fd, &text[0], n, 8, path);
  SLIM_CHECK(IsValidUtf8(text), "invalid safetensors header in '", path,
             "': not valid UTF-8");
  *header_size = n;
  return HeaderParser(text, path).Parse();
}

// The header's tensors by ascending data offset (file order).
std::vector<const TensorEntry*> ByOffset(const Header& header) {
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : header.tensors) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorEntry* a, const TensorEntry* b) {
                     return a->begin < b->begin ||
                            (a->begin == b->begin && a->end < b->end);
                   });
  return by_offset;
}

// Checks one tensor's dtype, and that its bytes begin at `expected_begin`,
// lie in the data section and match its shape.
void CheckEntry(const TensorEntry& t, uint64_t expected_begin,
                uint64_t data_size, const std::string& path) {
  const std::string where =
      "checkpoint '" + path + "': tensor '" + t.name + "'";
  const DtypeInfo* dtype = DtypeByName(t.dtype);
  SLIM_CHECK(dtype != nullptr, where, " has unsupported dtype '", t.dtype,
             "' (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or "
             "BOOL)");
  SLIM_CHECK(t.begin == expected_begin && t.end >= t.begin, where,
             ": data_offsets [", t.begin, ", ", t.end,
             "] are not contiguous (expected to begin at ", expected_begin,
             ")");
  SLIM_CHECK(t.end <= data_size, where, ": data_offsets [", t.begin, ", ",
             t.end, "] run past the end of the data section (", data_size,
             " bytes; file truncated?)");
  uint64_t bytes = dtype->itemsize;
  for (int64_t d : t.shape) {
    SLIM_CHECK(d == 0 || bytes <= std::numeric_limits<uint64_t>::max() /
                                      static_cast<uint64_t>(d),
               where, ": shape is too large");
    bytes *= static_cast<uint64_t>(d);
  }
  SLIM_CHECK(bytes == t.end - t.begin, where, ": shape and dtype ", t.dtype,
             " need ", bytes, " bytes but data_offsets [", t.begin, ", ", t.end,
             "] hold ", t.end - t.begin);
}

// Checks that the tensors, in file order, tile the data section exactly.
void CheckLayout(const std::vector<const TensorEntry*>& by_offset,
                 uint64_t data_size, const std::string& path) {
  uint64_t expected_begin = 0;
  for (const TensorEntry* t : by_offset) {
    CheckEntry(*t, expected_begin, data_size, path);
    expected_begin = t->end;
  }
  SLIM_CHECK(
      expected_begin == data_size, "checkpoint '", path, "': tensors cover ",
      expected_begin, " bytes but the data section holds ", data_size,
      expected_begin < data_size ? " (trailing bytes)" : " (file truncated?)");
}

// Reads one (checked) tensor's bytes straight into a new tensor.
torch::Tensor ReadTensor(int fd, const TensorEntry& t, uint64_t data_start,
                         const std::string& path) {
  const DtypeInfo* dtype = DtypeByName(t.dtype);
  torch::Tensor tensor =
      torch::empty(t.shape, torch::TensorOptions().dtype(dtype->type));
  const uint64_t bytes = t.end - t.begin;
  if (bytes > 0) {
    PreadFully(fd, tensor.data_ptr(), bytes, data_start + t.begin, path);
  }
  if (dtype->type == torch::kBool && bytes > 0) {
    const uint8_t* p = static_cast<const uint8_t*>(tensor.data_ptr());
    SLIM_CHECK(std::all_of(p, p + bytes, [](uint8_t b) { return b <= 1; }),
               "checkpoint '", path, "': tensor '", t.name,
               "' (BOOL) holds bytes other than 0 and 1");
  }
  return tensor;
}

}  // namespace

torch::Tensor CheckpointData::Find(const std::string& name) const {
  for (const auto& nt : tensors) {
    if (nt.name == name) return nt.tensor;
  }
  return torch::Tensor();
}

void SaveCheckpoint(const std::string& path, const CheckpointData& data) {
  SLIM_CHECK(IsLittleEndian(), "SaveCheckpoint: big-endian hosts unsupported");
  std::vector<torch::Tensor> cpu;
  cpu.reserve(data.tensors.size());
  std::set<std::string> names;
  std::string header = "{";
  uint64_t offset = 0;
  std::vector<ChecksumItem> items;
  for (const auto& nt : data.tensors) {
    cpu.push_back(AppendTensorEntry(nt, path, &names, &offset, &header));
    const torch::Tensor& t = cpu.back();
    items.push_back({nt.name, DtypeByType(t.scalar_type())->name,
                     t.sizes().vec(), t.data_ptr(),
                     static_cast<uint64_t>(t.numel()) * t.element_size()});
  }
  SLIM_CHECK(data.metadata.count(kChecksumKey) == 0, "cannot save '", path,
             "': metadata key '", kChecksumKey, "' is reserved");
  std::map<std::string, std::string> metadata = data.metadata;
  metadata[kChecksumKey] = Hex8(ContentChecksum(items, data.metadata));
  AppendMetadata(metadata, path, &header);
  header += "}";
  // Pad with spaces to a multiple of 8 so the data section is aligned, as
  // the safetensors package does.
  header.append((8 - header.size() % 8) % 8, ' ');

  char size_le[8];
  const uint64_t header_size = header.size();
  for (int i = 0; i < 8; ++i) {
    size_le[i] = static_cast<char>((header_size >> (8 * i)) & 0xff);
  }
  AtomicFileWriter out(path);
  out.Write(size_le, sizeof(size_le));
  out.Write(header);
  for (const auto& t : cpu) {
    out.Write(t.data_ptr(), t.numel() * t.element_size());
  }
  out.Commit();
}

CheckpointData LoadCheckpoint(const std::string& path) {
  SLIM_CHECK(IsLittleEndian(), "LoadCheckpoint: big-endian hosts unsupported");
  uint64_t file_size = 0;
  const int fd = OpenForRead(path, &file_size);
  FdCloser closer(fd);
  uint64_t header_size = 0;
  Header header = ReadHeader(fd, file_size, path, &header_size);
  const uint64_t data_start = 8 + header_size;
  const std::vector<const TensorEntry*> by_offset = ByOffset(header);
  CheckLayout(by_offset, file_size - data_start, path);

  CheckpointData out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(by_offset.size());
  for (const TensorEntry* t : by_offset) {
    out.tensors.push_back({t->name, ReadTensor(fd, *t, data_start, path)});
  }
  VerifyChecksum(path, &out);
  return out;
}

}  // namespace slimtorch
