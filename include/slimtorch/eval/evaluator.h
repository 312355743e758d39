#pragma once
// eval_image_classifier: restores one checkpoint and computes streaming
// metrics (train/metrics.h) over exactly one ordered pass of a split (or
// max_num_batches batches), by default TF-Slim's:
//   eval/Accuracy = mean(argmax(logits) == label)
//   eval/Recall_5 = mean(label in top-5 logits)   (skipped below 5 classes)
// With moving_average_decay the averaged weights are evaluated.
// Results are written as scalar summaries at the checkpoint's global step
// to an event file in eval_dir.

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/data/pipeline.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/eval/calibration.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/metrics.h"
#include "slimtorch/train/run_setup.h"

namespace slimtorch {

// The run's input, dataset, net and device (RunOptions, embedded:
// dataset_dir, split_name, batch_size, device and the others are set here
// directly; image_size is --eval_image_size) and the evaluation's own. The
// evaluation reads one ordered pass with one reader, whatever `training`
// and `num_readers` say.
struct EvalOptions : RunOptions {
  EvalOptions() {
    split_name = "test";
    batch_size = 100;
    training = false;
    num_readers = 1;
  }

  // A checkpoint file, or a directory (its latest checkpoint).
  std::string checkpoint_path = "/tmp/tfmodel/";
  std::string eval_dir = "/tmp/tfmodel/";
  // 0 = one full pass: ceil(num_samples / batch_size) batches.
  int64_t max_num_batches = 0;
  // What the pass computes, in this order, each as eval/<name>; those that
  // do not apply to the net (MetricFactory::min_classes) are skipped.
  std::vector<MetricFactory> metrics = ClassifierMetrics();
  // Non-zero: evaluate the moving averages of the variables stored in the
  // checkpoint ("<var>/ExponentialMovingAverage"; TF's
  // variables_to_restore()); a checkpoint without them is an error.
  double moving_average_decay = 0.0;
  // Non-empty: also write every evaluated example's softmax probabilities
  // here (ours; TF-Slim's eval has no per-example output), as CSV:
  //   index,label,prediction,p_0,...,p_<classes-1>
  // in the pass's record order, labels and predictions as the net's class
  // indices (after labels_offset). Written whole at the end of the pass
  // through a temporary file, so a failed evaluation leaves none.
  std::string predictions_file;
  // With RunOptions::quantize and calibration.dataset_dir set: the
  // activation ranges calibrated on that data (post-training quantization)
  // rather than read from the checkpoint (calibration.dataset_name "" =
  // dataset_name).
  CalibrationRun calibration;
};

struct EvalResult {
  std::string checkpoint;
  int64_t global_step = 0;
  int64_t num_examples = 0;
  // Every computed metric's name and value, in EvalOptions::metrics' order.
  std::vector<std::pair<std::string, double>> metrics;
  // The metric `name`'s value; unset when it was not computed.
  std::optional<double> MetricValue(const std::string& name) const;
  // MetricValue("Accuracy") (0 without it) and MetricValue("Recall_5"):
  // unset when the net has fewer than 5 classes.
  double accuracy = 0.0;
  std::optional<double> recall_5;
  // One line when the restored batch-norm moving statistics have barely
  // moved from their start values (0 and 1): at least kBatchNormStartShare
  // of the batch-norm layers near them (kBatchNormStartTolerance), saying
  // why (moving averages of decay D need ~1/(1-D) steps) and what to do ("" when
  // none); Evaluate also logs it as a WARNING.
  std::string batch_norm_warning;
  // When there is no batch_norm_warning but every example got nearly the
  // same probabilities (each class's varies by less than
  // kConstantPredictionsSpread over the pass; at least 2 examples): one
  // line saying so and, for a net with batch norm whose checkpoint's step
  // is below 5/(1-decay), how much of the data's statistics its moving
  // averages hold (1 - decay^step) and what to do; also logged as a
  // WARNING. "" otherwise.
  std::string predictions_warning;
};

// One evaluation of a checkpoint, with phases as the trainer's (its input
// and net set up as training sets them up: train/run_setup.h): set-up,
// Restore (the checkpoint's variables, or their moving averages), Start
// (the input), Step (one batch: forward, metrics, predictions) and Finish
// (the metrics, warnings, the event file and the predictions file).
// Evaluate() is Evaluator(options).Run(). `options` must outlive it.
class Evaluator {
 public:
  // Checks the options and the outputs' places, resolves the dataset, the
  // input and the net (in evaluation mode, on the device). Throws
  // slimtorch::Error on bad options or data.
  explicit Evaluator(const EvalOptions& options);
  ~Evaluator();

