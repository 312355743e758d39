#include "slimtorch/io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/tf_checkpoint.h"

namespace slimtorch {
namespace {

namespace fs = std::filesystem;

// The safetensors package refuses headers above this size; so do we.
constexpr uint64_t kMaxHeaderBytes = 100000000;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kIndexFilename = "checkpoint";

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
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) Fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = ParseHex4();
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (pos_ + 2 > s_.size() || s_[pos_] != '\\' ||
                s_[pos_ + 1] != 'u') {
              Fail("unpaired surrogate in \\u escape");
            }
            pos_ += 2;
            const uint32_t lo = ParseHex4();
            if (lo < 0xdc00 || lo > 0xdfff) {
              Fail("unpaired surrogate in \\u escape");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            Fail("unpaired surrogate in \\u escape");
          }
          AppendUtf8(cp, &out);
          break;
        }
        default:
          Fail(std::string("bad escape '\\") + e + "'");
      }
    }
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
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// ------------------------------------------------------------ index file

struct CheckpointIndex {
  std::string latest;            // as written (relative to the directory)
  std::vector<std::string> all;  // oldest first
};

std::string QuoteTextProto(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// Reads "<dir>/checkpoint"; nullopt when the file does not exist. Unknown
// fields (TF's timestamps) are ignored.
std::optional<CheckpointIndex> ReadIndex(const std::string& dir) {
  const std::string path = JoinPath(dir, kIndexFilename);
  if (!PathExists(path)) return std::nullopt;
  std::istringstream in(ReadFileToString(path));
  CheckpointIndex index;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const size_t colon = line.find(':', first);
    SLIM_CHECK(colon != std::string::npos, path, ":", line_no,
               ": expected 'key: \"value\"', got '", line, "'");
    const std::string key = line.substr(first, colon - first);
    if (key != "model_checkpoint_path" && key != "all_model_checkpoint_paths") {
      continue;
    }
    const size_t open = line.find('"', colon);
    SLIM_CHECK(open != std::string::npos, path, ":", line_no,
               ": expected a quoted path after '", key, ":'");
    std::string value;
    size_t i = open + 1;
    bool closed = false;
    for (; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        value.push_back(line[++i]);
      } else if (line[i] == '"') {
        closed = true;
        break;
      } else {
        value.push_back(line[i]);
      }
    }
    SLIM_CHECK(closed, path, ":", line_no, ": unterminated quoted path");
    if (key == "model_checkpoint_path") {
      index.latest = value;
    } else {
      index.all.push_back(value);
    }
  }
  return index;
}

void WriteIndex(const std::string& dir, const CheckpointIndex& index) {
  std::string text =
      "model_checkpoint_path: " + QuoteTextProto(index.latest) + "\n";
  for (const auto& p : index.all) {
    text += "all_model_checkpoint_paths: " + QuoteTextProto(p) + "\n";
  }
  WriteFileAtomically(JoinPath(dir, kIndexFilename), text);
}

