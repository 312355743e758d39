#include "slimtorch/io/tf_checkpoint.h"

// TensorFlow checkpoints (V2 bundles, V1 slice tables); see the header.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/crc32c.h"
#include "slimtorch/io/sstable.h"
#include "tensor_bundle.pb.h"

namespace slimtorch {
namespace {

namespace fs = std::filesystem;
using Extents = std::vector<std::pair<int64_t, int64_t>>;  // start, length

constexpr int kBundleVersion = 1;  // TensorFlow's kTensorBundleVersion

std::optional<torch::ScalarType> TorchType(int tf_dtype) {
  switch (tf_dtype) {
    case proto::DT_FLOAT:
      return torch::kFloat;
    case proto::DT_DOUBLE:
      return torch::kDouble;
    case proto::DT_INT32:
      return torch::kInt;
    case proto::DT_UINT8:
      return torch::kByte;
    case proto::DT_INT16:
      return torch::kShort;
    case proto::DT_INT8:
      return torch::kChar;
    case proto::DT_INT64:
      return torch::kLong;
    case proto::DT_BOOL:
      return torch::kBool;
    case proto::DT_BFLOAT16:
      return torch::kBFloat16;
    case proto::DT_HALF:
      return torch::kHalf;
    default:
      return std::nullopt;
  }
}

int TfType(torch::ScalarType t, const std::string& name) {
  switch (t) {
    case torch::kFloat:
      return proto::DT_FLOAT;
    case torch::kDouble:
      return proto::DT_DOUBLE;
    case torch::kInt:
      return proto::DT_INT32;
    case torch::kByte:
      return proto::DT_UINT8;
    case torch::kShort:
      return proto::DT_INT16;
    case torch::kChar:
      return proto::DT_INT8;
    case torch::kLong:
      return proto::DT_INT64;
    case torch::kBool:
      return proto::DT_BOOL;
    case torch::kBFloat16:
      return proto::DT_BFLOAT16;
    case torch::kHalf:
      return proto::DT_HALF;
    default:
      SLIM_FAIL("tensor '", name, "' has dtype ", c10::toString(t),
                ", which a TensorFlow checkpoint cannot hold here");
  }
}

std::vector<int64_t> ShapeOf(const proto::TensorShapeProto& s,
                             const std::string& context) {
  SLIM_CHECK(!s.unknown_rank(), context, ": shape of unknown rank");
  std::vector<int64_t> out;
  for (const auto& d : s.dim()) {
    SLIM_CHECK(d.size() >= 0, context, ": negative dimension ", d.size());
    out.push_back(d.size());
  }
  return out;
}

// A slice's extents with whole dimensions spelled out; checked against
// `shape`.
Extents ResolveExtents(const proto::TensorSliceProto& slice,
                       const std::vector<int64_t>& shape,
                       const std::string& context) {
  SLIM_CHECK(slice.extent_size() == 0 ||
                 slice.extent_size() == static_cast<int>(shape.size()),
             context, ": a slice of rank ", slice.extent_size(),
             " of a tensor of shape ", ShapeString(shape));
  Extents out;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t start = 0, length = shape[d];
    if (slice.extent_size() > 0) {
      const auto& e = slice.extent(static_cast<int>(d));
      if (e.has_length_case() == proto::TensorSliceProto::Extent::kLength) {
        start = e.start();
        length = e.length();
      }
    }
    SLIM_CHECK(start >= 0 && length >= 0 && start <= shape[d] &&
                   length <= shape[d] - start,
               context, ": slice [", start, ", +", length,
               ") outside dimension ", d, " of shape ", ShapeString(shape));
    out.emplace_back(start, length);
  }
  return out;
}

// The region of `full` that `extents` covers.
torch::Tensor Region(torch::Tensor full, const Extents& extents) {
  for (size_t d = 0; d < extents.size(); ++d) {
    full = full.narrow(static_cast<int64_t>(d), extents[d].first,
                       extents[d].second);
  }
  return full;
}

// ---------------------------------------------------------------- wire

// One field of a protobuf message: number, wire type, and its payload
// (varint / fixed value in `number_value`, bytes in `bytes`).
struct WireField {
  int number = 0;
  int type = 0;
  uint64_t number_value = 0;
  std::string_view bytes;
};

// Reads the next field at *p; false at the end, throws when malformed.
bool NextField(const char** p, const char* end, WireField* f,
               const std::string& context) {
  if (*p >= end) return false;
  uint64_t tag;
  SLIM_CHECK(sstable::DecodeVarint64(p, end, &tag), context,
             ": corrupt protobuf");
  f->number = static_cast<int>(tag >> 3);
  f->type = static_cast<int>(tag & 7);
  switch (f->type) {
    case 0:
      SLIM_CHECK(sstable::DecodeVarint64(p, end, &f->number_value), context,
                 ": corrupt protobuf varint");
      return true;
    case 1:
      SLIM_CHECK(end - *p >= 8, context, ": truncated protobuf");
      std::memcpy(&f->number_value, *p, 8);
      *p += 8;
      return true;
    case 5: {
      SLIM_CHECK(end - *p >= 4, context, ": truncated protobuf");
      uint32_t v;
      std::memcpy(&v, *p, 4);
      f->number_value = v;
      *p += 4;
      return true;
    }
    case 2: {
      uint64_t len;
      SLIM_CHECK(sstable::DecodeVarint64(p, end, &len) &&
                     len <= static_cast<uint64_t>(end - *p),
                 context, ": truncated protobuf field ", f->number);
      f->bytes = std::string_view(*p, len);
      *p += len;
      return true;
    }
    default:
      SLIM_FAIL(context, ": corrupt protobuf (wire type ", f->type, ")");
  }
}

// The TensorProto field that holds `tf_dtype`'s values when they are not in
// tensor_content (float_val 5, double_val 6, int_val 7, int64_val 10,
// bool_val 11, half_val 13).
int ValuesField(int tf_dtype, const std::string& context) {
  switch (tf_dtype) {
    case proto::DT_FLOAT:
      return 5;
    case proto::DT_DOUBLE:
      return 6;
    case proto::DT_INT32:
    case proto::DT_INT16:
    case proto::DT_INT8:
    case proto::DT_UINT8:
      return 7;
    case proto::DT_INT64:
      return 10;
    case proto::DT_BOOL:
      return 11;
    case proto::DT_HALF:
    case proto::DT_BFLOAT16:
      return 13;
    default:
      SLIM_FAIL(context, ": unsupported dtype ", TfDtypeName(tf_dtype));
  }
}

// Stores varint-encoded value `v` at `d` as one element of `tf_dtype`.
void StoreInteger(uint64_t v, int tf_dtype, char* d) {
  switch (tf_dtype) {
    case proto::DT_INT32: {
      const int32_t x = static_cast<int32_t>(v);
      std::memcpy(d, &x, 4);
      break;
    }
    case proto::DT_INT16: {
      const int16_t x = static_cast<int16_t>(v);
      std::memcpy(d, &x, 2);
      break;
    }
    case proto::DT_HALF:
    case proto::DT_BFLOAT16: {
      const uint16_t x = static_cast<uint16_t>(v);
      std::memcpy(d, &x, 2);
      break;
    }
    case proto::DT_INT8:
    case proto::DT_UINT8:
      *d = static_cast<char>(v);
      break;
    case proto::DT_BOOL:
      *d = v != 0;
      break;
    default: {  // int64
      const int64_t x = static_cast<int64_t>(v);
      std::memcpy(d, &x, 8);
    }
  }
}

// Fills a contiguous tensor from a TensorProto's fields, value by value or
// in runs of raw bytes, refusing more values than it holds.
class TensorProtoValues {
 public:
  TensorProtoValues(int tf_dtype, const torch::Tensor& out,
                    const std::string& context)
      : tf_dtype_(tf_dtype),
        values_field_(ValuesField(tf_dtype, context)),
        n_(out.numel()),
        item_(out.element_size()),
        dst_(static_cast<char*>(out.data_ptr())),
        context_(context) {}

