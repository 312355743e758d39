#pragma once
// Checkpoint averaging (ours; docs/training_recipes.md): the
// element-wise mean of several checkpoints of one run, as fairseq's
// average_checkpoints.py and timm's avg_checkpoints.py make it, for either
// format (all inputs of one kind; the output of that kind).
//
// Every floating-point tensor (model variables, moving averages, optimizer
// slots) becomes the mean over the inputs, summed in float64 and cast back
// to its dtype; every other tensor (global_step, the resume state, ...) and
// the safetensors metadata come from the newest input (the last given).
// Each floating tensor must be in every input with the same shape; the
// error names the file and the tensor.

#include <string>
#include <vector>

namespace slimtorch {

struct AverageResult {
  int averaged = 0;  // floating tensors averaged
  int copied = 0;    // other tensors taken from the newest
  bool tensorflow = false;
};

// Averages `inputs` (paths as OpenCheckpoint takes them, oldest first) into
// `output`: a safetensors file, or a TensorFlow V2 prefix when the inputs
// are TensorFlow checkpoints; written atomically (nothing is left under
// `output` on failure).
AverageResult AverageCheckpoints(const std::vector<std::string>& inputs,
                                 const std::string& output);

// The newest `count` checkpoints `dir`'s index lists, oldest first; throws
// when it lists fewer (or some are gone).
std::vector<std::string> LastCheckpoints(const std::string& dir, int count);

}  // namespace slimtorch
