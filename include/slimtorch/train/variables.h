#pragma once
// Selecting and restoring variables by TF-Slim name: the machinery behind
// resume, --checkpoint_path warm starts, --checkpoint_exclude_scopes,
// --trainable_scopes and --ignore_missing_vars.

#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/io/checkpoint.h"

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
// error that lists every missing variable and every shape or dtype
// mismatch ("checkpoint '<path>' does not match the model: ..."). Returns
// the number of variables restored.
int RestoreVariables(const NamedTensors& variables, const CheckpointData& ckpt,
                     const std::string& ckpt_path,
                     const RestoreOptions& options = {});

}  // namespace slimtorch