  // Takes field `f` of the TensorProto.
  void Add(const WireField& f) {
    if (f.number == 4 && f.type == 2) {  // tensor_content
      SLIM_CHECK(filled_ == 0 && f.bytes.size() == n_ * item_, context_,
                 ": tensor_content of ", f.bytes.size(), " bytes for ", n_,
                 " values of ", item_, " bytes");
      std::memcpy(dst_, f.bytes.data(), f.bytes.size());
      filled_ = n_;
    } else if (f.number == values_field_) {
      AddValues(f);
    } else {
      SLIM_CHECK(f.number <= 3, context_, ": values in TensorProto field ",
                 f.number, ", expected field ", values_field_, " for ",
                 TfDtypeName(tf_dtype_));
    }
  }

  // Checks that every value came.
  void Finish() const {
    SLIM_CHECK(filled_ == n_, context_, ": ", filled_,
               " values for a slice of ", n_);
  }

 private:
  // The typed repeated field, packed or one value per field.
  void AddValues(const WireField& f) {
    const bool fixed = values_field_ == 5 || values_field_ == 6;
    if (f.type == 2 && fixed) {  // packed floats / doubles
      SLIM_CHECK(
          f.bytes.size() % item_ == 0 &&
              static_cast<int64_t>(f.bytes.size() / item_) <= n_ - filled_,
          context_, ": ", f.bytes.size(), " bytes of values for ", n_,
          " values of ", item_, " bytes");
      std::memcpy(dst_ + filled_ * item_, f.bytes.data(), f.bytes.size());
      filled_ += static_cast<int64_t>(f.bytes.size() / item_);
    } else if (f.type == 2) {  // packed varints
      const char* q = f.bytes.data();
      const char* qend = q + f.bytes.size();
      while (q < qend) {
        uint64_t v;
        SLIM_CHECK(sstable::DecodeVarint64(&q, qend, &v), context_,
                   ": corrupt values");
        PutInteger(v);
      }
    } else if (fixed) {  // one float (wire type 5) or double (1)
      SLIM_CHECK(filled_ < n_ && f.type == (item_ == 4 ? 5 : 1), context_,
                 ": unexpected value encoding");
      std::memcpy(dst_ + filled_ * item_, &f.number_value, item_);
      ++filled_;
    } else {
      SLIM_CHECK(f.type == 0, context_, ": unexpected value encoding");
      PutInteger(f.number_value);
    }
  }

