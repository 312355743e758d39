// libFuzzer target: TensorFlow checkpoints from arbitrary bytes. The input's
// first byte picks the kind (its low bit: V2 bundle or V1 file; its second
// bit: raw table bytes, or table entries that the target builds into a table
// with sstable::Builder, so that the block CRCs hold and the fuzzer reaches
// the entries' decoding). Then, for V2, 4 bytes (little-endian) give the size
// of the table part and the rest is the one data shard. Entries are
// (varint key size, key, varint value size, value) repeated; keys are sorted
// and deduplicated before building. The reader opens it and reads every tensor it
// lists: any outcome but a slimtorch::Error is a finding (a crash, a leak, an
// ASan report, another exception). Built and run by tests/fuzz/run_fuzzers.sh;
// replayed in CTest (fuzz_target.h).
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>

#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/sstable.h"
#include "slimtorch/io/tf_checkpoint.h"

namespace {

// The table part as written: raw, or built from entries.
std::string Table(const uint8_t* data, size_t size, bool build) {
  const char* p = reinterpret_cast<const char*>(data);
  const char* end = p + size;
  if (!build) return std::string(p, end);
  std::map<std::string, std::string> entries;
  while (p < end) {
    uint64_t n = 0, m = 0;
    if (!slimtorch::sstable::DecodeVarint64(&p, end, &n) ||
        n > static_cast<uint64_t>(end - p)) {
      break;
    }
    std::string key(p, n);
    p += n;
    if (!slimtorch::sstable::DecodeVarint64(&p, end, &m) ||
        m > static_cast<uint64_t>(end - p)) {
      break;
    }
    entries[key] = std::string(p, m);
    p += m;
  }
  slimtorch::sstable::Builder builder;
  for (const auto& e : entries) builder.Add(e.first, e.second);
  return builder.Finish();
}

void Write(const std::string& path, const std::string& bytes) {
  slimtorch::WriteFileAtomically(path, bytes);
}

}  // namespace

SLIM_FUZZ_TARGET(tf_checkpoint) {
  if (size < 1) return 0;
  const std::string prefix =
      slimtorch::fuzz::FreshDir("tf_checkpoint") + "/model.ckpt-1";
  const bool v1 = data[0] & 1;
  const bool build = data[0] & 2;
  ++data;
  --size;
  if (v1) {
    Write(prefix, Table(data, size, build));
  } else {
    if (size < 4) return 0;
    size_t n = data[0] | data[1] << 8 | data[2] << 16 |
               static_cast<size_t>(data[3]) << 24;
    data += 4;
    size -= 4;
    if (n > size) n = size;
    Write(prefix + ".index", Table(data, n, build));
    Write(prefix + ".data-00000-of-00001",
          std::string(reinterpret_cast<const char*>(data) + n, size - n));
  }
  try {
    const slimtorch::TfCheckpointReader reader(prefix);
    for (const slimtorch::TfTensorInfo& t : reader.tensors()) {
      if (!t.supported) continue;
      try {
        reader.Read(t.name);
      } catch (const slimtorch::Error&) {
      }
    }
  } catch (const slimtorch::Error&) {
  }
  return 0;
}
