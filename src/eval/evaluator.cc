#include "slimtorch/eval/evaluator.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/data/input.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/event_writer.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/precision.h"
#include "slimtorch/train/run_setup.h"
#include "slimtorch/train/variables.h"

namespace slimtorch {
namespace {

std::string PredictionsHeader(int64_t num_classes) {
  std::string header = "index,label,prediction";
  for (int64_t c = 0; c < num_classes; ++c) {
    header += ",p_" + std::to_string(c);
  }
  return header + "\n";
}

// One CSV line per example of the batch: its index in the pass (from
// `first`), label, argmax and softmax probabilities (9 significant digits,
// enough to give a float back exactly).
void AppendPredictions(const torch::Tensor& logits, const torch::Tensor& labels,
                       int64_t first, std::string* out) {
  const torch::Tensor probs =
      torch::softmax(logits.to(torch::kCPU, torch::kFloat), 1).contiguous();
  const torch::Tensor label = labels.to(torch::kCPU, torch::kLong).contiguous();
  const torch::Tensor pred = probs.argmax(1).contiguous();
  const int64_t n = probs.size(0);
  const int64_t k = probs.size(1);
  const float* p = probs.data_ptr<float>();
  char buf[32];
  for (int64_t i = 0; i < n; ++i) {
    *out += std::to_string(first + i) + "," +
            std::to_string(label.data_ptr<int64_t>()[i]) + "," +
            std::to_string(pred.data_ptr<int64_t>()[i]);
    for (int64_t c = 0; c < k; ++c) {
      std::snprintf(buf, sizeof(buf), ",%.9g", p[i * k + c]);
      *out += buf;
    }
    *out += "\n";
  }
}

}  // namespace

namespace {

// The batch-norm layers of a net, how many are near their start values
// (kBatchNormStartTolerance) and their moving averages' decay.
struct BatchNormSurvey {
  int64_t layers = 0;
  int64_t at_start = 0;
  double decay = 0.0;
};

BatchNormSurvey SurveyBatchNorm(Net& net) {
  BatchNormSurvey s;
  torch::NoGradGuard no_grad;
  for (const auto& module : net.module().modules()) {
    const auto* bn = dynamic_cast<const nets::BatchNormImpl*>(module.get());
    if (bn == nullptr || !bn->moving_mean.defined() ||
        bn->moving_mean.numel() == 0) {
      continue;
    }
    ++s.layers;
    s.decay = std::max(s.decay, bn->options.decay());
    const torch::Tensor mean = bn->moving_mean.to(torch::kDouble);
    const torch::Tensor var = bn->moving_variance.to(torch::kDouble) - 1;
    const double mean_rms = mean.square().mean().sqrt().item<double>();
    const double var_rms = var.square().mean().sqrt().item<double>();
    if (mean_rms <= kBatchNormStartTolerance &&
        var_rms <= kBatchNormStartTolerance) {
      ++s.at_start;
    }
  }
  return s;
}

std::string Number(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", x);
  return text;
}

// 1/(1-decay), the steps a moving average needs to follow the data.
int64_t AveragingSteps(double decay) {
  return decay < 1.0 ? static_cast<int64_t>(std::llround(1.0 / (1.0 - decay)))
                     : 0;
}

constexpr const char* kTrainLonger =
    "Train longer (train_image_classifier --max_number_of_steps), or "
    "fine-tune from a trained checkpoint (--checkpoint_path)";

std::string StartWarning(const BatchNormSurvey& s,
                         std::optional<int64_t> global_step) {
  if (s.layers == 0 || s.at_start < kBatchNormStartShare * s.layers) {
    return "";
  }
  return StrCat(
      "the batch-norm moving statistics have barely moved from their start "
      "values (moving_mean within ",
      kBatchNormStartTolerance, " of 0 and moving_variance within ",
      kBatchNormStartTolerance, " of 1, root mean square over channels, in ",
      s.at_start, " of ", s.layers,
      " layers), so the net normalises with them and its predictions hardly "
      "depend on the image (often one class for all). They are moving "
      "averages with decay ",
      Number(s.decay), ", which need ~", AveragingSteps(s.decay),
      " steps (1/(1-decay)) of training to follow the data; ",
      global_step ? StrCat("this checkpoint is at step ", *global_step)
                  : std::string("this checkpoint records no global step"),
      ". ", kTrainLonger);
}

std::string ConstantPredictionsWarning(int64_t examples, int64_t predicted,
                                       const BatchNormSurvey& s,
                                       std::optional<int64_t> global_step) {
  std::string msg = StrCat(
      "all ", examples,
      " examples got nearly the same scores (each class's probability "
      "varies by less than ",
      kConstantPredictionsSpread, " across them; class ", predicted,
      " for all): the net's output hardly depends on its input.");
  const int64_t steps = AveragingSteps(s.decay);
  if (s.layers > 0 && global_step && steps > 0 &&
      *global_step < 5 * steps) {
    const double held = 1.0 - std::pow(s.decay, *global_step);
    msg += StrCat(
        " Its batch-norm moving averages (decay ", Number(s.decay),
        ") hold only ", std::llround(100 * held),
        "% of the data's statistics at step ", *global_step,
        " (1 - decay^step; trained from scratch they need several times "
        "1/(1-decay) = ",
        steps, " steps to settle), and the rest is their start values. ",
        kTrainLonger);
  } else {
    msg +=
        " Check the training run (its loss, --learning_rate) and the "
        "preprocessing (--preprocessing_name)";
  }
  return msg;
}

// The evaluation's input: one ordered pass, no augmentation.
InputOptions EvalInput(const EvalOptions& o) {
  InputOptions input = ResolveRunInput(o);
  input.training = false;
  input.num_readers = 1;
  return input;
}

// Each class's lowest and highest probability over the examples seen.
struct ClassRange {
  torch::Tensor lowest, highest;

