#include "slimtorch/io/sstable.h"

// LevelDB's table format as TensorFlow uses it; see the header.

#include <algorithm>
#include <cstring>

#ifdef SLIMTORCH_WITH_SNAPPY
#include <snappy.h>
#endif

#include "slimtorch/core/error.h"
#include "slimtorch/io/crc32c.h"

namespace slimtorch {
namespace sstable {
namespace {

constexpr size_t kBlockTrailerSize = 5;  // type byte + masked CRC
constexpr char kNoCompression = 0;
constexpr char kSnappyCompression = 1;

uint32_t LoadFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian hosts only (as TensorFlow)
  return v;
}

void PutFixed32(std::string* s, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  s->append(b, 4);
}

void PutVarint64(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

struct Handle {
  uint64_t offset = 0, size = 0;
};

bool DecodeHandle(const char** p, const char* end, Handle* h) {
  return DecodeVarint64(p, end, &h->offset) && DecodeVarint64(p, end, &h->size);
}

// A block's contents, checked and (when compressed) uncompressed into
// `scratch`.
std::string_view ReadBlock(const char* data, size_t size, const Handle& h,
                           const char* what, const std::string& context,
                           std::string* scratch) {
  SLIM_CHECK(h.offset <= size && h.size <= size - h.offset &&
                 kBlockTrailerSize <= size - h.offset - h.size,
             context, ": truncated or corrupt table: the ", what, " block at ",
             h.offset, " (", h.size, " bytes) runs past the end of the ", size,
             "-byte file");
  const char* block = data + h.offset;
  const char type = block[h.size];
  const uint32_t stored = crc32c::Unmask(LoadFixed32(block + h.size + 1));
  const uint32_t actual = crc32c::Value(block, h.size + 1);  // + type
  SLIM_CHECK(stored == actual, context, ": CRC mismatch in the ", what,
             " block at byte ", h.offset, " (", h.size,
             " bytes): the file is corrupt");
  if (type == kNoCompression) return std::string_view(block, h.size);
  SLIM_CHECK(type == kSnappyCompression, context, ": unknown compression ",
             static_cast<int>(type), " in the ", what, " block at byte ",
             h.offset, " (expected 0 none or 1 snappy)");
#ifdef SLIMTORCH_WITH_SNAPPY
  size_t n = 0;
  SLIM_CHECK(snappy::GetUncompressedLength(block, h.size, &n) &&
                 (scratch->resize(n),
                  snappy::RawUncompress(block, h.size, scratch->data())),
             context, ": corrupt snappy data in the ", what, " block at byte ",
             h.offset);
  return *scratch;
#else
  (void)scratch;
  SLIM_FAIL(context, ": the ", what, " block at byte ", h.offset,
            " is snappy-compressed, and this build has no snappy (install "
            "libsnappy-dev and rebuild)");
#endif
}

// Calls fn(key, value) for each entry of a block's contents.
void ForEachInBlock(
    std::string_view block, const char* what, const std::string& context,
    const std::function<void(std::string_view, std::string_view)>& fn) {
  SLIM_CHECK(block.size() >= 4, context, ": corrupt ", what, " block (",
             block.size(), " bytes, no restart count)");
  const uint32_t restarts = LoadFixed32(block.data() + block.size() - 4);
  SLIM_CHECK(restarts <= (block.size() - 4) / 4, context, ": corrupt ", what,
             " block (", restarts, " restart points in ", block.size(),
             " bytes)");
  const char* p = block.data();
  const char* end = block.data() + block.size() - 4 - 4 * restarts;
  std::string key;
  while (p < end) {
    uint64_t shared, unshared, value_size;
    SLIM_CHECK(DecodeVarint64(&p, end, &shared) &&
                   DecodeVarint64(&p, end, &unshared) &&
                   DecodeVarint64(&p, end, &value_size) &&
                   shared <= key.size() &&
                   unshared <= static_cast<uint64_t>(end - p) &&
                   value_size <= static_cast<uint64_t>(end - p) - unshared,
               context, ": corrupt entry in the ", what, " block after key '",
               key, "'");
    key.resize(shared);
    key.append(p, unshared);
    p += unshared;
    fn(key, std::string_view(p, value_size));
    p += value_size;
  }
}

}  // namespace

bool DecodeVarint64(const char** p, const char* end, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift <= 63 && *p < end; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(*(*p)++);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

bool HasSnappy() {
#ifdef SLIMTORCH_WITH_SNAPPY
  return true;
#else
  return false;
#endif
}

bool HasTableMagic(const char* data, size_t size) {
  if (size < kFooterSize) return false;
  const uint64_t magic = static_cast<uint64_t>(LoadFixed32(data + size - 8)) |
                         static_cast<uint64_t>(LoadFixed32(data + size - 4))
                             << 32;
  return magic == kTableMagic;
}

void ForEachEntry(
    const char* data, size_t size, const std::string& context,
    const std::function<void(std::string_view, std::string_view)>& fn) {
  SLIM_CHECK(HasTableMagic(data, size), context,
             ": not a TensorFlow checkpoint table (", size,
             " bytes, no table footer magic at the end: truncated, or "
             "another kind of file)");
  const char* footer = data + size - kFooterSize;
  const char* p = footer;
  Handle meta, index;
  SLIM_CHECK(DecodeHandle(&p, footer + 40, &meta) &&
                 DecodeHandle(&p, footer + 40, &index),
             context, ": corrupt table footer");
  std::string index_scratch, block_scratch;
  const std::string_view index_block =
      ReadBlock(data, size, index, "index", context, &index_scratch);
  std::string previous;
  bool first = true;
  ForEachInBlock(
      index_block, "index", context,
      [&](std::string_view, std::string_view value) {
        const char* q = value.data();
        Handle h;
        SLIM_CHECK(DecodeHandle(&q, value.data() + value.size(), &h), context,
                   ": corrupt block handle in the index block");
        const std::string_view block =
            ReadBlock(data, size, h, "data", context, &block_scratch);
        ForEachInBlock(block, "data", context,
                       [&](std::string_view key, std::string_view v) {
                         SLIM_CHECK(first || previous < key, context,
                                    ": keys out of order ('", previous,
                                    "' then '", key,
                                    "'): the table is corrupt");
                         first = false;
                         previous.assign(key.data(), key.size());
                         fn(key, v);
                       });
      });
}

// ---------------------------------------------------------------- Builder

Builder::Builder(size_t block_size, int restart_interval)
    : block_size_(block_size), restart_interval_(restart_interval) {}

void Builder::AddToBlock(Block* b, int restart_interval, std::string_view key,
                         std::string_view value) {
  size_t shared = 0;
  if (b->counter < restart_interval) {
    const size_t n = std::min(b->last_key.size(), key.size());
    while (shared < n && b->last_key[shared] == key[shared]) ++shared;
  } else {
    b->restarts.push_back(static_cast<uint32_t>(b->data.size()));
    b->counter = 0;
  }
  PutVarint64(&b->data, shared);
  PutVarint64(&b->data, key.size() - shared);
  PutVarint64(&b->data, value.size());
  b->data.append(key.data() + shared, key.size() - shared);
  b->data.append(value.data(), value.size());
  b->last_key.assign(key.data(), key.size());
  ++b->counter;
}

std::string Builder::FinishBlock(Block* b) {
  std::string out = std::move(b->data);
  for (uint32_t r : b->restarts) PutFixed32(&out, r);
  PutFixed32(&out, static_cast<uint32_t>(b->restarts.size()));
  *b = Block();
  return out;
}

void Builder::WriteRaw(const std::string& contents, uint64_t* offset,
                       uint64_t* size) {
  *offset = out_.size();
  *size = contents.size();
  out_ += contents;
  const char type = kNoCompression;
  out_.push_back(type);
  const uint32_t crc = crc32c::Extend(crc32c::Value(contents), &type, 1);
  PutFixed32(&out_, crc32c::Mask(crc));
}

void Builder::FlushBlock() {
  if (data_block_.empty()) return;
  WriteRaw(FinishBlock(&data_block_), &pending_offset_, &pending_size_);
  pending_index_ = true;
}

void Builder::Add(std::string_view key, std::string_view value) {
  SLIM_CHECK(entries_ == 0 || std::string_view(last_key_) < key,
             "sstable::Builder: keys must increase ('", last_key_, "' then '",
             key, "')");
  if (pending_index_) {
    // The shortest key >= the flushed block's last key and < `key`.
    size_t diff = 0;
    const size_t n = std::min(last_key_.size(), key.size());
    while (diff < n && last_key_[diff] == key[diff]) ++diff;
    if (diff < n) {
      const uint8_t byte = static_cast<uint8_t>(last_key_[diff]);
      if (byte < 0xff && byte + 1 < static_cast<uint8_t>(key[diff])) {
        last_key_[diff] = static_cast<char>(byte + 1);
        last_key_.resize(diff + 1);
      }
    }
    std::string handle;
    PutVarint64(&handle, pending_offset_);
    PutVarint64(&handle, pending_size_);
    AddToBlock(&index_block_, 1, last_key_, handle);
    pending_index_ = false;
  }
  last_key_.assign(key.data(), key.size());
  ++entries_;
  AddToBlock(&data_block_, restart_interval_, key, value);
  const size_t estimate =
      data_block_.data.size() + 4 * data_block_.restarts.size() + 4;
  if (estimate >= block_size_) FlushBlock();
}

std::string Builder::Finish() {
  FlushBlock();
  Block meta;
  uint64_t meta_offset, meta_size, index_offset, index_size;
  WriteRaw(FinishBlock(&meta), &meta_offset, &meta_size);
  if (pending_index_) {
    // The shortest key >= the last key.
    for (size_t i = 0; i < last_key_.size(); ++i) {
      const uint8_t byte = static_cast<uint8_t>(last_key_[i]);
      if (byte != 0xff) {
        last_key_[i] = static_cast<char>(byte + 1);
        last_key_.resize(i + 1);
        break;
      }
    }
    std::string handle;
    PutVarint64(&handle, pending_offset_);
    PutVarint64(&handle, pending_size_);
    AddToBlock(&index_block_, 1, last_key_, handle);
    pending_index_ = false;
  }
  WriteRaw(FinishBlock(&index_block_), &index_offset, &index_size);
  std::string footer;
  PutVarint64(&footer, meta_offset);
  PutVarint64(&footer, meta_size);
  PutVarint64(&footer, index_offset);
  PutVarint64(&footer, index_size);
  footer.resize(40, '\0');
  PutFixed32(&footer, static_cast<uint32_t>(kTableMagic & 0xffffffffu));
  PutFixed32(&footer, static_cast<uint32_t>(kTableMagic >> 32));
  out_ += footer;
  return std::move(out_);
}

}  // namespace sstable
}  // namespace slimtorch
