#include "calibration_flags.h"

DEFINE_string(calibration_dataset_dir, "",
              "With --quantize: post-training quantization, the activation "
              "ranges measured on batches of this dataset instead of read "
              "from the checkpoint (ours).");
DEFINE_string(calibration_dataset_name, "",
              "The calibration dataset's name; empty: --dataset_name (ours).");
DEFINE_string(calibration_split_name, "train",
              "The calibration dataset's split (ours).");
DEFINE_int32(calibration_batches, 10,
             "Batches of the calibration split to measure (ours).");
DEFINE_int32(calibration_batch_size, 32, "Calibration batch size (ours).");
DEFINE_string(calibration_method, "minmax",
              "How a range follows from the activations seen: minmax, "
              "percentile or entropy (onnxruntime's calibrators) (ours).");
DEFINE_double(calibration_percentile, 99.999,
              "The percentile of |x| kept by --calibration_method=percentile "
              "(ours).");

namespace slimtorch {
namespace tools {

CalibrationRun CalibrationFromFlags() {
  CalibrationRun run;
  run.dataset_dir = FLAGS_calibration_dataset_dir;
  run.dataset_name = FLAGS_calibration_dataset_name;
  run.split_name = FLAGS_calibration_split_name;
  run.batches = FLAGS_calibration_batches;
  run.batch_size = FLAGS_calibration_batch_size;
  run.method =
      nets::CalibrationOptions()
          .method(nets::ParseCalibrationMethod(FLAGS_calibration_method))
          .percentile(FLAGS_calibration_percentile);
  return run;
}

}  // namespace tools
}  // namespace slimtorch
