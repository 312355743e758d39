#pragma once
// The post-training quantization flags that eval_image_classifier and
// export_inference_graph share (ours; TF-Slim has no calibration), defined
// in calibration_flags.cc, which both tools (and only they) compile.

#include <gflags/gflags.h>

#include "slimtorch/eval/calibration.h"

DECLARE_string(calibration_dataset_dir);
DECLARE_string(calibration_dataset_name);
DECLARE_string(calibration_split_name);
DECLARE_int32(calibration_batches);
DECLARE_int32(calibration_batch_size);
DECLARE_string(calibration_method);
DECLARE_double(calibration_percentile);

namespace slimtorch {
namespace tools {

// The calibration the flags ask for (the preprocessing and the image size
// are the tool's own).
CalibrationRun CalibrationFromFlags();

}  // namespace tools
}  // namespace slimtorch
