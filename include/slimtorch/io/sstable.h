#pragma once
// LevelDB's sorted-string table, the container of TensorFlow checkpoints
// (V2's .index file, V1's whole file); tensorflow/core/lib/io/table*.
//
// A file is data blocks, an (empty) meta-index block, an index block and a
// 48-byte footer (two block handles, padding, magic 0xdb4775248b80fb57).
// Every block is followed by a compression byte (0 none, 1 snappy) and the
// masked CRC-32C of the block and that byte. A block holds prefix-compressed
// entries (shared key length, unshared length, value length as varints,
// then the key's new bytes and the value), restart points every N entries,
// their offsets and count. Persisted format: do not change.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace slimtorch {
namespace sstable {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterSize = 48;

// Reads a protobuf/LevelDB varint at *p (before `end`) and advances *p;
// false when it is truncated or longer than 64 bits.
bool DecodeVarint64(const char** p, const char* end, uint64_t* out);

// True when `size` bytes at `data` end with a table footer's magic.
bool HasTableMagic(const char* data, size_t size);

// True when this build reads snappy-compressed blocks (libsnappy found).
bool HasSnappy();

// Calls fn(key, value) for every entry, in key order. `data` (the whole
// file, e.g. memory-mapped) must stay valid during the call; the views are
// valid only during their callback (values point into `data` when their
// block is uncompressed). Every block's CRC is checked; a corrupt or
// truncated table, keys out of order, or a snappy block in a build without
// snappy throws naming `context`.
void ForEachEntry(const char* data, size_t size, const std::string& context,
                  const std::function<void(std::string_view key,
                                           std::string_view value)>& fn);

// Builds a table in memory, as TensorFlow's TableBuilder does with its
// options (256 KiB blocks, a restart every 16 entries, index restarts every
// entry, shortest separators, no compression), so that the bytes equal
// TensorFlow's for the same entries. Keys must be added in strictly
// increasing byte order.
class Builder {
 public:
  explicit Builder(size_t block_size = 262144, int restart_interval = 16);
  void Add(std::string_view key, std::string_view value);
  // The whole file. The builder is spent afterwards.
  std::string Finish();

 private:
  struct Block {
    std::string data;
    std::vector<uint32_t> restarts{0};
    int counter = 0;
    std::string last_key;
    bool empty() const { return data.empty() && counter == 0; }
  };
  static void AddToBlock(Block* b, int restart_interval, std::string_view key,
                         std::string_view value);
  static std::string FinishBlock(Block* b);
  void FlushBlock();
  void WriteRaw(const std::string& contents, uint64_t* offset, uint64_t* size);

  size_t block_size_;
  int restart_interval_;
  std::string out_;
  Block data_block_, index_block_;
  std::string last_key_;
  bool pending_index_ = false;
  uint64_t pending_offset_ = 0, pending_size_ = 0;
  int64_t entries_ = 0;
};

}  // namespace sstable
}  // namespace slimtorch