  void PutInteger(uint64_t v) {
    SLIM_CHECK(filled_ < n_, context_, ": more values than the slice's ", n_);
    StoreInteger(v, tf_dtype_, dst_ + filled_ * item_);
    ++filled_;
  }

  const int tf_dtype_;
  const int values_field_;
  const int64_t n_;
  const size_t item_;
  char* const dst_;
  const std::string& context_;
  int64_t filled_ = 0;
};

// Decodes a TensorProto's values (tensor_content or the typed repeated
// field TensorFlow's V1 writer uses) into `out` (contiguous, its dtype).
void DecodeTensorProto(std::string_view bytes, int tf_dtype,
                       const torch::Tensor& out, const std::string& context) {
  TensorProtoValues values(tf_dtype, out, context);
  const char* p = bytes.data();
  const char* end = bytes.data() + bytes.size();
  WireField f;
  while (NextField(&p, end, &f, context)) values.Add(f);
  values.Finish();
}

// ---------------------------------------------------------------- files

// Opens `path` for reading; returns the descriptor and sets *size.
int OpenForRead(const std::string& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SLIM_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    SLIM_FAIL("cannot stat '", path, "'");
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

class MappedFile {
 public:
  explicit MappedFile(const std::string& path) : path_(path) {
    uint64_t size = 0;
    fd_ = OpenForRead(path, &size);
    size_ = static_cast<size_t>(size);
    if (size_ > 0) {
      void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      SLIM_CHECK(m != MAP_FAILED, "cannot map '", path,
                 "': ", std::strerror(errno));
      data_ = static_cast<const char*>(m);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

class ShardFile {
 public:
  explicit ShardFile(const std::string& path)
      : path_(path), fd_(OpenForRead(path, &size_)) {}
  ~ShardFile() { ::close(fd_); }
  void ReadAt(uint64_t offset, uint64_t n, char* out,
              const std::string& tensor) const {
    SLIM_CHECK(offset <= size_ && n <= size_ - offset, "'", path_,
               "' is truncated: tensor '", tensor, "' needs bytes [", offset,
               ", ", offset + n, ") of a ", size_, "-byte file");
    while (n > 0) {
      const ssize_t got = ::pread(fd_, out, std::min<uint64_t>(n, 1u << 30),
                                  static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      SLIM_CHECK(got > 0, "cannot read tensor '", tensor, "' from '", path_,
                 "': ", got < 0 ? std::strerror(errno) : "unexpected end");
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t size_ = 0;  // before fd_: set by OpenForRead in fd_'s initializer
  int fd_ = -1;
};

bool IsTableFile(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  const uint64_t size = fs::file_size(path, ec);
  if (ec || size < sstable::kFooterSize) return false;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char tail[sstable::kFooterSize];
  const bool ok =
      std::fseek(f, -static_cast<long>(sizeof(tail)), SEEK_END) == 0 &&
      std::fread(tail, 1, sizeof(tail), f) == sizeof(tail);
  std::fclose(f);
  return ok && sstable::HasTableMagic(tail, sizeof(tail));
}

// TensorFlow's OrderedCode (tensorflow/core/lib/strings/ordered_code.cc).
void WriteNumIncreasing(std::string* dest, uint64_t v) {
  char buf[9];
  int len = 0;
  while (v > 0) {
    ++len;
    buf[9 - len] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  dest->push_back(static_cast<char>(len));
  dest->append(buf + 9 - len, len);
}

void WriteSignedNumIncreasing(std::string* dest, int64_t v) {
  static const uint8_t kHeader[11][2] = {
      {0, 0},    {0x80, 0}, {0xc0, 0}, {0xe0, 0},    {0xf0, 0},   {0xf8, 0},
      {0xfc, 0}, {0xfe, 0}, {0xff, 0}, {0xff, 0x80}, {0xff, 0xc0}};
  const uint64_t x =
      v < 0 ? ~static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (x < 64) {
    dest->push_back(static_cast<char>(kHeader[1][0] ^ static_cast<uint8_t>(v)));
    return;
  }
  int bits = 0;
  for (uint64_t y = x; y; y >>= 1) ++bits;
  const int len = bits / 7 + 1;  // 2..10
  uint8_t buf[10];
  const uint8_t sign = v < 0 ? 0xff : 0;
  buf[0] = buf[1] = sign;
  for (int i = 0; i < 8; ++i) {
    buf[2 + i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (56 - 8 * i));
  }
  uint8_t* begin = buf + 10 - len;
  begin[0] ^= kHeader[len][0];
  begin[1] ^= kHeader[len][1];
  dest->append(reinterpret_cast<const char*>(begin), len);
}

}  // namespace

std::string TfSliceKey(const std::string& name, const Extents& extents) {
  std::string key;
  WriteNumIncreasing(&key, 0);
  for (char c : name) {
    if (c == '\0') {
      key.append("\x00\xff", 2);
    } else if (c == '\xff') {
      key.append("\xff\x00", 2);
    } else {
      key.push_back(c);
    }
  }
  key.append("\x00\x01", 2);
  WriteNumIncreasing(&key, extents.size());
  for (const auto& e : extents) {
    WriteSignedNumIncreasing(&key, e.first);
    WriteSignedNumIncreasing(&key, e.second);
  }
  return key;
}

std::optional<torch::ScalarType> TorchDtypeOf(int tf_dtype) {
  return TorchType(tf_dtype);
}

int TfDtypeOf(torch::ScalarType dtype, const std::string& name) {
  return TfType(dtype, name);
}

std::string TfDtypeName(int tf_dtype) {
  switch (tf_dtype) {
    case proto::DT_FLOAT:
      return "float";
    case proto::DT_DOUBLE:
      return "double";
    case proto::DT_INT32:
      return "int32";
    case proto::DT_UINT8:
      return "uint8";
    case proto::DT_INT16:
      return "int16";
    case proto::DT_INT8:
      return "int8";
    case proto::DT_STRING:
      return "string";
    case proto::DT_COMPLEX64:
      return "complex64";
    case proto::DT_INT64:
      return "int64";
    case proto::DT_BOOL:
      return "bool";
    case proto::DT_BFLOAT16:
      return "bfloat16";
    case proto::DT_UINT16:
      return "uint16";
    case proto::DT_COMPLEX128:
      return "complex128";
    case proto::DT_HALF:
      return "half";
    case proto::DT_RESOURCE:
      return "resource";
    case proto::DT_VARIANT:
      return "variant";
    case proto::DT_UINT32:
      return "uint32";
    case proto::DT_UINT64:
      return "uint64";
    default:
      return "DataType " + std::to_string(tf_dtype);
  }
}

std::optional<TfCheckpointLocation> LocateTfCheckpoint(
    const std::string& path) {
  std::error_code ec;
  std::string p = path;
  static const std::regex kDataFile(R"(^(.*)\.data-\d{5}-of-\d{5}$)");
  std::smatch m;
  if (EndsWith(p, ".index") && fs::is_regular_file(p, ec)) {
    p.resize(p.size() - 6);
  } else if (EndsWith(p, ".meta") && fs::is_regular_file(p, ec)) {
    p.resize(p.size() - 5);
  } else if (std::regex_match(p, m, kDataFile)) {
    p = m[1].str();
  }
  TfCheckpointLocation loc;
  loc.prefix = p;
  if (fs::is_regular_file(p + ".index", ec)) {
    loc.format = TfCheckpointFormat::kV2;
    return loc;
  }
  loc.format = TfCheckpointFormat::kV1;
  if (IsTableFile(p)) {
    loc.files = {p};
    return loc;
  }
  for (const std::string& f :
       Glob(p + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]")) {
    if (IsTableFile(f)) loc.files.push_back(f);
  }
  if (!loc.files.empty()) return loc;
  return std::nullopt;
}

// ---------------------------------------------------------------- reader

struct TfPrefixReader::Impl {
  TfCheckpointLocation loc;
  std::vector<TfTensorInfo> tensors;
  std::map<std::string, size_t> by_name;

  // V2
  std::map<std::string, proto::BundleEntryProto> entries;
  std::vector<std::unique_ptr<ShardFile>> shards;
  std::string index_path;

  // V1
  struct Slice {
    Extents extents;
    std::string_view tensor_proto;
    size_t file = 0;
  };
  std::vector<std::unique_ptr<MappedFile>> maps;
  std::deque<std::string> owned;  // values of compressed blocks
  std::map<std::string, std::vector<Slice>> slices;

  void OpenV2();
  void OpenV1();
  // The "" entry of a V1 table: its tensor list (SavedTensorSlices.meta).
  void AddV1TensorList(std::string_view value, const std::string& context);
  // Another entry: the slices it holds (SavedSlice: name, extents, values).
  void AddV1Slices(std::string_view value, size_t file,
                   const std::string& context);
  void AddTensor(const std::string& name, int dtype, std::vector<int64_t> shape,
                 const std::string& context);
  void ReadV2(const TfTensorInfo& info, const torch::Tensor& out) const;
  const ShardFile& CheckedShard(const std::string& name,
                                const proto::BundleEntryProto& entry,
                                const std::vector<int64_t>& shape,
                                uint64_t bytes) const;
  void CheckCrc(const std::string& name, const proto::BundleEntryProto& entry,
                const ShardFile& shard, const char* data) const;
  void ReadV2Entry(const std::string& name,
                   const proto::BundleEntryProto& entry,
                   const torch::Tensor& out) const;
  void ReadV1(const TfTensorInfo& info, const torch::Tensor& out) const;
};

void TfPrefixReader::Impl::AddTensor(const std::string& name, int dtype,
                                     std::vector<int64_t> shape,
                                     const std::string& context) {
  auto it = by_name.find(name);
  if (it != by_name.end()) {
    const TfTensorInfo& seen = tensors[it->second];
    SLIM_CHECK(seen.tf_dtype == dtype && seen.shape == shape, context,
               ": tensor '", name, "' listed twice, as ",
               TfDtypeName(seen.tf_dtype), ShapeString(seen.shape), " and ",
               TfDtypeName(dtype), ShapeString(shape));
    return;
  }
  TfTensorInfo info;
  info.name = name;
  info.tf_dtype = dtype;
  info.shape = std::move(shape);
  info.supported = TorchType(dtype).has_value();
  by_name[name] = tensors.size();
  tensors.push_back(std::move(info));
}

void TfPrefixReader::Impl::OpenV2() {
  index_path = loc.prefix + ".index";
  const std::string index = ReadFileToString(index_path);
  const std::string context = StrCat("'", index_path, "'");
  bool have_header = false;
  proto::BundleHeaderProto header;
  sstable::ForEachEntry(
      index.data(), index.size(), context,
      [&](std::string_view key, std::string_view value) {
        if (key.empty()) {
          SLIM_CHECK(header.ParseFromArray(value.data(),
                                           static_cast<int>(value.size())),
                     context, ": corrupt bundle header");
          have_header = true;
          return;
        }
        // The header's key "" sorts first.
        SLIM_CHECK(have_header, context,
                   ": not a TensorFlow checkpoint index (no bundle header)");
        proto::BundleEntryProto entry;
        SLIM_CHECK(
            entry.ParseFromArray(value.data(), static_cast<int>(value.size())),
            context, ": corrupt entry for tensor '", key, "'");
        entries.emplace(std::string(key), std::move(entry));
      });
  SLIM_CHECK(have_header, context,
             ": not a TensorFlow checkpoint index (no bundle header)");
  SLIM_CHECK(header.endianness() == proto::BundleHeaderProto::LITTLE, context,
             ": a big-endian checkpoint (only little-endian ones are read)");
  SLIM_CHECK(header.version().min_consumer() <= kBundleVersion, context,
             ": written for readers of bundle version ",
             header.version().min_consumer(), " or later (this one reads ",
             kBundleVersion, ")");
  SLIM_CHECK(header.num_shards() >= 1, context, ": ", header.num_shards(),
             " data shards");
  for (int i = 0; i < header.num_shards(); ++i) {
    char suffix[40];
    std::snprintf(suffix, sizeof(suffix), ".data-%05d-of-%05d", i,
                  header.num_shards());
    const std::string path = loc.prefix + suffix;
    SLIM_CHECK(PathExists(path), "checkpoint '", loc.prefix,
               "' is missing its data shard '", path, "' (the index lists ",
               header.num_shards(), ")");
    shards.push_back(std::make_unique<ShardFile>(path));
  }
  for (const auto& kv : entries) {
    if (!kv.first.empty() && kv.first[0] == '\0') continue;  // a slice
    const std::string tensor_context =
        StrCat(context, ", tensor '", kv.first, "'");
    AddTensor(kv.first, kv.second.dtype(),
              ShapeOf(kv.second.shape(), tensor_context), tensor_context);
  }
}

void TfPrefixReader::Impl::OpenV1() {
  for (size_t fi = 0; fi < loc.files.size(); ++fi) {
    maps.push_back(std::make_unique<MappedFile>(loc.files[fi]));
    const MappedFile& file = *maps.back();
    const std::string context = StrCat("'", file.path(), "'");
    bool have_meta = false;
    sstable::ForEachEntry(
        file.data(), file.size(), context,
        [&](std::string_view key, std::string_view value) {
          if (key.empty()) {
            AddV1TensorList(value, context);
            have_meta = true;
            return;
          }
          // A value points into the mapped file unless its block was
          // compressed: keep a copy of those.
          if (value.data() < file.data() ||
              value.data() >= file.data() + file.size()) {
            owned.emplace_back(value);
            value = owned.back();
          }
          AddV1Slices(value, fi, context);
        });
    SLIM_CHECK(have_meta, context,
               ": not a V1 TensorFlow checkpoint (no tensor list)");
  }
  for (const auto& kv : slices) {
    SLIM_CHECK(by_name.count(kv.first), "'", loc.prefix,
               "': values for tensor '", kv.first,
               "', which the checkpoint's tensor list lacks");
  }
}

void TfPrefixReader::Impl::AddV1TensorList(std::string_view value,
                                           const std::string& context) {
  proto::SavedTensorSlices saved;
  SLIM_CHECK(
      saved.ParseFromArray(value.data(), static_cast<int>(value.size())) &&
          saved.has_meta(),
      context, ": not a V1 checkpoint (corrupt metadata)");
  for (const auto& t : saved.meta().tensor()) {
    const std::string tc = StrCat(context, ", tensor '", t.name(), "'");
    AddTensor(t.name(), t.type(), ShapeOf(t.shape(), tc), tc);
  }
}

void TfPrefixReader::Impl::AddV1Slices(std::string_view value, size_t file,
                                       const std::string& context) {
  const char* p = value.data();
  const char* end = p + value.size();
  WireField f;
  while (NextField(&p, end, &f, context)) {
    if (f.number != 2 || f.type != 2) continue;  // SavedSlice data
    std::string name;
    proto::TensorSliceProto slice;
    std::string_view tensor_proto;
    const char* q = f.bytes.data();
    const char* qend = q + f.bytes.size();
    WireField g;
    while (NextField(&q, qend, &g, context)) {
      if (g.number == 1 && g.type == 2) name = std::string(g.bytes);
      if (g.number == 2 && g.type == 2) {
        SLIM_CHECK(slice.ParseFromArray(g.bytes.data(),
                                        static_cast<int>(g.bytes.size())),
                   context, ": corrupt slice of '", name, "'");
      }
      if (g.number == 3 && g.type == 2) tensor_proto = g.bytes;
    }
    Slice s;
    s.file = file;
    s.tensor_proto = tensor_proto;
    // Extents are resolved against the shape once all metadata is in.
    for (const auto& e : slice.extent()) {
      s.extents.emplace_back(
          e.start(),
          e.has_length_case() == proto::TensorSliceProto::Extent::kLength
              ? e.length()
              : -1);
    }
    slices[name].push_back(std::move(s));
  }
}

TfPrefixReader::TfPrefixReader(const TfCheckpointLocation& location)
    : impl_(std::make_unique<Impl>()) {
  impl_->loc = location;
  if (location.format == TfCheckpointFormat::kV2) {
    impl_->OpenV2();
  } else {
    impl_->OpenV1();
  }
  std::sort(impl_->tensors.begin(), impl_->tensors.end(),
            [](const TfTensorInfo& a, const TfTensorInfo& b) {
              return a.name < b.name;
            });
  impl_->by_name.clear();
  for (size_t i = 0; i < impl_->tensors.size(); ++i) {
    impl_->by_name[impl_->tensors[i].name] = i;
  }
}

TfPrefixReader::~TfPrefixReader() = default;

TfCheckpointFormat TfPrefixReader::format() const { return impl_->loc.format; }
const std::string& TfPrefixReader::prefix() const { return impl_->loc.prefix; }
const std::vector<TfTensorInfo>& TfPrefixReader::tensors() const {
  return impl_->tensors;
}

const TfTensorInfo* TfPrefixReader::Find(const std::string& name) const {
  auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &impl_->tensors[it->second];
}

const ShardFile& TfPrefixReader::Impl::CheckedShard(
    const std::string& name, const proto::BundleEntryProto& entry,
    const std::vector<int64_t>& shape, uint64_t bytes) const {
  SLIM_CHECK(entry.size() >= 0 && static_cast<uint64_t>(entry.size()) == bytes,
             "'", index_path, "': tensor '", name, "' of shape ",
             ShapeString(shape), " should take ", bytes,
             " bytes, the index says ", entry.size());
  SLIM_CHECK(entry.shard_id() >= 0 &&
                 entry.shard_id() < static_cast<int>(shards.size()) &&
                 entry.offset() >= 0,
             "'", index_path, "': tensor '", name, "' in shard ",
             entry.shard_id(), " at offset ", entry.offset(), " (there are ",
             shards.size(), " shards)");
  return *shards[entry.shard_id()];
}

void TfPrefixReader::Impl::CheckCrc(const std::string& name,
                                    const proto::BundleEntryProto& entry,
                                    const ShardFile& shard,
                                    const char* data) const {
  const uint32_t crc = crc32c::Value(data, static_cast<size_t>(entry.size()));
  SLIM_CHECK(crc == crc32c::Unmask(entry.crc32c()), "'", shard.path(),
             "': CRC mismatch for tensor '", name, "' (bytes ", entry.offset(),
             "..", entry.offset() + entry.size(),
             "): the data file is corrupt");
}

void TfPrefixReader::Impl::ReadV2Entry(const std::string& name,
                                       const proto::BundleEntryProto& entry,
                                       const torch::Tensor& out) const {
  const uint64_t bytes =
      static_cast<uint64_t>(out.numel()) * out.element_size();
  const ShardFile& shard = CheckedShard(name, entry, out.sizes().vec(), bytes);
  char* data = static_cast<char*>(out.data_ptr());
  shard.ReadAt(static_cast<uint64_t>(entry.offset()), bytes, data, name);
  CheckCrc(name, entry, shard, data);
}

void TfPrefixReader::Impl::ReadV2(const TfTensorInfo& info,
                                  const torch::Tensor& out) const {
  const proto::BundleEntryProto& entry = entries.at(info.name);
  if (entry.slices_size() == 0) {
    ReadV2Entry(info.name, entry, out);
    return;
  }
  int64_t covered = 0;
  for (const auto& slice : entry.slices()) {
    const std::string context =
        StrCat("'", index_path, "', tensor '", info.name, "'");
    const Extents extents = ResolveExtents(slice, info.shape, context);
    Extents key_extents;
    for (int d = 0; d < slice.extent_size(); ++d) {
      const auto& e = slice.extent(d);
      key_extents.emplace_back(
          e.start(),
          e.has_length_case() == proto::TensorSliceProto::Extent::kLength
              ? e.length()
              : -1);
    }
    auto it = entries.find(TfSliceKey(info.name, key_extents));
    SLIM_CHECK(it != entries.end(), context,
               ": the index lacks the entry of one of its slices");
    std::vector<int64_t> sizes;
    for (const auto& e : extents) sizes.push_back(e.second);
    torch::Tensor part = torch::empty(sizes, out.options());
    ReadV2Entry(info.name, it->second, part);
    Region(out, extents).copy_(part);
    covered += part.numel();
  }
  SLIM_CHECK(covered == out.numel(), "'", index_path, "': the slices of '",
             info.name, "' cover ", covered, " of its ", out.numel(),
             " values");
}

void TfPrefixReader::Impl::ReadV1(const TfTensorInfo& info,
                                  const torch::Tensor& out) const {
  auto it = slices.find(info.name);
  const std::string context =
      StrCat("'", loc.prefix, "', tensor '", info.name, "'");
  SLIM_CHECK(it != slices.end() || out.numel() == 0, context,
             ": no values stored");
  int64_t covered = 0;
  if (it != slices.end()) {
    for (const Slice& s : it->second) {
      proto::TensorSliceProto slice;
      for (const auto& e : s.extents) {
        auto* x = slice.add_extent();
        x->set_start(e.first);
        if (e.second >= 0) x->set_length(e.second);
      }
      const Extents extents = ResolveExtents(slice, info.shape, context);
      int64_t n = 1;
      for (const auto& e : extents) n *= e.second;
      if (n == out.numel()) {
        DecodeTensorProto(s.tensor_proto, info.tf_dtype, out, context);
      } else {
        std::vector<int64_t> sizes;
        for (const auto& e : extents) sizes.push_back(e.second);
        torch::Tensor part = torch::empty(sizes, out.options());
        DecodeTensorProto(s.tensor_proto, info.tf_dtype, part, context);
        Region(out, extents).copy_(part);
      }
      covered += n;
    }
  }
  SLIM_CHECK(covered == out.numel(), context, ": its slices cover ", covered,
             " of its ", out.numel(), " values");
}

const TfTensorInfo& TfPrefixReader::Readable(const std::string& name) const {
  const TfTensorInfo* info = Find(name);
  SLIM_CHECK(info != nullptr, "checkpoint '", prefix(), "' has no tensor '",
             name, "'");
  SLIM_CHECK(info->supported, "checkpoint '", prefix(), "': tensor '", name,
             "' has dtype ", TfDtypeName(info->tf_dtype),
             ", which slimtorch does not read");
  return *info;
}

torch::Tensor TfPrefixReader::Read(const std::string& name) const {
  const TfTensorInfo& info = Readable(name);
  torch::Tensor out = torch::empty(
      info.shape, torch::TensorOptions().dtype(*TorchType(info.tf_dtype)));
  ReadInto(name, out);
  return out;
}

void TfPrefixReader::ReadInto(const std::string& name,
                              const torch::Tensor& out) const {
  const TfTensorInfo& info = Readable(name);
  SLIM_CHECK(out.is_cpu() && out.is_contiguous() &&
                 out.scalar_type() == *TorchType(info.tf_dtype) &&
                 out.numel() == c10::multiply_integers(info.shape),
             "checkpoint '", prefix(), "': tensor '", name, "' (",
             TfDtypeName(info.tf_dtype), ShapeString(info.shape),
             ") cannot be read into a ", c10::toString(out.scalar_type()),
             " tensor of ", out.numel(), " elements");
  const torch::Tensor view = out.view(info.shape);
  if (format() == TfCheckpointFormat::kV2) {
    impl_->ReadV2(info, view);
  } else {
    impl_->ReadV1(info, view);
  }
}

NamedTensors TfPrefixReader::ReadAll(std::vector<std::string>* skipped) const {
  NamedTensors out;
  for (const TfTensorInfo& t : tensors()) {
    if (!t.supported) {
      if (skipped) skipped->push_back(t.name);
      continue;
    }
    out.push_back({t.name, Read(t.name)});
  }
  return out;
}

// ---------------------------------------------------------------- writer

void SaveTfCheckpoint(const std::string& prefix, const NamedTensors& tensors) {
  std::vector<const NamedTensor*> sorted;
  std::set<std::string> names;
  for (const NamedTensor& t : tensors) {
    SLIM_CHECK(!t.name.empty() && t.name[0] != '\0', "TensorFlow checkpoint '",
               prefix, "': empty tensor name");
    SLIM_CHECK(names.insert(t.name).second, "TensorFlow checkpoint '", prefix,
               "': tensor '", t.name, "' given twice");
    SLIM_CHECK(t.tensor.defined(), "TensorFlow checkpoint '", prefix,
               "': tensor '", t.name, "' is undefined");
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const NamedTensor* a, const NamedTensor* b) {
              return a->name < b->name;
            });
  const std::string data_path = prefix + ".data-00000-of-00001";
  const std::string index_path = prefix + ".index";
  MakeDirs(fs::path(prefix).parent_path().string());
  AtomicFileWriter data(data_path);
  sstable::Builder index;
  proto::BundleHeaderProto header;
  header.set_num_shards(1);
  header.mutable_version()->set_producer(kBundleVersion);
  index.Add("", header.SerializeAsString());
  for (const NamedTensor* t : sorted) {
    const int dtype = TfType(t->tensor.scalar_type(), t->name);
    const torch::Tensor cpu = t->tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes =
        static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
    proto::BundleEntryProto entry;
    entry.set_dtype(static_cast<proto::TfDataType>(dtype));
    auto* shape = entry.mutable_shape();
    for (int64_t d : cpu.sizes()) shape->add_dim()->set_size(d);
    entry.set_offset(static_cast<int64_t>(data.offset()));
    entry.set_size(static_cast<int64_t>(bytes));
    entry.set_crc32c(crc32c::Mask(crc32c::Value(cpu.data_ptr(), bytes)));
    data.Write(cpu.data_ptr(), bytes);
    index.Add(t->name, entry.SerializeAsString());
  }
  const std::string index_bytes = index.Finish();
  AtomicFileWriter index_file(index_path);
  index_file.Write(index_bytes);
  data.Commit();
  try {
    index_file.Commit();
  } catch (...) {
    std::error_code ec;
    fs::remove(data_path, ec);
    throw;
  }
}

}  // namespace slimtorch
