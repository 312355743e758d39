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
InputOptions EvalInput(const EvalOptions& o, const std::string& preprocessing) {
  InputOptions input;
  input.dataset_dir = o.dataset_dir;
  input.split_name = o.dataset_split_name;
  input.preprocessing_name = preprocessing;
  input.use_grayscale = o.use_grayscale;
  input.batch_size = o.batch_size;
  input.training = false;
  input.num_readers = 1;
  input.num_preprocessing_threads = o.num_preprocessing_threads;
  input.labels_offset = o.labels_offset;
  input.input_mode = o.input_mode;
  input.in_memory_max_bytes = o.in_memory_max_bytes;
  input.device = o.device;
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

EvalResult Evaluate(const EvalOptions& o) {
  SLIM_CHECK(!o.dataset_dir.empty(),
             "You must supply the dataset directory with --dataset_dir");
  SLIM_CHECK(o.batch_size > 0, "--batch_size must be positive, got ",
             o.batch_size);
  SLIM_CHECK(o.max_num_batches >= 0, "--max_num_batches must be >= 0");
  const DatasetSpec spec = ResolveDatasetSpec(o.dataset_name, o.dataset_dir);
  const int64_t num_samples = spec.SplitSize(o.dataset_split_name);
  SLIM_CHECK(num_samples > 0, "split '", o.dataset_split_name,
             "' of dataset '", spec.name,
             "' has 0 examples: there is nothing to evaluate");
  const std::string preprocessing =
      o.preprocessing_name.empty() ? o.model_name : o.preprocessing_name;
  GetNetRegistry().Get(o.model_name);  // unknown names: fail early
  GetPreprocessingRegistry().Get(preprocessing);
  CheckDirWritable(o.eval_dir, "--eval_dir");
  if (!o.predictions_file.empty()) {
    // Fail before the pass, not after it.
    const std::filesystem::path file(o.predictions_file);
    SLIM_CHECK(!std::filesystem::is_directory(file), "--predictions_file '",
               o.predictions_file, "' is a directory; expected a file path");
    CheckDirWritable(file.has_parent_path() ? file.parent_path().string() : ".",
                     "--predictions_file's directory");
  }

  InputOptions input = EvalInput(o, preprocessing);

  const int64_t num_classes = NumNetClasses(spec, o.labels_offset);
  std::shared_ptr<Net> net = CreateNet(
      o.model_name, NetOptions()
                        .num_classes(num_classes)
                        .input_channels(InputChannels(spec, input))
                        .image_size(std::max<int64_t>(o.eval_image_size, 0)));
  const Precision precision = ParsePrecision(o.precision, o.device);
  net->module().to(o.device);
  net->SetMemoryFormat(
      ResolveDataFormat(o.data_format, o.model_name, o.device));
  net->module().eval();
  input.image_size =
      o.eval_image_size > 0 ? o.eval_image_size : net->default_image_size();
  net->CheckImageSize(input.image_size);

  EvalResult result;
  RestoreOptions restore;  // eval_image_classifier has no scope flags
  restore.hints.model_name = o.model_name;
  const RestoredCheckpoint restored = RestoreCheckpointFor(
      o.checkpoint_path, *net, restore, o.moving_average_decay != 0.0);
  result.checkpoint = restored.path;
  result.global_step = restored.global_step.value_or(0);
  const std::optional<int64_t> step =
      restored.global_step ? std::optional<int64_t>(*restored.global_step)
                           : std::nullopt;
  const BatchNormSurvey batch_norm = SurveyBatchNorm(*net);
  result.batch_norm_warning = StartWarning(batch_norm, step);
  if (!result.batch_norm_warning.empty()) {
    LOG(WARNING) << result.batch_norm_warning;
  }

  const int64_t full_pass = (num_samples + o.batch_size - 1) / o.batch_size;
  const int64_t num_batches = o.max_num_batches > 0
                                  ? std::min(o.max_num_batches, full_pass)
                                  : full_pass;
  const bool top5 = num_classes >= 5;
  if (!top5) {
    LOG(INFO) << "eval/Recall_5 skipped: the net has " << num_classes
              << " classes (fewer than 5)";
  }

  std::unique_ptr<BatchSource> pipeline = MakeInput(spec, input);
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  int64_t correct5 = 0;
  std::string predictions;
  ClassRange range;
  for (int64_t b = 0; b < num_batches; ++b) {
    std::optional<Batch> batch = pipeline->Next();
    if (!batch) break;
    torch::Tensor logits;
    {
      AutocastScope autocast(precision, o.device);
      logits = net->Forward(batch->images).logits;
    }
    logits = logits.to(torch::kFloat32);
    range.Add(logits);
    correct += logits.argmax(1).eq(batch->labels).sum().item<int64_t>();
    if (top5) {
      torch::Tensor top = std::get<1>(logits.topk(5, 1));
      correct5 +=
          top.eq(batch->labels.unsqueeze(1)).any(1).sum().item<int64_t>();
    }
    if (!o.predictions_file.empty()) {
      AppendPredictions(logits, batch->labels, result.num_examples,
                        &predictions);
    }
    result.num_examples += batch->size();
  }
  SLIM_CHECK(result.num_examples > 0, "evaluation saw no examples");
  if (o.max_num_batches == 0 && result.num_examples != num_samples) {
    LOG(WARNING) << "split '" << o.dataset_split_name << "' of "
                 << o.dataset_name << " should have " << num_samples
                 << " examples; the files held " << result.num_examples;
  }
  if (result.batch_norm_warning.empty() && result.num_examples >= 2 &&
      range.Constant()) {
    result.predictions_warning = ConstantPredictionsWarning(
        result.num_examples, range.Predicted(), batch_norm, step);
    LOG(WARNING) << result.predictions_warning;
  }
  const double n = static_cast<double>(result.num_examples);
  result.accuracy = correct / n;
  if (top5) result.recall_5 = correct5 / n;

  EventWriter events(o.eval_dir, ".eval");
  events.AddScalar("eval/Accuracy", static_cast<float>(result.accuracy),
                   result.global_step);
  if (result.recall_5) {
    events.AddScalar("eval/Recall_5", static_cast<float>(*result.recall_5),
                     result.global_step);
  }
  events.Flush();
  if (!o.predictions_file.empty()) {
    WriteFileAtomically(o.predictions_file,
                        PredictionsHeader(num_classes) + predictions);
  }
  return result;
}

namespace {

// Whether a checkpoint path (a safetensors file or a TensorFlow prefix)
// still has its files.
bool CheckpointPresent(const std::string& path) {
  return CheckpointExists(path);
}

}  // namespace

EvalLoopResult EvaluationLoop(
    const EvalOptions& o, const EvalLoopOptions& loop,
    const std::function<void(const EvalResult&)>& on_result) {
  using Clock = std::chrono::steady_clock;
  const auto secs_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  SLIM_CHECK(loop.eval_interval_secs > 0, "--eval_interval_secs must be > 0, ",
             "got ", loop.eval_interval_secs);
  SLIM_CHECK(loop.max_number_of_evaluations >= 0,
             "--max_number_of_evaluations must be >= 0");
  SLIM_CHECK(std::filesystem::is_directory(o.checkpoint_path),
             "--eval_interval_secs evaluates each new checkpoint of a "
             "directory, but --checkpoint_path '",
             o.checkpoint_path, "' is not a directory");
  const auto stop = [&] {
    return loop.stop_requested != nullptr && loop.stop_requested->load();
  };
  // Sleeps up to `secs`, waking for a stop request.
  const auto nap = [&](double secs) {
    const auto until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(secs));
    while (!stop() && Clock::now() < until) {
      std::this_thread::sleep_for(std::min<Clock::duration>(
          until - Clock::now(), std::chrono::milliseconds(100)));
    }
  };

  EvalLoopResult result;
  std::string last;
  while (true) {
    // wait_for_new_checkpoint
    const auto wait_start = Clock::now();
    std::optional<std::string> latest;
    LOG(INFO) << "Waiting for new checkpoint at " << o.checkpoint_path;
    while (true) {
      if (stop()) {
        result.stopped = true;
        return result;
      }
      latest = LatestCheckpoint(o.checkpoint_path);
      if (latest && *latest != last) break;
      if (loop.timeout_secs > 0 && secs_since(wait_start) > loop.timeout_secs) {
        LOG(INFO) << "Timed-out waiting for a checkpoint.";
        result.timed_out = true;
        return result;
      }
      nap(loop.poll_secs);
    }
    LOG(INFO) << "Found new checkpoint at " << *latest;
    last = *latest;
    const auto eval_start = Clock::now();
    EvalOptions one = o;
    one.checkpoint_path = *latest;
    try {
      EvalResult r = Evaluate(one);
      ++result.evaluations;
      on_result(r);
    } catch (const Error& e) {
      if (CheckpointPresent(*latest)) throw;
      ++result.skipped;
      LOG(WARNING) << "checkpoint " << *latest
                   << " was deleted (training keeps only the newest) before "
                      "it could be evaluated; waiting for the next one ("
                   << e.what() << ")";
      continue;
    }
    if (loop.max_number_of_evaluations > 0 &&
        result.evaluations >= loop.max_number_of_evaluations) {
      return result;
    }
    nap(loop.eval_interval_secs - secs_since(eval_start));
  }
}

}  // namespace slimtorch
