#include "slimtorch/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/data/input.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/event_writer.h"
#include "slimtorch/io/tf_checkpoint.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/loss.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/variables.h"

namespace slimtorch {
namespace {

using Clock = std::chrono::steady_clock;

// Checkpoint keys beside the model variables and optimizer slots.
// Persisted names: do not change.
constexpr const char* kGlobalStepKey = "global_step";
constexpr const char* kRngStateKey = "slimtorch/cpu_rng_state";
constexpr const char* kInputPositionKey = "slimtorch/input_position";
// The record reader's state at input_position (Batch::input_state), as
// uint8 bytes; absent for the in-memory input.
constexpr const char* kInputStateKey = "slimtorch/input_state";

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

torch::Tensor CpuRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetCpuRngState(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

bool AllFinite(const NamedTensors& vars, std::string* bad) {
  for (const auto& v : vars) {
    if (!torch::isfinite(v.tensor).all().item<bool>()) {
      *bad = v.name;
      return false;
    }
  }
  return true;
}

}  // namespace

TrainResult Train(const TrainOptions& o) {
  SLIM_CHECK(!o.dataset_dir.empty(),
             "You must supply the dataset directory with --dataset_dir");
  SLIM_CHECK(o.batch_size > 0, "--batch_size must be positive, got ",
             o.batch_size);
  SLIM_CHECK(o.log_every_n_steps > 0, "--log_every_n_steps must be positive");
  // Fail on an unwritable train_dir before any work.
  CheckDirWritable(o.train_dir, "--train_dir");

  const DatasetSpec spec = ResolveDatasetSpec(o.dataset_name, o.dataset_dir);
  const int64_t num_samples = spec.SplitSize(o.dataset_split_name);
  const std::string preprocessing =
      o.preprocessing_name.empty() ? o.model_name : o.preprocessing_name;
  GetNetRegistry().Get(o.model_name);  // unknown names: fail early
  GetPreprocessingRegistry().Get(preprocessing);
  GetOptimizerRegistry().Get(o.optimizer);
  LearningRateOptions lr_options = o.learning_rate;
  lr_options.batch_size = o.batch_size;
  lr_options.num_samples_per_epoch = num_samples;
  std::unique_ptr<LearningRateSchedule> schedule =
      CreateLearningRateSchedule(o.learning_rate_decay_type, lr_options);

  InputOptions input;
  input.dataset_dir = o.dataset_dir;
  input.split_name = o.dataset_split_name;
  input.preprocessing_name = preprocessing;
  input.use_grayscale = o.use_grayscale;
  input.batch_size = o.batch_size;
  input.training = true;
  input.num_readers = o.num_readers;
  input.num_preprocessing_threads = o.num_preprocessing_threads;
  input.shuffle_buffer_size = o.shuffle_buffer_size;
  input.seed = o.seed;
  input.labels_offset = o.labels_offset;
  input.input_mode = o.input_mode;
  input.in_memory_max_bytes = o.in_memory_max_bytes;
  input.use_bounding_boxes = o.use_bounding_boxes;
  input.device = o.device;
  if (o.device.is_cuda()) {
    // TensorFlow autotunes its convolutions; so does cuDNN's benchmark mode.
    at::globalContext().setBenchmarkCuDNN(true);
  }

  torch::manual_seed(o.seed);
  std::shared_ptr<Net> net = CreateNet(
      o.model_name, NetOptions()
                        .num_classes(NumNetClasses(spec, o.labels_offset))
                        .weight_decay(o.weight_decay)
                        .input_channels(InputChannels(spec, input))
                        .image_size(std::max<int64_t>(o.train_image_size, 0)));
  net->module().to(o.device);
  net->module().train();
  input.image_size =
      o.train_image_size > 0 ? o.train_image_size : net->default_image_size();
  net->CheckImageSize(input.image_size);

  NamedTensors model_vars = net->ModelVariables();
  NamedTensors trainable;
  for (auto& v : net->TrainableVariables()) {
    if (o.trainable_scopes.empty() || InScopes(v.name, o.trainable_scopes)) {
      trainable.push_back(v);
    } else {
      v.tensor.requires_grad_(false);
    }
  }
  SLIM_CHECK(!trainable.empty(), "--trainable_scopes selects no variable of ",
             o.model_name, " (variables are named like '",
             model_vars.front().name, "')");
  std::unique_ptr<Optimizer> optimizer =
      CreateOptimizer(o.optimizer, trainable, o.optimizer_options);

  // Resume, or warm start.
  SLIM_CHECK(o.checkpoint_format == "safetensors" ||
                 o.checkpoint_format == "tensorflow",
             "--checkpoint_format must be safetensors or tensorflow, not '",
             o.checkpoint_format, "'");
  const bool tf_format = o.checkpoint_format == "tensorflow";
  CheckpointManager manager(o.train_dir, o.max_checkpoints_to_keep,
                            tf_format ? CheckpointFormat::kTensorFlow
                                      : CheckpointFormat::kSafetensors);
  int64_t global_step = 0;
  std::optional<std::string> latest = manager.Latest();
  std::optional<CheckpointData> resumed;
  if (latest) {
    if (!o.checkpoint_path.empty()) {
      LOG(INFO) << "Ignoring --checkpoint_path because a checkpoint already "
                   "exists in "
                << o.train_dir;
    }
    CheckpointData ckpt;
    if (FindTfCheckpoint(*latest)) {  // --checkpoint_format=tensorflow
      ckpt.tensors = FromTfLayouts(TfCheckpointReader(*latest).ReadAll(), *net);
    } else {
      ckpt = LoadCheckpoint(*latest);
    }
    RestoreVariables(model_vars, ckpt, *latest);
    std::map<std::string, torch::Tensor> state;
    for (auto& t : ckpt.tensors) state[t.name] = t.tensor;
    try {
      optimizer->LoadState(state);
    } catch (const Error& e) {
      SLIM_FAIL("cannot resume from '", *latest, "' with --optimizer=",
                o.optimizer, ": ", e.what());
    }
    torch::Tensor step = ckpt.Find(kGlobalStepKey);
    SLIM_CHECK(step.defined() && step.numel() == 1, "checkpoint '", *latest,
               "' has no ", kGlobalStepKey);
    global_step = step.item<int64_t>();
    torch::Tensor rng = ckpt.Find(kRngStateKey);
    if (rng.defined()) SetCpuRngState(rng);
    torch::Tensor pos = ckpt.Find(kInputPositionKey);
    input.start_position = pos.defined() ? pos.item<int64_t>()
                                         : global_step * o.batch_size;
    torch::Tensor input_state = ckpt.Find(kInputStateKey);
    if (input_state.defined() && input_state.scalar_type() == torch::kUInt8) {
      torch::Tensor bytes = input_state.contiguous().cpu();
      input.resume_state.assign(
          reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
          static_cast<size_t>(bytes.numel()));
    }
    LOG(INFO) << "Resuming from " << *latest << " at global step "
              << global_step;
    resumed = std::move(ckpt);
  } else if (!o.checkpoint_path.empty()) {
    RestoreOptions restore;
    restore.exclude_scopes = o.checkpoint_exclude_scopes;
    restore.ignore_missing = o.ignore_missing_vars;
    const RestoredCheckpoint ckpt = RestoreCheckpointFor(
        o.checkpoint_path, *net, restore, /*shadows=*/false);
    LOG(INFO) << "Fine-tuning from "
              << (ckpt.tensorflow ? "TensorFlow checkpoint " : "") << ckpt.path
              << " (" << ckpt.restored << " variables restored)";
  }

  // Shadows start from the variables as training starts (after a warm
  // start: the restored values), or come from the checkpoint resumed.
  std::unique_ptr<ExponentialMovingAverage> averages;
  if (o.moving_average_decay != 0.0) {
    averages = std::make_unique<ExponentialMovingAverage>(
        o.moving_average_decay, model_vars);
    if (resumed && !averages->Load(*resumed, *latest)) {
      LOG(WARNING) << *latest << " has no moving averages (it was trained "
                   << "without --moving_average_decay); they start from the "
                   << "current variables";
    }
  }
  resumed.reset();

  TrainResult result;
  result.global_step = global_step;
  result.last_loss = std::nan("");

  // The reader state at the position saved next (see kInputStateKey).
  std::shared_ptr<const std::string> input_state;
  if (!input.resume_state.empty()) {
    input_state = std::make_shared<const std::string>(input.resume_state);
  }
  auto save = [&](int64_t position) {
    std::string bad;
    SLIM_CHECK(AllFinite(model_vars, &bad), "variable ", bad,
               " is not finite at global step ", global_step,
               "; not saving a checkpoint",
               latest ? StrCat("; the last good checkpoint is ", *latest)
                      : std::string());
    CheckpointData data;
    for (const auto& v : model_vars) data.tensors.push_back(v);
    for (const auto& s : optimizer->State()) data.tensors.push_back(s);
    if (averages) {
      for (const auto& s : averages->shadows()) data.tensors.push_back(s);
    }
    data.tensors.push_back(
        {kGlobalStepKey, torch::tensor(global_step, torch::kInt64)});
    data.tensors.push_back({kRngStateKey, CpuRngState()});
    data.tensors.push_back(
        {kInputPositionKey, torch::tensor(position, torch::kInt64)});
    if (input_state) {
      torch::Tensor bytes = torch::empty(
          {static_cast<int64_t>(input_state->size())}, torch::kUInt8);
      std::memcpy(bytes.data_ptr<uint8_t>(), input_state->data(),
                  input_state->size());
      data.tensors.push_back({kInputStateKey, bytes});
    }
    data.metadata["model_name"] = o.model_name;
    data.metadata["dataset_name"] = o.dataset_name;
    data.metadata["optimizer"] = o.optimizer;
    data.metadata["global_step"] = std::to_string(global_step);
    if (tf_format) data.tensors = ToTfLayouts(data.tensors, *net);
    std::string path = manager.Save(global_step, data);
    latest = path;
    result.checkpoint = path;
    LOG(INFO) << "Saved checkpoint " << path;
  };

  if (o.max_number_of_steps > 0 && global_step >= o.max_number_of_steps) {
    LOG(INFO) << "global step " << global_step
              << " already reached --max_number_of_steps="
              << o.max_number_of_steps;
    result.checkpoint = latest.value_or("");
    return result;
  }

  std::unique_ptr<BatchSource> pipeline = MakeInput(spec, input);
  EventWriter events(o.train_dir);
  LOG(INFO) << "Training " << o.model_name << " ("
            << net->NumParameters() << " parameters) on " << o.dataset_name
            << "/" << o.dataset_split_name << " (" << num_samples
            << " examples), batch " << o.batch_size << ", optimizer "
            << o.optimizer << ", on " << o.device << ", from global step "
            << global_step;

  const auto start = Clock::now();
  auto last_save = start;
  auto last_summary = start;
  auto window_start = start;
  int64_t window_steps = 0;
  int64_t position = input.start_position;
  double input_secs = 0;  // spent getting batches (the data path's cost)
  while (o.max_number_of_steps <= 0 || global_step < o.max_number_of_steps) {
    const auto wait_start = Clock::now();
    std::optional<Batch> batch = pipeline->Next();
    input_secs += Seconds(wait_start, Clock::now());
    SLIM_CHECK(batch.has_value(), "training input ended unexpectedly");
    const double lr = schedule->At(global_step);

    NetOutput out = net->Forward(batch->images);
    torch::Tensor ce =
        SoftmaxCrossEntropy(out.logits, batch->labels, o.label_smoothing);
    torch::Tensor total = ce;
    if (out.aux_logits.defined()) {
      total = total + SoftmaxCrossEntropy(out.aux_logits, batch->labels,
                                          o.label_smoothing, 0.4);
    }
    for (auto& v : trainable) v.tensor.mutable_grad() = torch::Tensor();
    total.backward();
    // The L2 terms' gradients go straight into .grad (also for weight_decay
    // 0: a net may fix its own, as cifarnet_tutorial).
    torch::Tensor reg = net->ApplyRegularizationGradients();
    const double loss = (total.detach() + reg).item<double>();
    SLIM_CHECK(std::isfinite(loss), "loss is ",
               std::isnan(loss) ? "NaN" : "infinite", " at global step ",
               global_step + 1, "; training stopped before the update",
               latest ? StrCat("; the last good checkpoint is ", *latest)
                      : std::string("; no checkpoint was written"));
    optimizer->Apply(lr);
    ++global_step;
    if (averages) averages->Apply(global_step);
    ++window_steps;
    position = batch->first_position + batch->size();
    input_state = batch->input_state;
    result.global_step = global_step;
    result.last_loss = loss;

    const auto now = Clock::now();
    if (global_step % o.log_every_n_steps == 0) {
      double secs = Seconds(window_start, now) / std::max<int64_t>(1, window_steps);
      char line[160];
      std::snprintf(line, sizeof(line),
                    "global step %lld: loss = %.4f (%.3f sec/step, %.1f "
                    "examples/sec)",
                    static_cast<long long>(global_step), loss, secs,
                    o.batch_size / std::max(secs, 1e-9));
      LOG(INFO) << line;
      window_start = now;
      window_steps = 0;
    }
    if (Seconds(last_summary, now) >= o.save_summaries_secs) {
      events.AddScalar("total_loss", static_cast<float>(loss), global_step);
      events.AddScalar("losses/softmax_cross_entropy_loss",
                       ce.item<float>(), global_step);
      if (reg.defined()) {
        events.AddScalar("regularization_loss", reg.item<float>(),
                         global_step);
      }
      events.AddScalar("learning_rate", static_cast<float>(lr), global_step);
      events.Flush();
      last_summary = now;
    }
    if (Seconds(last_save, now) >= o.save_interval_secs) {
      save(position);
      last_save = Clock::now();
    }
  }
  save(position);
  events.AddScalar("total_loss", static_cast<float>(result.last_loss),
                   global_step);
  events.Flush();
  const double total_secs = Seconds(start, Clock::now());
  LOG(INFO) << "Finished training at global step " << global_step << " in "
            << total_secs << " s; " << input_secs
            << " s of it waiting for input batches ("
            << 100.0 * input_secs / std::max(total_secs, 1e-9) << "%)";
  return result;
}

}  // namespace slimtorch