  void Restore();
  // After Restore: the pass's batches and the input.
  void Start();
  // The pass's next batch; false, evaluating nothing, once the pass has
  // its batches (max_num_batches or one full pass) or the input ends.
  bool Step();
  // Counts `batch` (the pass's next examples) into the metrics.
  void EvaluateBatch(const Batch& batch);
  // After the last step: the result; throws when no example was seen.
  EvalResult Finish();
  // Restore, Start, Step until the pass is done, Finish.
  EvalResult Run();

  Net& net() { return *net_; }
  const InputOptions& input_options() const { return input_; }

 private:
  struct Pass;
  void CheckOutputs() const;
  void WriteResults() const;

  const EvalOptions& o_;
  DatasetSpec spec_;
  int64_t num_samples_ = 0;
  int64_t num_classes_ = 0;
  InputOptions input_;
  std::shared_ptr<Net> net_;
  std::unique_ptr<BatchSource> pipeline_;
  int64_t num_batches_ = 0;
  int64_t batches_done_ = 0;
  std::unique_ptr<Pass> pass_;
  EvalResult result_;
  // The checkpoint's global step, when it records one.
  std::optional<int64_t> step_;
};

EvalResult Evaluate(const EvalOptions& options);


// A batch-norm layer counts as "near its start values" when the root mean
// square over its channels of moving_mean, and that of moving_variance - 1,
// are both at most this. Moving averages with decay D hold a fraction
// f = 1 - D^N of the data's statistics after N steps, so a layer's RMS
// grows as f times the data's (measured on MobileNet v1 of photos: 0.05
// after 200 steps at decay 0.9997, f = 0.06; 0.13 after 490, f = 0.14;
// 0.3 after 2000).
inline constexpr double kBatchNormStartTolerance = 0.15;
// The share of a net's batch-norm layers near their start values from which
// EvalResult::batch_norm_warning warns.
inline constexpr double kBatchNormStartShare = 0.8;
// EvalResult::predictions_warning's bound on each class's probability
// range over the examples.
inline constexpr double kConstantPredictionsSpread = 0.01;

// slim.evaluation.evaluation_loop (ours as eval_image_classifier's
// --eval_interval_secs / --timeout; TF-Slim's script evaluates once).
struct EvalLoopOptions {
  // Evaluations start at least this many seconds apart (> 0).
  double eval_interval_secs = 60;
  // Stop after this many seconds without a new checkpoint (<= 0: wait
  // forever, TF's None).
  double timeout_secs = 0;
  // Stop after this many evaluations (0: no limit).
  int64_t max_number_of_evaluations = 0;
  // How often the directory's index is read while waiting (TF: 1 s).
  double poll_secs = 1;
  // Once true, the loop stops waiting (an evaluation in progress finishes).
  const std::atomic<bool>* stop_requested = nullptr;
};

struct EvalLoopResult {
  int64_t evaluations = 0;
  // Checkpoints that were gone (rotated away by training) before they could
  // be read; skipped.
  int64_t skipped = 0;
  bool timed_out = false;
  bool stopped = false;
};

// Waits for each new latest checkpoint of the directory
// options.checkpoint_path, evaluates it once (Evaluate, events at its global
// step) and hands the result to `on_result`. Only the latest checkpoint is
// evaluated: ones written while an evaluation ran are skipped, as TF's
// checkpoints_iterator does. A checkpoint that training deletes before it
// is read is skipped with a warning; any other failure throws.
EvalLoopResult EvaluationLoop(
    const EvalOptions& options, const EvalLoopOptions& loop,
    const std::function<void(const EvalResult&)>& on_result);

}  // namespace slimtorch
