#pragma once
// TFRecord files, byte-compatible with TensorFlow's tf.io.TFRecordWriter.
//
// Each record is framed as (persisted format, do not change):
//   uint64 length (little endian)
//   uint32 masked_crc32c(length bytes)
//   byte   data[length]
//   uint32 masked_crc32c(data)
// Uncompressed files only (TF-Slim's datasets are uncompressed).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "slimtorch/core/file_util.h"

namespace slimtorch {

// Writes records to a temporary file and renames it onto `path` on Close(),
// so a reader never sees a half-written shard under its final name.
// Destroying an unclosed writer discards the file. Not thread-safe.
class TFRecordWriter {
 public:
  explicit TFRecordWriter(const std::string& path);
  void Write(const std::string& record);
  void Write(const void* data, size_t size);
  // Commits the file under its final name. Throws on I/O failure.
  void Close();
  uint64_t num_records() const { return num_records_; }

 private:
  AtomicFileWriter file_;
  uint64_t num_records_ = 0;
};

// Frames one record exactly as TFRecordWriter writes it (used by tests and by
// in-memory writers).
std::string FrameTFRecord(const std::string& record);

// Sequential reader. Read() returns false at a clean end of file; a truncated
// record, a bad length CRC or a bad data CRC throws slimtorch::Error naming
// the file, the record index and the byte offset. A length over
// ResourceLimits::max_record_bytes (core/resource_limits.h) or over what the
// file still holds is refused before the record's memory is taken. Not
// thread-safe.
class TFRecordReader {
 public:
  explicit TFRecordReader(const std::string& path, bool verify_crc = true);
  ~TFRecordReader();
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;

  // Reads the next record into *record; false at end of file.
  bool Read(std::string* record);

  // Continues reading at byte `offset`, which must be where record number
  // `record_index` starts (an offset() seen earlier): resuming a reader
  // without reading what came before. Throws when the file is shorter.
  void Seek(uint64_t offset, uint64_t record_index);

  const std::string& path() const { return path_; }
  // Byte offset of the next record.
  uint64_t offset() const { return offset_; }
  // Index of the next record (0-based).
  uint64_t record_index() const { return record_index_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  // Throws unless a record of `length` bytes may be read at offset_.
  void CheckLength(uint64_t length);

  bool verify_crc_;
  int64_t file_size_ = -1;  // fstat's size, taken on the first record
  uint64_t offset_ = 0;
  uint64_t record_index_ = 0;
};

// Counts the records in a file (verifying framing, not data CRCs).
uint64_t CountTFRecords(const std::string& path);

}  // namespace slimtorch
