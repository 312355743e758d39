#pragma once
// Post-training quantization: the activation ranges of an 8-bit net
// (Net::EnableQuantization) measured on a few batches of a dataset, no
// retraining (export_inference_graph --quantize --calibration_dataset_dir).

#include <cstdint>
#include <string>

#include "slimtorch/nets/net.h"
#include "slimtorch/nets/range_calibration.h"

namespace slimtorch {

struct CalibrationRun {
  std::string dataset_name;  // a registered dataset ("flowers", ...)
  std::string dataset_dir;
  std::string split_name = "train";
  // The net's evaluation preprocessing ("" = the model's own), at
  // image_size (the exported size).
  std::string preprocessing_name;
  std::string model_name;
  int64_t image_size = 0;
  bool use_grayscale = false;
  int64_t batch_size = 32;
  int64_t batches = 10;  // at most: fewer when the split is smaller
  nets::CalibrationOptions method;
};

struct CalibrationResult {
  int64_t batches = 0;
  int64_t examples = 0;
  int64_t ranges = 0;  // activation ranges set
};

// Runs `net` (quantized, eval mode) float over the batches, each quantized
// activation seen by an observer of `run.method`, then sets every
// activation range from its observer and every weight range from the
// (folded) weights. Throws naming the flag or dataset at fault: a dataset
// whose images do not fit the net (channels), an empty split, a range that
// collapsed to zero width.
CalibrationResult CalibrateQuantization(Net& net, const CalibrationRun& run);

}  // namespace slimtorch
