#pragma once
// Checkpoints: safetensors files (an 8-byte little-endian header length, a
// JSON header of {name: {dtype, shape, data_offsets}} plus "__metadata__"
// (string → string), then the raw little-endian tensor bytes), readable from
// Python with the `safetensors` package. Persisted format: do not change.
//
// A training directory holds "model.ckpt-<step>.safetensors" files and an
// index file "checkpoint" naming the latest, in the text form of TF's
// CheckpointState:
//   model_checkpoint_path: "model.ckpt-200.safetensors"
//   all_model_checkpoint_paths: "model.ckpt-100.safetensors"
//   all_model_checkpoint_paths: "model.ckpt-200.safetensors"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"

namespace slimtorch {

struct CheckpointData {
  // Tensors in file order; names unique. Saved contiguous, on CPU.
  NamedTensors tensors;
  // Free-form string metadata (global_step, model_name, rng states, ...).
  std::map<std::string, std::string> metadata;

  // The tensor named `name`, or an undefined tensor.
  torch::Tensor Find(const std::string& name) const;
};

// Writes `data` to `path` atomically (temporary file + rename). Supports
// float32/64, float16, bfloat16, int8/16/32/64, uint8 and bool tensors.
void SaveCheckpoint(const std::string& path, const CheckpointData& data);

// Reads a safetensors file; validates the header (sizes, offsets, dtypes)
// and throws naming the file and what was wrong.
CheckpointData LoadCheckpoint(const std::string& path);

// Saves numbered checkpoints into a directory and keeps the newest
// `max_to_keep` (older files are deleted after the index is updated).
class CheckpointManager {
 public:
  explicit CheckpointManager(std::string dir, int max_to_keep = 5);
  // Writes model.ckpt-<step>.safetensors, then the index. Returns the path.
  std::string Save(int64_t step, const CheckpointData& data);
  // Full path of the latest checkpoint in the index, if any.
  std::optional<std::string> Latest() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int max_to_keep_;
};

// The latest checkpoint listed in `dir`'s index file, if any.
std::optional<std::string> LatestCheckpoint(const std::string& dir);

// A --checkpoint_path value: a directory resolves to its latest checkpoint
// (throws when it has none), a file to itself (throws when missing).
std::string ResolveCheckpointPath(const std::string& path_or_dir);

}  // namespace slimtorch
