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
// metadata must be valid UTF-8. Throws naming the file and the tensor.
void SaveCheckpoint(const std::string& path, const CheckpointData& data);

// Reads a safetensors file straight into tensor storage. Validates the
// header length against the file size, the JSON grammar, known dtypes,
// unique names, byte sizes (numel * itemsize) and that the data offsets
// tile the data section exactly; throws naming the file and the problem.
CheckpointData LoadCheckpoint(const std::string& path);

// What a CheckpointManager writes: safetensors files, or TensorFlow V2
// bundles ("model.ckpt-<step>.index" + ".data-00000-of-00001", named in the
// index by their prefix, as TensorFlow's Saver names them; tensor metadata
// is not kept there, and the caller hands tensors in TensorFlow's layouts).
enum class CheckpointFormat { kSafetensors, kTensorFlow };

// Saves numbered checkpoints into a directory and keeps the newest
// `max_to_keep` (all when <= 0). The list of kept files lives in the index,
// so a manager on an existing directory continues its rotation (whatever
// format the older ones have). Not thread-safe; one manager per directory.
class CheckpointManager {
 public:
  explicit CheckpointManager(
      std::string dir, int max_to_keep = 5,
      CheckpointFormat format = CheckpointFormat::kSafetensors);
  // Creates the directory if needed, writes model.ckpt-<step>.safetensors
  // (or the TensorFlow bundle model.ckpt-<step>) atomically, then the index
  // (atomically), then deletes the checkpoints that fell off the list.
  // Saving a step again replaces it and makes it the latest. Returns the
  // path (prefix) of the new checkpoint.
  std::string Save(int64_t step, const CheckpointData& data);
  // Full path of the latest checkpoint in the index, if any.
  std::optional<std::string> Latest() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int max_to_keep_;
  CheckpointFormat format_;
};

// The latest checkpoint named by `dir`'s index file (joined with `dir` when
// relative; an absolute path that no longer exists falls back to the file of
// that name in `dir`, for directories moved after TensorFlow wrote them), or
// nullopt when there is no index. Throws on a malformed index.
std::optional<std::string> LatestCheckpoint(const std::string& dir);

// A --checkpoint_path value: a directory resolves to its latest checkpoint
// (throws "no checkpoint found in <dir>" when it has no index, and names the
// index when it lists a missing file or TensorFlow prefix), a file to itself
// (throws when missing).
std::string ResolveCheckpointPath(const std::string& path_or_dir);

}  // namespace slimtorch