  void Add(const torch::Tensor& logits) {
    if (logits.dim() != 2 || logits.size(0) == 0) return;
    const torch::Tensor probs = torch::softmax(logits, 1);
    const torch::Tensor lo = std::get<0>(probs.min(0));
    const torch::Tensor hi = std::get<0>(probs.max(0));
    lowest = lowest.defined() ? torch::minimum(lowest, lo) : lo;
    highest = highest.defined() ? torch::maximum(highest, hi) : hi;
  }
  // Whether no class's probability moved by kConstantPredictionsSpread.
  bool Constant() const {
    return lowest.defined() &&
           (highest - lowest).max().item<double>() < kConstantPredictionsSpread;
  }
  // The class every example got.
  int64_t Predicted() const { return (lowest + highest).argmax().item<int64_t>(); }
};

}  // namespace

// What the pass has counted so far.
struct Evaluator::Pass {
  std::vector<std::unique_ptr<Metric>> metrics;
  std::string predictions;
  ClassRange range;
  BatchNormSurvey batch_norm;
};

std::optional<double> EvalResult::MetricValue(const std::string& name) const {
  for (const auto& [metric, value] : metrics) {
    if (metric == name) return value;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- set-up

Evaluator::Evaluator(const EvalOptions& o)
    : o_(o), pass_(std::make_unique<Pass>()) {
  CheckImageNet(o.model_name);
  CheckDatasetDir(o.dataset_dir);
  SLIM_CHECK(o.batch_size > 0, "--batch_size must be positive, got ",
             o.batch_size);
  SLIM_CHECK(o.max_num_batches >= 0, "--max_num_batches must be >= 0");
  spec_ = ResolveDatasetSpec(o.dataset_name, o.dataset_dir);
  num_samples_ = spec_.SplitSize(o.split_name);
  SLIM_CHECK(num_samples_ > 0, "split '", o.split_name, "' of dataset '",
             spec_.name, "' has 0 examples: there is nothing to evaluate");
  input_ = EvalInput(o);
  GetNetRegistry().Get(o.model_name);  // unknown names: fail early
  GetPreprocessingRegistry().Get(input_.preprocessing_name);
  CheckOutputs();
  num_classes_ = NumNetClasses(spec_, o.labels_offset);
  net_ = BuildRunNet(spec_, o, NetOptions(), /*training=*/false, &input_);
}

Evaluator::~Evaluator() = default;

// Fails on unwritable outputs before the pass, not after it.
void Evaluator::CheckOutputs() const {
  CheckDirWritable(o_.eval_dir, "--eval_dir");
  if (o_.predictions_file.empty()) return;
  const std::filesystem::path file(o_.predictions_file);
  SLIM_CHECK(!std::filesystem::is_directory(file), "--predictions_file '",
             o_.predictions_file, "' is a directory; expected a file path");
  CheckDirWritable(file.has_parent_path() ? file.parent_path().string() : ".",
                   "--predictions_file's directory");
}

// --------------------------------------------------------------- restore

void Evaluator::Restore() {
  RestoreOptions restore;  // eval_image_classifier has no scope flags
  restore.hints.model_name = o_.model_name;
  std::vector<std::string> absent;
  QuantizationRangesOptional(*net_, &restore, &absent);
  const RestoredCheckpoint restored = RestoreCheckpointFor(
      o_.checkpoint_path, *net_, restore, o_.moving_average_decay != 0.0);
  if (net_->quantizer() && !o_.calibration.dataset_dir.empty()) {
    CalibrationRun run = o_.calibration;
    if (run.dataset_name.empty()) run.dataset_name = o_.dataset_name;
    run.model_name = o_.model_name;
    if (run.preprocessing_name.empty()) {
      run.preprocessing_name = input_.preprocessing_name;
    }
    run.image_size = input_.image_size;
    run.use_grayscale = o_.use_grayscale;
    CalibrateQuantization(*net_, run);
    net_->module().eval();
  } else if (net_->quantizer()) {
    RequireQuantizationRanges(restored.path, absent);
    net_->quantizer()->CheckRanges();
  }
  result_.checkpoint = restored.path;
  result_.global_step = restored.global_step.value_or(0);
  step_ = restored.global_step ? std::optional<int64_t>(*restored.global_step)
                               : std::nullopt;
  pass_->batch_norm = SurveyBatchNorm(*net_);
  result_.batch_norm_warning = StartWarning(pass_->batch_norm, step_);
  if (!result_.batch_norm_warning.empty()) {
    LOG(WARNING) << result_.batch_norm_warning;
  }
}

// ----------------------------------------------------------------- start

void Evaluator::Start() {
  const int64_t full_pass = (num_samples_ + o_.batch_size - 1) / o_.batch_size;
  num_batches_ = o_.max_num_batches > 0
                     ? std::min(o_.max_num_batches, full_pass)
                     : full_pass;
  pass_->metrics = MakeMetrics(o_.metrics, num_classes_, "eval/");
  pipeline_ = MakeInput(spec_, input_);
}

// ------------------------------------------------------------------ step

bool Evaluator::Step() {
  if (batches_done_ >= num_batches_) return false;
  torch::NoGradGuard no_grad;
  std::optional<Batch> batch = pipeline_->Next();
  if (!batch) {
    num_batches_ = batches_done_;  // the input ended: so does the pass
    return false;
  }
  EvaluateBatch(*batch);
  return true;
}

void Evaluator::EvaluateBatch(const Batch& batch) {
  torch::NoGradGuard no_grad;
  torch::Tensor logits;
  {
    AutocastScope autocast(o_.precision, o_.device);
    logits = net_->Forward(batch.images).logits;
  }
  logits = logits.to(torch::kFloat32);
  Pass& p = *pass_;
  p.range.Add(logits);
  for (const auto& metric : p.metrics) metric->Update(logits, batch.labels);
  if (!o_.predictions_file.empty()) {
    AppendPredictions(logits, batch.labels, result_.num_examples,
                      &p.predictions);
  }
  result_.num_examples += batch.size();
  ++batches_done_;
}

// ---------------------------------------------------------------- finish

EvalResult Evaluator::Finish() {
  SLIM_CHECK(result_.num_examples > 0, "evaluation saw no examples");
  if (o_.max_num_batches == 0 && result_.num_examples != num_samples_) {
    LOG(WARNING) << "split '" << o_.split_name << "' of " << o_.dataset_name
                 << " should have " << num_samples_
                 << " examples; the files held " << result_.num_examples;
  }
  const Pass& p = *pass_;
  if (result_.batch_norm_warning.empty() && result_.num_examples >= 2 &&
      p.range.Constant()) {
    result_.predictions_warning = ConstantPredictionsWarning(
        result_.num_examples, p.range.Predicted(), p.batch_norm, step_);
    LOG(WARNING) << result_.predictions_warning;
  }
  for (const auto& metric : p.metrics) {
    result_.metrics.emplace_back(metric->name(), metric->Value());
  }
  result_.accuracy = result_.MetricValue("Accuracy").value_or(0.0);
  result_.recall_5 = result_.MetricValue("Recall_5");
  WriteResults();
  return result_;
}

// The metrics as summaries at the checkpoint's step, and the predictions.
void Evaluator::WriteResults() const {
  EventWriter events(o_.eval_dir, ".eval");
  for (const auto& [name, value] : result_.metrics) {
    events.AddScalar("eval/" + name, static_cast<float>(value),
                     result_.global_step);
  }
  events.Flush();
  if (!o_.predictions_file.empty()) {
    WriteFileAtomically(o_.predictions_file,
                        PredictionsHeader(num_classes_) + pass_->predictions);
  }
}

EvalResult Evaluator::Run() {
  Restore();
  Start();
  while (Step()) {
  }
  return Finish();
}

EvalResult Evaluate(const EvalOptions& options) {
  return Evaluator(options).Run();
}

// ------------------------------------------------------- evaluation loop

namespace {

// Whether a checkpoint path (a safetensors file or a TensorFlow prefix)
// still has its files.
bool CheckpointPresent(const std::string& path) {
  return CheckpointExists(path);
}

using Clock = std::chrono::steady_clock;

double SecsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool StopRequested(const EvalLoopOptions& loop) {
  return loop.stop_requested != nullptr && loop.stop_requested->load();
}

// Sleeps up to `secs`, waking for a stop request.
void Nap(const EvalLoopOptions& loop, double secs) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(secs));
  while (!StopRequested(loop) && Clock::now() < until) {
    std::this_thread::sleep_for(std::min<Clock::duration>(
        until - Clock::now(), std::chrono::milliseconds(100)));
  }
}

void CheckLoopOptions(const EvalOptions& o, const EvalLoopOptions& loop) {
  SLIM_CHECK(loop.eval_interval_secs > 0, "--eval_interval_secs must be > 0, ",
             "got ", loop.eval_interval_secs);
  SLIM_CHECK(loop.max_number_of_evaluations >= 0,
             "--max_number_of_evaluations must be >= 0");
  SLIM_CHECK(std::filesystem::is_directory(o.checkpoint_path),
             "--eval_interval_secs evaluates each new checkpoint of a "
             "directory, but --checkpoint_path '",
             o.checkpoint_path, "' is not a directory");
}

// wait_for_new_checkpoint: the directory's latest checkpoint once it is not
// `last`; nullopt when a stop or the timeout ends the wait (*result says
// which).
std::optional<std::string> WaitForNewCheckpoint(const EvalOptions& o,
                                                const EvalLoopOptions& loop,
                                                const std::string& last,
                                                EvalLoopResult* result) {
  const auto wait_start = Clock::now();
  std::optional<std::string> latest;
  LOG(INFO) << "Waiting for new checkpoint at " << o.checkpoint_path;
  while (true) {
    if (StopRequested(loop)) {
      result->stopped = true;
      return std::nullopt;
    }
    latest = LatestCheckpoint(o.checkpoint_path);
    if (latest && *latest != last) return latest;
    if (loop.timeout_secs > 0 && SecsSince(wait_start) > loop.timeout_secs) {
      LOG(INFO) << "Timed-out waiting for a checkpoint.";
      result->timed_out = true;
      return std::nullopt;
    }
    Nap(loop, loop.poll_secs);
  }
}

// Evaluates checkpoint `path` and hands the result on; false (a warning,
// counted as skipped) when training deleted it before it could be read.
bool EvaluateIfPresent(const EvalOptions& o, const std::string& path,
                       const std::function<void(const EvalResult&)>& on_result,
                       EvalLoopResult* result) {
  EvalOptions one = o;
  one.checkpoint_path = path;
  try {
    EvalResult r = Evaluate(one);
    ++result->evaluations;
    on_result(r);
  } catch (const Error& e) {
    if (CheckpointPresent(path)) throw;
    ++result->skipped;
    LOG(WARNING) << "checkpoint " << path
                 << " was deleted (training keeps only the newest) before "
                    "it could be evaluated; waiting for the next one ("
                 << e.what() << ")";
    return false;
  }
  return true;
}

}  // namespace

EvalLoopResult EvaluationLoop(
    const EvalOptions& o, const EvalLoopOptions& loop,
    const std::function<void(const EvalResult&)>& on_result) {
  CheckLoopOptions(o, loop);
  EvalLoopResult result;
  std::string last;
  while (true) {
    const std::optional<std::string> latest =
        WaitForNewCheckpoint(o, loop, last, &result);
    if (!latest) return result;
    LOG(INFO) << "Found new checkpoint at " << *latest;
    last = *latest;
    const auto eval_start = Clock::now();
    if (!EvaluateIfPresent(o, *latest, on_result, &result)) continue;
    if (loop.max_number_of_evaluations > 0 &&
        result.evaluations >= loop.max_number_of_evaluations) {
      return result;
    }
    Nap(loop, loop.eval_interval_secs - SecsSince(eval_start));
  }
}

}  // namespace slimtorch