std::string ResolveInDir(const std::string& dir, const std::string& p) {
  return !p.empty() && p.front() == '/' ? p : JoinPath(dir, p);
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
  for (const auto& nt : data.tensors) {
    const std::string where =
        "cannot save '" + path + "': tensor '" + nt.name + "'";
    SLIM_CHECK(nt.tensor.defined(), where, " is undefined");
    SLIM_CHECK(!nt.name.empty(), "cannot save '", path, "': empty tensor name");
    SLIM_CHECK(nt.name != kMetadataKey, where, ": the name is reserved");
    SLIM_CHECK(IsValidUtf8(nt.name), where, ": name is not valid UTF-8");
    SLIM_CHECK(names.insert(nt.name).second, where, " appears twice");
    const DtypeInfo* dtype = DtypeByType(nt.tensor.scalar_type());
    SLIM_CHECK(dtype != nullptr, where, " has unsupported dtype ",
               nt.tensor.scalar_type());
    torch::Tensor t = nt.tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype->itemsize;
    if (header.size() > 1) header += ",";
    AppendJsonString(nt.name, &header);
    header += ":{\"dtype\":\"";
    header += dtype->name;
    header += "\",\"shape\":[";
    for (int64_t i = 0; i < t.dim(); ++i) {
      if (i > 0) header += ",";
      header += std::to_string(t.size(i));
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
    cpu.push_back(std::move(t));
  }
  if (!data.metadata.empty()) {
    if (header.size() > 1) header += ",";
    AppendJsonString(kMetadataKey, &header);
    header += ":{";
    bool first = true;
    for (const auto& kv : data.metadata) {
      SLIM_CHECK(IsValidUtf8(kv.first) && IsValidUtf8(kv.second),
                 "cannot save '", path, "': metadata '", kv.first,
                 "' is not valid UTF-8");
      if (!first) header += ",";
      first = false;
      AppendJsonString(kv.first, &header);
      header += ":";
      AppendJsonString(kv.second, &header);
    }
    header += "}";
  }
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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SLIM_CHECK(fd >= 0, "cannot open checkpoint '", path,
             "': ", std::strerror(errno));
  FdCloser closer(fd);
  struct stat st;
  SLIM_CHECK(::fstat(fd, &st) == 0, "cannot stat '", path,
             "': ", std::strerror(errno));
  SLIM_CHECK(S_ISREG(st.st_mode), "checkpoint '", path,
             "' is not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  SLIM_CHECK(file_size >= 8, "checkpoint '", path,
             "' is truncated: ", file_size,
             " bytes, less than the 8-byte header length");
  uint8_t size_le[8];
  PreadFully(fd, size_le, 8, 0, path);
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= uint64_t(size_le[i]) << (8 * i);
  SLIM_CHECK(header_size >= 2 && header_size <= kMaxHeaderBytes, "checkpoint '",
             path, "': implausible header length ", header_size,
             " (not a safetensors file?)");
  SLIM_CHECK(header_size <= file_size - 8, "checkpoint '", path,
             "' is truncated: header length ", header_size, " but only ",
             file_size - 8, " bytes follow the length field");
  std::string text(header_size, '\0');
  PreadFully(fd, &text[0], header_size, 8, path);
  SLIM_CHECK(IsValidUtf8(text), "invalid safetensors header in '", path,
             "': not valid UTF-8");
  Header header = HeaderParser(text, path).Parse();

  const uint64_t data_start = 8 + header_size;
  const uint64_t data_size = file_size - data_start;
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : header.tensors) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorEntry* a, const TensorEntry* b) {
                     return a->begin < b->begin ||
                            (a->begin == b->begin && a->end < b->end);
                   });
  uint64_t expected_begin = 0;
  for (const TensorEntry* t : by_offset) {
    const std::string where =
        "checkpoint '" + path + "': tensor '" + t->name + "'";
    const DtypeInfo* dtype = DtypeByName(t->dtype);
    SLIM_CHECK(dtype != nullptr, where, " has unsupported dtype '", t->dtype,
               "' (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or "
               "BOOL)");
    SLIM_CHECK(t->begin == expected_begin && t->end >= t->begin, where,
               ": data_offsets [", t->begin, ", ", t->end,
               "] are not contiguous (expected to begin at ", expected_begin,
               ")");
    SLIM_CHECK(t->end <= data_size, where, ": data_offsets [", t->begin, ", ",
               t->end, "] run past the end of the data section (", data_size,
               " bytes; file truncated?)");
    uint64_t bytes = dtype->itemsize;
    for (int64_t d : t->shape) {
      SLIM_CHECK(d == 0 || bytes <= std::numeric_limits<uint64_t>::max() /
                                        static_cast<uint64_t>(d),
                 where, ": shape is too large");
      bytes *= static_cast<uint64_t>(d);
    }
    SLIM_CHECK(bytes == t->end - t->begin, where, ": shape and dtype ",
               t->dtype, " need ", bytes, " bytes but data_offsets [", t->begin,
               ", ", t->end, "] hold ", t->end - t->begin);
    expected_begin = t->end;
  }
  SLIM_CHECK(
      expected_begin == data_size, "checkpoint '", path, "': tensors cover ",
      expected_begin, " bytes but the data section holds ", data_size,
      expected_begin < data_size ? " (trailing bytes)" : " (file truncated?)");

  CheckpointData out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(by_offset.size());
  for (const TensorEntry* t : by_offset) {
    const DtypeInfo* dtype = DtypeByName(t->dtype);
    torch::Tensor tensor =
        torch::empty(t->shape, torch::TensorOptions().dtype(dtype->type));
    const uint64_t bytes = t->end - t->begin;
    if (bytes > 0) {
      PreadFully(fd, tensor.data_ptr(), bytes, data_start + t->begin, path);
    }
    if (dtype->type == torch::kBool && bytes > 0) {
      const uint8_t* p = static_cast<const uint8_t*>(tensor.data_ptr());
      SLIM_CHECK(std::all_of(p, p + bytes, [](uint8_t b) { return b <= 1; }),
                 "checkpoint '", path, "': tensor '", t->name,
                 "' (BOOL) holds bytes other than 0 and 1");
    }
    out.tensors.push_back({t->name, std::move(tensor)});
  }
  return out;
}

