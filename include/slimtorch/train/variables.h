#pragma once
// Selecting and restoring variables by TF-Slim name: the machinery behind
// resume, --checkpoint_path warm starts, --checkpoint_exclude_scopes,
// --trainable_scopes and --ignore_missing_vars.

#include <map>
#include <set>
#include <string>
#include <utility>
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

// What the error for a checkpoint that does not fit the model says about the
// running tool: it names only flags the tool has.
struct MismatchHints {
  // --model_name as run ("": the message says "the model").
  std::string model_name;
  // The flag that named the checkpoint: "--checkpoint_path", or
  // "--train_dir" when training resumes from its own checkpoints.
  std::string checkpoint_flag = "--checkpoint_path";
  // The flags that set the model's number of classes (a logits mismatch
  // points at them); label_image: "--labels or --num_classes".
  std::string classes_flags =
      "--dataset_name, --dataset_dir and --labels_offset";
  // The flags that set the model's input channels (a first layer that takes
  // another number points at them).
  std::string channels_flags =
      "--dataset_name, --dataset_dir and --use_grayscale";
  // Whether the tool has --checkpoint_exclude_scopes and
  // --ignore_missing_vars (train_image_classifier's warm start): only then
  // does the error suggest them.
  bool scope_flags = false;
};

struct RestoreOptions {
  // Variables under these scopes are not restored.
  std::vector<std::string> exclude_scopes;
  // Skip variables absent from the checkpoint (shape mismatches still fail).
  bool ignore_missing = false;
  // Variables that may be absent (an 8-bit net's quantization ranges, which
  // a float checkpoint lacks): skipped when absent, their names appended to
  // *absent when it is set.
  std::set<std::string> optional;
  std::vector<std::string>* absent = nullptr;
  MismatchHints hints;
};

// Copies checkpoint values into `variables` (matched by name). When some do
// not fit (missing, another shape), nothing is copied and one short error
// says why (CheckpointMismatchError), the first few problems as examples and
// where the full list was written. Returns the number of variables restored.
int RestoreVariables(const NamedTensors& variables, const CheckpointData& ckpt,
                     const std::string& ckpt_path,
                     const RestoreOptions& options = {});

// An 8-bit net's quantization ranges (Net::EnableQuantization) may be
// absent from a checkpoint (a float one): adds them to options->optional,
// the absent ones to be noted in *absent. No-op for a float net.
void QuantizationRangesOptional(Net& net, RestoreOptions* options,
                                std::vector<std::string>* absent);
// Throws unless `absent` (from QuantizationRangesOptional) is empty: the
// checkpoint at `path` was trained without --quantize_delay, so it has no
// ranges to quantize with; the message offers the ways out.
void RequireQuantizationRanges(const std::string& path,
                               const std::vector<std::string>& absent);

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
// the fit is checked here, in TensorFlow's terms: variables missing (unless
// options.ignore_missing; shadows are left to RestoreMovingAverages) and
// shape mismatches, both shapes in TensorFlow's layout, make one
// CheckpointMismatchError.
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

// The names of the registered nets whose variables live under TF-Slim
// scope `scope` ("MobilenetV1" → mobilenet_v1, mobilenet_v1_025,
// mobilenet_v1_050, mobilenet_v1_075), in name order: the nets whose name,
// lower-cased without '_', starts with the scope so spelled (and i3d, s3dg
// under "InceptionV1"), each built once (small, 2 classes) to confirm its
// scope.
std::vector<std::string> NetsWithScope(const std::string& scope);
// NetsWithScope's filter before it builds a net: whether net `name` may
// live under `scope` ("mobilenet_v1_025" under "MobilenetV1": yes).
bool NetNameMatchesScope(const std::string& name, const std::string& scope);

// One variable that does not fit: `name` as the checkpoint spells it.
struct VariableMismatch {
  std::string name;
  bool missing = false;             // else the shapes differ, or the dtype
  std::vector<int64_t> checkpoint;  // shapes, when both exist
  std::vector<int64_t> model;
  std::string dtype;  // an unsupported dtype's name ("" for the others)
  std::string ToString() const;
};

// The error for a checkpoint that does not fit the model, short: one line
// that says the likely cause (which net the checkpoint looks like — its
// variables' top scope, and among nets of that scope the one whose shapes
// fit best, e.g. mobilenet_v1 vs mobilenet_v1_025 —, or that only its
// logits differ: another number of classes) and which of the tool's flags
// to check (`hints`), then at most 3 example problems, then, when there
// are more, where the full list was written (a file in the temporary
// directory). `checkpoint_shapes`: every tensor of the checkpoint;
// `model_shapes`: the model's variables, in model order; both in one
// layout, TensorFlow's when `tf_layout`.
std::string CheckpointMismatchError(
    const std::string& ckpt_path,
    const std::vector<VariableMismatch>& problems,
    const std::map<std::string, std::vector<int64_t>>& checkpoint_shapes,
    const std::vector<std::pair<std::string, std::vector<int64_t>>>&
        model_shapes,
    bool tf_layout, const MismatchHints& hints);

// A training checkpoint's tensors between our layouts and TensorFlow's
// (--checkpoint_format=tensorflow): a tensor named like a model variable, or
// under one ("<var>/Momentum", "<var>/ExponentialMovingAverage", ...), whose
// shape is the variable's converts as the variable does (ToTfLayout with the
// net's depth multipliers / FromTfLayout); the others (global_step, our own
// state) pass unchanged.
NamedTensors ToTfLayouts(const NamedTensors& tensors, Net& net);
NamedTensors FromTfLayouts(const NamedTensors& tensors, Net& net);

}  // namespace slimtorch
