#include "slimtorch/io/tfrecord.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <climits>

#include <cerrno>
#include <cstring>

#include "slimtorch/core/error.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/crc32c.h"

namespace slimtorch {
namespace {

void EncodeFixed64(char* buf, uint64_t v) {
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void EncodeFixed32(char* buf, uint32_t v) {
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t DecodeFixed64(const char* buf) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<uint8_t>(buf[i])) << (8 * i);
  return v;
}
uint32_t DecodeFixed32(const char* buf) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<uint8_t>(buf[i])) << (8 * i);
  return v;
}

void FrameHeader(size_t size, char header[12]) {
  EncodeFixed64(header, size);
  EncodeFixed32(header + 8, crc32c::Mask(crc32c::Value(header, 8)));
}

}  // namespace

TFRecordWriter::TFRecordWriter(const std::string& path) : file_(path) {}

void TFRecordWriter::Write(const std::string& record) {
  Write(record.data(), record.size());
}

void TFRecordWriter::Write(const void* data, size_t size) {
  char header[12];
  FrameHeader(size, header);
  char footer[4];
  EncodeFixed32(footer, crc32c::Mask(crc32c::Value(data, size)));
  file_.Write(header, sizeof(header));
  file_.Write(data, size);
  file_.Write(footer, sizeof(footer));
  ++num_records_;
}

void TFRecordWriter::Close() { file_.Commit(); }

std::string FrameTFRecord(const std::string& record) {
  char header[12];
  FrameHeader(record.size(), header);
  char footer[4];
  EncodeFixed32(footer, crc32c::Mask(crc32c::Value(record)));
  std::string out(header, sizeof(header));
  out += record;
  out.append(footer, sizeof(footer));
  return out;
}

TFRecordReader::TFRecordReader(const std::string& path, bool verify_crc)
    : path_(path), verify_crc_(verify_crc) {
  file_ = std::fopen(path.c_str(), "rb");
  SLIM_CHECK(file_ != nullptr, "cannot open TFRecord file '", path, "': ",
             std::strerror(errno));
}

TFRecordReader::~TFRecordReader() {
  if (file_ != nullptr) std::fclose(file_);
}

void TFRecordReader::Seek(uint64_t offset, uint64_t record_index) {
  SLIM_CHECK(std::fseek(file_, 0, SEEK_END) == 0, path_, ": cannot seek: ",
             std::strerror(errno));
  const off_t size = ftello(file_);
  SLIM_CHECK(size >= 0 && static_cast<uint64_t>(size) >= offset, path_,
             ": cannot resume at byte offset ", offset, " (record ",
             record_index, "): the file has ", size, " bytes");
  SLIM_CHECK(fseeko(file_, static_cast<off_t>(offset), SEEK_SET) == 0, path_,
             ": cannot seek to byte offset ", offset, ": ",
             std::strerror(errno));
  offset_ = offset;
  record_index_ = record_index;
}

void TFRecordReader::CheckLength(uint64_t length) {
  const uint64_t limit = GetResourceLimits().max_record_bytes;
  SLIM_CHECK(length <= limit, path_, ": record ", record_index_,
             " at byte offset ", offset_, " claims ", length,
             " bytes, more than a record may hold (",
             LimitHint(limit, "bytes", "SLIMTORCH_MAX_RECORD_BYTES"), ")");
  if (file_size_ < 0) {
    struct stat st;
    file_size_ = ::fstat(fileno(file_), &st) == 0 && S_ISREG(st.st_mode)
                     ? static_cast<int64_t>(st.st_size)
                     : INT64_MAX;
  }
  // What the file can still hold: a lying length fails here, before the
  // allocation, as the truncation it is.
  const uint64_t left = static_cast<uint64_t>(file_size_) -
                        std::min<uint64_t>(offset_ + 12, file_size_);
  SLIM_CHECK(length <= left, path_, ": truncated record ", record_index_,
             " at byte offset ", offset_, " (its header claims ", length,
             " data bytes, the file holds ", left, " more)");
}

bool TFRecordReader::Read(std::string* record) {
  char header[12];
  size_t n = std::fread(header, 1, sizeof(header), file_);
  if (n == 0 && std::feof(file_)) return false;
  SLIM_CHECK(n == sizeof(header), path_, ": truncated record ", record_index_,
             " at byte offset ", offset_, " (", n,
             " of 12 header bytes present)");
  uint64_t length = DecodeFixed64(header);
  uint32_t length_crc = DecodeFixed32(header + 8);
  SLIM_CHECK(crc32c::Unmask(length_crc) == crc32c::Value(header, 8), path_,
             ": corrupted record ", record_index_, " at byte offset ", offset_,
             ": length CRC mismatch");
  CheckLength(length);
  record->resize(length);
  n = length == 0 ? 0 : std::fread(&(*record)[0], 1, length, file_);
  char footer[4];
  size_t m = n == length ? std::fread(footer, 1, 4, file_) : 0;
  SLIM_CHECK(n == length && m == 4, path_, ": truncated record ",
             record_index_, " at byte offset ", offset_, " (expected ",
             length + 16, " bytes, file ends after ", 12 + n + m, ")");
  if (verify_crc_) {
    SLIM_CHECK(crc32c::Unmask(DecodeFixed32(footer)) ==
                   crc32c::Value(record->data(), record->size()),
               path_, ": corrupted record ", record_index_,
               " at byte offset ", offset_, ": data CRC mismatch");
  }
  offset_ += 16 + length;
  ++record_index_;
  return true;
}

uint64_t CountTFRecords(const std::string& path) {
  TFRecordReader reader(path, /*verify_crc=*/false);
  std::string record;
  while (reader.Read(&record)) {
  }
  return reader.record_index();
}

}  // namespace slimtorch