CheckpointManager::CheckpointManager(std::string dir, int max_to_keep,
                                     CheckpointFormat format)
    : dir_(std::move(dir)), max_to_keep_(max_to_keep), format_(format) {}

std::string CheckpointManager::Save(int64_t step, const CheckpointData& data) {
  MakeDirs(dir_);
  const bool tf = format_ == CheckpointFormat::kTensorFlow;
  const std::string name =
      "model.ckpt-" + std::to_string(step) + (tf ? "" : ".safetensors");
  const std::string path = JoinPath(dir_, name);
  if (tf) {
    SaveTfCheckpoint(path, data.tensors);
  } else {
    SaveCheckpoint(path, data);
  }

  CheckpointIndex index = ReadIndex(dir_).value_or(CheckpointIndex{});
  index.all.erase(std::remove(index.all.begin(), index.all.end(), name),
                  index.all.end());
  index.all.push_back(name);
  std::vector<std::string> dropped;
  if (max_to_keep_ > 0 && index.all.size() > size_t(max_to_keep_)) {
    const size_t n_drop = index.all.size() - size_t(max_to_keep_);
    dropped.assign(index.all.begin(), index.all.begin() + n_drop);
    index.all.erase(index.all.begin(), index.all.begin() + n_drop);
  }
  index.latest = name;
  WriteIndex(dir_, index);
  for (const auto& p : dropped) {
    std::error_code ec;
    const std::string dropped_path = ResolveInDir(dir_, p);
    if (fs::is_regular_file(dropped_path + ".index", ec)) {
      // A TensorFlow bundle: its index first (then it is no checkpoint).
      fs::remove(dropped_path + ".index", ec);
      for (const std::string& f : Glob(dropped_path + ".data-*-of-*")) {
        fs::remove(f, ec);
      }
    }
    fs::remove(dropped_path, ec);  // already gone is fine
  }
  return path;
}

std::optional<std::string> CheckpointManager::Latest() const {
  return LatestCheckpoint(dir_);
}

std::optional<std::string> LatestCheckpoint(const std::string& dir) {
  std::optional<CheckpointIndex> index = ReadIndex(dir);
  if (!index || index->latest.empty()) return std::nullopt;
  const std::string path = ResolveInDir(dir, index->latest);
  // A directory moved or copied elsewhere (TensorFlow's Saver writes
  // absolute paths): its own file of that name, when the path is gone.
  std::error_code ec;
  const auto exists = [&](const std::string& p) {
    return fs::exists(p, ec) || fs::exists(p + ".index", ec);
  };
  if (index->latest.front() == '/' && !exists(path)) {
    const std::string here =
        JoinPath(dir, fs::path(index->latest).filename().string());
    if (exists(here)) return here;
  }
  return path;
}

std::string ResolveCheckpointPath(const std::string& path_or_dir) {
  std::error_code ec;
  if (fs::is_directory(path_or_dir, ec)) {
    std::optional<std::string> latest = LatestCheckpoint(path_or_dir);
    SLIM_CHECK(latest.has_value(), "no checkpoint found in ", path_or_dir);
    SLIM_CHECK(fs::is_regular_file(*latest, ec) ||
                   fs::is_regular_file(*latest + ".index", ec),
               "checkpoint index '", JoinPath(path_or_dir, kIndexFilename),
               "' names '", *latest, "', which does not exist");
    return *latest;
  }
  if (fs::is_regular_file(path_or_dir, ec)) return path_or_dir;
  SLIM_CHECK(!PathExists(path_or_dir), "checkpoint '", path_or_dir,
             "' is not a regular file");
  SLIM_FAIL("checkpoint '", path_or_dir, "' does not exist");
}

}  // namespace slimtorch
