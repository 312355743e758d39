// eval_image_classifier: TF-Slim's eval_image_classifier.py in C++.

#include <gflags/gflags.h>

#include <cstdio>

#include "calibration_flags.h"
#include "run_flags.h"
#include "slimtorch/core/error.h"
#include "slimtorch/eval/evaluator.h"
#include "tool_common.h"

DEFINE_int64(max_num_batches, 0,
             "Max number of batches to evaluate (0: one full pass, "
             "TF-Slim's None).");
DEFINE_string(checkpoint_path, "/tmp/tfmodel/",
              "The directory where the model was written to or an absolute "
              "path to a checkpoint file.");
DEFINE_string(eval_dir, "/tmp/tfmodel/",
              "Directory where the results are saved to.");
DEFINE_double(moving_average_decay, 0.0,
              "The decay to use for the moving average. 0 (TF-Slim's None): "
              "evaluate the raw variables.");
DEFINE_int32(eval_image_size, 0,
             "Eval image size (0: the network's default_image_size).");
DEFINE_bool(quantize, false, "whether to use quantized graph or not.");
DEFINE_bool(quantize_per_channel, false,
            "With --quantize: the checkpoint's weights were quantized per "
            "output channel (train_image_classifier --quantize_per_channel) "
            "(ours).");
DEFINE_string(predictions_file, "",
              "Also write every example's softmax probabilities to this CSV "
              "(index,label,prediction,p_0,...; ours).");
DEFINE_double(eval_interval_secs, 0,
              "0: evaluate --checkpoint_path once (TF-Slim's script). > 0: "
              "slim.evaluation.evaluation_loop: wait for each new checkpoint "
              "in the directory --checkpoint_path, evaluate it, and start "
              "evaluations at least this many seconds apart (ours).");
DEFINE_double(timeout, 0,
              "With --eval_interval_secs: stop after this many seconds "
              "without a new checkpoint (0: wait forever, TF's None).");
DEFINE_int64(max_number_of_evaluations, 0,
             "With --eval_interval_secs: stop after this many evaluations "
             "(0: no limit).");

// --help's groups of the flags above (tools/tool_common.h), each flag in
// one.
const slimtorch::tools::FlagGroups kFlagGroups = {
    {"Checkpoint",
     {"checkpoint_path", "moving_average_decay"}},
    {"Data",
     {"dataset_name", "dataset_split_name", "dataset_dir", "labels_offset",
      "preprocessing_name", "eval_image_size", "use_grayscale", "batch_size",
      "max_num_batches"}},
    {"Input pipeline",
     {"input_mode", "in_memory_max_mb", "num_preprocessing_threads"}},
    {"Model",
     {"model_name", "quantize", "quantize_per_channel"}},
    {"8-bit, post-training (with --quantize)",
     {"calibration_dataset_dir", "calibration_dataset_name",
      "calibration_split_name", "calibration_batches", "calibration_batch_size",
      "calibration_method", "calibration_percentile"}},
    {"Results",
     {"eval_dir", "predictions_file"}},
    {"Evaluation loop",
     {"eval_interval_secs", "timeout", "max_number_of_evaluations"}},
    {"Devices and speed",
     {"clone_on_cpu", "precision", "data_format", "tf32",
      "num_intra_op_threads", "master"}},
};

namespace {

// The evaluation the flags ask for; their string values parsed (throws
// naming a bad one).
slimtorch::EvalOptions EvalOptionsFromFlags() {
  slimtorch::EvalOptions o;
  slimtorch::tools::SetRunOptionsFromFlags(slimtorch::tools::RunKind::kEval,
                                           &o);
  o.checkpoint_path = FLAGS_checkpoint_path;
  o.eval_dir = FLAGS_eval_dir;
  o.max_num_batches = FLAGS_max_num_batches;
  o.image_size = FLAGS_eval_image_size;
  o.predictions_file = FLAGS_predictions_file;
  o.moving_average_decay = FLAGS_moving_average_decay;
  if (FLAGS_quantize) {
    o.quantize =
        slimtorch::nets::QuantizeOptions().per_channel(FLAGS_quantize_per_channel);
  }
  SLIM_CHECK(FLAGS_quantize || (!FLAGS_quantize_per_channel &&
                                FLAGS_calibration_dataset_dir.empty()),
             "--quantize_per_channel and --calibration_dataset_dir apply "
             "with --quantize");
  o.calibration = slimtorch::tools::CalibrationFromFlags();
  return o;
}

void PrintResult(const slimtorch::EvalResult& r) {
  std::printf("Evaluated %s (global step %lld) on %lld examples\n",
              r.checkpoint.c_str(), static_cast<long long>(r.global_step),
              static_cast<long long>(r.num_examples));
  for (const auto& [name, value] : r.metrics) {
    std::printf("eval/%s[%.4f]\n", name.c_str(), value);
  }
  std::fflush(stdout);
}

// --eval_interval_secs: slim.evaluation.evaluation_loop over the directory.
void EvaluateEachNewCheckpoint(const slimtorch::EvalOptions& o) {
  SLIM_CHECK(FLAGS_timeout >= 0, "--timeout must be >= 0, got ",
             FLAGS_timeout);
  slimtorch::EvalLoopOptions loop;
  loop.eval_interval_secs = FLAGS_eval_interval_secs;
  loop.timeout_secs = FLAGS_timeout;
  loop.max_number_of_evaluations = FLAGS_max_number_of_evaluations;
  loop.stop_requested =
      slimtorch::tools::InstallStopSignals("stopping after this evaluation");
  const slimtorch::EvalLoopResult r =
      slimtorch::EvaluationLoop(o, loop, PrintResult);
  std::printf(
      "Evaluation loop: %lld evaluations, %lld checkpoints "
      "deleted before they could be read%s\n",
      static_cast<long long>(r.evaluations), static_cast<long long>(r.skipped),
      r.timed_out ? "; timed out waiting for a checkpoint"
      : r.stopped ? " (stopped by signal)"
                  : "");
}

void EvaluateFromFlags() {
  slimtorch::tools::PrepareRunFromFlags();
  const slimtorch::EvalOptions o = EvalOptionsFromFlags();
  if (FLAGS_eval_interval_secs == 0) {
    SLIM_CHECK(FLAGS_timeout == 0 && FLAGS_max_number_of_evaluations == 0,
               "--timeout and --max_number_of_evaluations apply to the "
               "evaluation loop: set --eval_interval_secs too");
    PrintResult(slimtorch::Evaluate(o));
    return;
  }
  EvaluateEachNewCheckpoint(o);
}

}  // namespace

int main(int argc, char** argv) {
  slimtorch::tools::SetRunFlagDefaults(slimtorch::tools::RunKind::kEval);
  return slimtorch::tools::RunTool(
      argc, argv,
      "Evaluates a checkpoint, as TF-Slim's eval_image_classifier.py: "
      "eval/Accuracy and eval/Recall_5 over one pass of a split.\nExample:\n"
      "  eval_image_classifier --checkpoint_path=/tmp/lenet-model "
      "--eval_dir=/tmp/lenet-model --dataset_name=mnist "
      "--dataset_split_name=test --dataset_dir=/tmp/mnist --model_name=lenet",
      kFlagGroups, [] {
        slimtorch::tools::LogKernelSwitches();
        EvaluateFromFlags();
      });
}
