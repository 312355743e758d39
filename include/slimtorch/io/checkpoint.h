#pragma once
// The checkpoint directory, above both file formats (safetensors.h, ours;
// tf_checkpoint.h, TensorFlow's), and OpenCheckpoint: the one place that
// decides what a checkpoint path names.
//
// A training directory holds "model.ckpt-<step>.safetensors" files (or
// TensorFlow bundles "model.ckpt-<step>") and an index file "checkpoint"
// naming the latest, in the text form of TF's CheckpointState:
//   model_checkpoint_path: "model.ckpt-200.safetensors"
//   all_model_checkpoint_paths: "model.ckpt-100.safetensors"
//   all_model_checkpoint_paths: "model.ckpt-200.safetensors"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "slimtorch/io/safetensors.h"
#include "slimtorch/io/tf_checkpoint.h"

namespace slimtorch {

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
  // Writes model.ckpt-<step>.safetensors (or the TensorFlow bundle
  // model.ckpt-<step>) atomically, then the index (atomically), then deletes
  // the checkpoints that fell off the list. Saving a step again replaces it
  // and makes it the latest. Returns the path (prefix) of the new
  // checkpoint. On any failure it throws naming the file and the index
  // still names the checkpoints before, all complete (a new file the old
  // index does not list is removed). The first Save creates the directory
  // when it did not exist as the manager was made; later, a directory that
  // has disappeared is an error, not created again (as TensorFlow's Saver:
  // "Parent directory of ... doesn't exist").
  std::string Save(int64_t step, const CheckpointData& data);
  // Full path of the latest checkpoint in the index, if any.
  std::optional<std::string> Latest() const;
  const std::string& dir() const { return dir_; }

 private:
  // Creates the directory on the first Save, or checks it is still there.
  void PrepareDir();

  std::string dir_;
  int max_to_keep_;
  CheckpointFormat format_;
  bool dir_made_ = false;  // the directory existed or this manager made it
};

// The latest checkpoint named by `dir`'s index file (joined with `dir` when
// relative; an absolute path that no longer exists falls back to the file of
// that name in `dir`, for directories moved after TensorFlow wrote them), or
// nullopt when there is no index. Throws on a malformed index.
std::optional<std::string> LatestCheckpoint(const std::string& dir);

// Every checkpoint `dir`'s index lists, as full paths (as LatestCheckpoint
// resolves them), oldest first, the latest last; empty when there is no
// index. Whether their files exist is not checked. Throws on a malformed
// index.
std::vector<std::string> ListedCheckpoints(const std::string& dir);

// Whether checkpoint `path` (a safetensors file or a TensorFlow prefix, as
// the index names them) still has its files.
bool CheckpointExists(const std::string& path);

// A train_dir's recovery policy after a damaged or removed checkpoint.
//
// The checkpoint a trainer resumes from in `train_dir`: the index's latest,
// or, when its files are gone (removed by hand after it was found damaged),
// the newest listed one that is still there (logged as a warning). nullopt
// when there is no index (training starts afresh); throws when the index
// lists checkpoints and none of them exists.
std::optional<std::string> ResumableCheckpoint(const std::string& train_dir);

// What a user does when checkpoint `path` of `train_dir` cannot be read:
// which files to remove so that the next run resumes from the newest listed
// checkpoint before it (named), or, when there is none, to train from the
// start. A sentence for the end of an error message.
std::string ResumeFromEarlierAdvice(const std::string& train_dir,
                                    const std::string& path);

// A --checkpoint_path value: a directory resolves to its latest checkpoint
// (throws "no checkpoint found in <dir>" when it has no index, and names the
// index when it lists a missing file or TensorFlow prefix), a file to itself
// (throws when missing).
std::string ResolveCheckpointPath(const std::string& path_or_dir);

// A TensorFlow checkpoint by any path TensorFlow takes: LocateTfCheckpoint's,
// or a directory whose "checkpoint" file names one of those. nullopt when
// nothing there is a TensorFlow checkpoint; throws on a malformed
// "checkpoint" file.
std::optional<TfCheckpointLocation> FindTfCheckpoint(const std::string& path);

// What FindTfCheckpoint looked for, for "not found" errors.
std::string TfCheckpointCandidates(const std::string& path);

// TfPrefixReader opened on FindTfCheckpoint(path) (throws naming what it
// looked for when there is none).
class TfCheckpointReader : public TfPrefixReader {
 public:
  explicit TfCheckpointReader(const std::string& path);
};

// A checkpoint of either kind, opened by OpenCheckpoint.
class OpenedCheckpoint {
 public:
  // A TensorFlow checkpoint (V1 or V2) rather than a safetensors file.
  bool tensorflow() const { return tf_ != nullptr; }
  // The safetensors file, or the TensorFlow checkpoint's prefix.
  const std::string& path() const { return path_; }
  // Every tensor, sorted by name, as stored (a TensorFlow checkpoint:
  // TensorFlow's names and layouts); dtypes as TensorFlow's DataType numbers
  // for both kinds.
  const std::vector<TfTensorInfo>& tensors() const;
  // A CPU tensor holding `name`'s values as stored; throws when there is no
  // such tensor or slimtorch does not read its dtype.
  torch::Tensor Read(const std::string& name) const;
  // The safetensors file as loaded (tensors in file order, metadata). Only
  // for a safetensors checkpoint.
  const CheckpointData& data() const;
  // The TensorFlow reader (tensors read on demand). Only for a TensorFlow
  // checkpoint.
  const TfPrefixReader& tf() const;

 private:
  friend OpenedCheckpoint OpenCheckpoint(const std::string& path);
  std::string given_;  // the path as OpenCheckpoint got it
  std::string path_;
  CheckpointData data_;                 // safetensors
  std::vector<TfTensorInfo> listing_;   // safetensors
  std::unique_ptr<TfPrefixReader> tf_;  // TensorFlow
};

// Opens what `path` names: a TensorFlow checkpoint by FindTfCheckpoint's
// rules (a prefix, one of its files, a V1 file, or a directory whose latest
// is one), else a safetensors file by ResolveCheckpointPath's (the file, or
// a directory's latest; its errors for a missing path or checkpoint). A
// safetensors file is read at once; a TensorFlow checkpoint's index at once
// and its tensors on demand.
OpenedCheckpoint OpenCheckpoint(const std::string& path);

}  // namespace slimtorch
