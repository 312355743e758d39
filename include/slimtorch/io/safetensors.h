#pragma once
// Our checkpoint file: safetensors (an 8-byte little-endian header length, a
// JSON header of {name: {dtype, shape, data_offsets}} plus "__metadata__"
// (string → string), then the raw little-endian tensor bytes), readable from
// Python with the `safetensors` package. Persisted format: do not change.
// slimtorch also keeps a CRC-32C of the tensors and metadata in the header's
// metadata, under "slimtorch/crc32c" (safetensors readers ignore metadata
// they do not know), so that damage after writing is found on load.
// One file only; the training directory around it (index, latest, rotation)
// is checkpoint.h's.

#include <map>
#include <string>

#include "slimtorch/core/named_tensor.h"

namespace slimtorch {

struct CheckpointData {
  // Tensors in file order (ascending data offset); names unique, non-empty
  // and not "__metadata__". Saved as contiguous CPU copies (any device and
  // layout is accepted); loaded as contiguous CPU tensors owning their data.
  NamedTensors tensors;
  // Free-form string metadata (global_step, model_name, rng states, ...).
  std::map<std::string, std::string> metadata;

  // The tensor named `name`, or an undefined tensor.
  torch::Tensor Find(const std::string& name) const;
};

// Writes `data` to `path` atomically (temporary file + rename). Supports
// float32/64, float16, bfloat16, int8/16/32/64, uint8 and bool tensors
// (safetensors F32/F64, F16, BF16, I8/I16/I32/I64, U8, BOOL). Names and
// metadata must be valid UTF-8; the metadata key "slimtorch/crc32c" is
// reserved: the file's checksum goes there. Throws naming the file and the
// tensor.
void SaveCheckpoint(const std::string& path, const CheckpointData& data);

// Reads a safetensors file straight into tensor storage. Validates the
// header length against the file size, the JSON grammar, known dtypes,
// unique names, byte sizes (numel * itemsize) and that the data offsets
// tile the data section exactly, and the "slimtorch/crc32c" checksum when
// the file has one (files of other writers have none and load as they
// are); throws naming the file and the problem. The checksum is not among
// the returned metadata.
CheckpointData LoadCheckpoint(const std::string& path);

}  // namespace slimtorch
