#pragma once
// Selecting and restoring variables by TF-Slim name: the machinery behind
// resume, --checkpoint_path warm starts, --checkpoint_exclude_scopes,
// --trainable_scopes and --ignore_missing_vars.

#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {

// Splits a comma-separated flag value ("a/b, c") into trimmed non-empty
// parts.
std::vector<std::string> SplitScopes(const std::string& csv);

// True when `name` starts with one of `scopes` (TF-Slim's
// op.name.startswith(scope)).
bool InScopes(const std::string& name, const std::vector<std::string>& scopes);

struct RestoreOptions {
  // Variables under these scopes are not restored.
  std::vector<std::string> exclude_scopes;
  // Skip variables absent from the checkpoint (shape mismatches still fail).
  bool ignore_missing = false;
};

// Copies checkpoint values into `variables` (matched by name). Throws one
// error that lists every missing variable and every shape mismatch ("checkpoint '<path>' does not match the model: ..."). Returns
// the number of variables restored.
int RestoreVariables(const NamedTensors& variables, const CheckpointData& ckpt,
                     const std::string& ckpt_path,
                     const RestoreOptions& options = {});

// A --checkpoint_path read for `net`.
struct LoadedCheckpoint {
  std::string path;     // the file (safetensors) or prefix (TensorFlow)
  bool tensorflow = false;
  CheckpointData data;  // our names and layouts
};

// Reads either kind of checkpoint at `path_or_dir` (a file, a TensorFlow
// prefix or one of its files, or a directory with a "checkpoint" index).
// safetensors: as saved here. TensorFlow (V1 or V2, as published by
// TF-Slim): every model variable of `net` not under options.exclude_scopes
// (with `shadows`: its "<var>/ExponentialMovingAverage" instead), converted
// to our layout (FromTfLayout), and global_step. For a TensorFlow checkpoint
// the fit is checked here, in TensorFlow's terms: one error lists every
// variable missing (unless options.ignore_missing; shadows are left to
// RestoreMovingAverages) and every shape mismatch with both shapes in
// TensorFlow's layout.
LoadedCheckpoint LoadCheckpointFor(const std::string& path_or_dir, Net& net,
                                   const RestoreOptions& options,
                                   bool shadows);

// What RestoreCheckpointFor did.
struct RestoredCheckpoint {
  std::string path;  // the file (safetensors) or prefix (TensorFlow)
  bool tensorflow = false;
  int restored = 0;  // variables written
  c10::optional<int64_t> global_step;
};

// LoadCheckpointFor then RestoreVariables (or, with `shadows`,
// RestoreMovingAverages: every variable from its shadow), with the same
// checks and errors, but a TensorFlow checkpoint's tensors go straight from
// the file into the variables through one reused buffer (no temporary per
// tensor: what --checkpoint_path runs in train and eval).
RestoredCheckpoint RestoreCheckpointFor(const std::string& path_or_dir,
                                        Net& net, const RestoreOptions& options,
                                        bool shadows);

// A training checkpoint's tensors between our layouts and TensorFlow's
// (--checkpoint_format=tensorflow): a tensor named like a model variable, or
// under one ("<var>/Momentum", "<var>/ExponentialMovingAverage", ...), whose
// shape is the variable's converts as the variable does (ToTfLayout with the
// net's depth multipliers / FromTfLayout); the others (global_step, our own
// state) pass unchanged.
NamedTensors ToTfLayouts(const NamedTensors& tensors, Net& net);
NamedTensors FromTfLayouts(const NamedTensors& tensors, Net& net);

}  // namespace slimtorch
