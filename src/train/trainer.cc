#include "slimtorch/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <glog/logging.h>
#ifdef SLIMTORCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/data/input.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/event_writer.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/tf_checkpoint.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/device_update.h"
#include "slimtorch/train/loss.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/precision.h"
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

// Refuses data a classifier cannot learn from (its loss would stay
// constant): a split without examples, or fewer than 2 classes.
void CheckTrainableData(const DatasetSpec& spec, const TrainOptions& o,
                        int64_t num_samples) {
  const std::string description =
      o.dataset_dir.empty()
          ? std::string()
          : JoinPath(o.dataset_dir, kDatasetDescriptionFilename);
  const bool described = !description.empty() && PathExists(description);
  SLIM_CHECK(num_samples > 0, "split '", o.dataset_split_name,
             "' of dataset '", spec.name, "' has 0 examples",
             described ? StrCat(" (", description, ")") : std::string(),
             ": there is nothing to train on");
  const int64_t classes = spec.num_classes - o.labels_offset;
  if (classes >= 2) return;
  const std::string labels_path =
      o.dataset_dir.empty() ? std::string(kLabelsFilename)
                            : JoinPath(o.dataset_dir, kLabelsFilename);
  std::string labels;
  if (PathExists(labels_path)) {
    try {
      for (const auto& [id, name] : ReadLabelsFile(labels_path)) {
        labels += StrCat(labels.empty() ? "" : ", ", id, ":", name);
      }
    } catch (const std::exception&) {
    }
    labels = StrCat("labels file ", labels_path, ": ",
                    labels.empty() ? std::string("no label") : labels);
  } else {
    labels = StrCat("no labels file ", labels_path);
  }
  SLIM_FAIL("dataset '", spec.name, "' has ", spec.num_classes, " class",
            spec.num_classes == 1 ? "" : "es",
            o.labels_offset > 0
                ? StrCat(" (", classes, " after --labels_offset=",
                         o.labels_offset, ")")
                : std::string(),
            " (", labels,
            "): a classifier needs at least 2 classes; with one its loss "
            "stays constant and it learns nothing",
            spec.name == kImageFolderDatasetName
                ? ". Give each class its own sub-folder of images and convert "
                  "again (download_and_convert_data "
                  "--dataset_name=image_folder)"
                : "");
}

// Eager steps before a --cuda_graph capture: cuDNN's autotuner, cuBLAS's
// handles and the allocator settle on them.
constexpr int kGraphWarmupSteps = 3;

// The captured step of --cuda_graph: static input buffers the batch is
// copied into, the graph, and its outputs on the device.
struct CapturedStep {
#ifdef SLIMTORCH_WITH_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
  // The input when it makes its batches on the device (captured with the
  // step), else null and the static buffers each batch is copied into.
  BatchSource* source = nullptr;
  torch::Tensor images;
  torch::Tensor labels;
  // float64 [5], written by each replay (DeviceUpdate::RecordLosses): the
  // last step's total loss, cross entropy and regularization, and the first
  // non-finite loss with its step (0: none yet). Read in one copy.
  torch::Tensor readout;
  bool captured = false;
  bool failed = false;  // capture failed: eager steps from then on
  int64_t eager_left = kGraphWarmupSteps;
};

// The input and model of a training run, and its loop. Train() is
// Trainer(o).Run().
class Trainer {
 public:
  // Set-up: checks the options, resolves the dataset, builds the learning
  // rate schedule, the net (seeded, on the device), the trainable variables
  // and the optimizer, and the checkpoint manager.
  explicit Trainer(const TrainOptions& o);
  TrainResult Run();

 private:
  // Resume from train_dir's latest checkpoint (everything, exactly), or
  // warm start from --checkpoint_path; then the moving averages.
  void Restore();
  void Resume(const std::string& path);
  // One step on `batch`: forward, loss, backward, the L2 terms, gradient
  // exchange, the update, the moving averages. Throws before the update
  // on a non-finite loss.
  // `summarize`: keep the step's end points in the stats.
  StepStats Step(const Batch& batch, bool summarize);
  // The forward pass (under --precision's autocast) and the float32 losses:
  // returns the total (cross entropy + 0.4 x the auxiliary head's), the
  // net's output in *out and the main cross entropy in *ce.
  torch::Tensor ForwardLoss(const torch::Tensor& images,
                            const torch::Tensor& labels, NetOutput* out,
                            torch::Tensor* ce);
  // --cuda_graph: whether this step is to be a graph replay (else eager:
  // the warm-up steps before the capture, summary steps, and all steps
  // after a failed capture).
  bool GraphDue(bool summarize);
  // The step as a graph replay, capturing it first if needed, on the batch
  // `source` made (AdvanceCapturedBatch done) or on `batch`, the other null;
  // `end`: the stream position after the batch. False when the capture
  // failed: the step is then to be run eagerly.
  bool GraphStep(BatchSource* source, const Batch* batch, int64_t end,
                 StepStats* stats);
  // Captures the step body on a side stream; false (and a warning) when
  // the step cannot be captured.
  bool Capture();
  // The captured body: forward, loss, backward, L2 terms, the non-finite
  // bookkeeping, clipping, update, moving averages. No host reads.
  void GraphBody();
  // Reads the graph's losses into `stats`; throws if a step's loss was
  // not finite.
  void ReadGraphLosses(StepStats* stats);
  // Throws if a captured step's loss was not finite.
  void CheckGraphFinite();
  // The captured step's readout, in one copy to the host; throws (as
  // CheckGraphFinite) when a loss was not finite.
  std::array<double, 5> ReadGraph();
  // Writes the checkpoint of the current state (refuses non-finite
  // variables) and returns its path.
  std::string Save();
  std::string LastGoodCheckpoint() const;

  const TrainOptions& o_;
  DatasetSpec spec_;
  int64_t num_samples_ = 0;
  std::unique_ptr<LearningRateSchedule> schedule_;
  InputOptions input_;
  std::shared_ptr<Net> net_;
  NamedTensors model_vars_;
  NamedTensors trainable_;
  std::unique_ptr<Optimizer> optimizer_;
  Precision precision_ = Precision::kFloat32;
  // fp16's dynamic loss scaling (disabled otherwise).
  LossScaler loss_scaler_{false};
  bool tf_format_ = false;
  std::unique_ptr<CheckpointManager> manager_;
  std::unique_ptr<ExponentialMovingAverage> averages_;
  // On a CUDA device with any optimizer but ftrl: the multi-tensor update.
  std::unique_ptr<DeviceUpdate> device_update_;
  std::unique_ptr<CapturedStep> graph_;

  // Training state: what a checkpoint holds beside the variables.
  int64_t global_step_ = 0;
  int64_t position_ = 0;  // examples of the input stream consumed
  // The reader state at position_ (see kInputStateKey).
  std::shared_ptr<const std::string> input_state_;
  std::optional<std::string> latest_;
  // The global step latest_ holds (-1: none).
  int64_t latest_step_ = -1;
};

// ------------------------------------------------------------------ hooks

// "global step N: loss = L (S sec/step, E examples/sec)" every n steps.
class LoggingHook : public TrainHook {
 public:
  explicit LoggingHook(int64_t every_n) : every_n_(every_n) {}
  void AfterStep(const StepStats& s) override {
    ++window_steps_;
    if (s.global_step % every_n_ != 0) return;
    const auto now = Clock::now();
    const double secs =
        Seconds(window_start_, now) / std::max<int64_t>(1, window_steps_);
    char line[160];
    std::snprintf(line, sizeof(line),
                  "global step %lld: loss = %.4f (%.3f sec/step, %.1f "
                  "examples/sec)",
                  static_cast<long long>(s.global_step), s.loss, secs,
                  s.examples / std::max(secs, 1e-9));
    LOG(INFO) << line;
    window_start_ = now;
    window_steps_ = 0;
  }

 private:
  int64_t every_n_;
  Clock::time_point window_start_ = Clock::now();
  int64_t window_steps_ = 0;
};

// TF-Slim's summaries every save_summaries_secs (train_image_classifier +
// model_deploy): scalars total_loss, the losses, learning_rate, each
// replica's clone_loss; histograms of every model variable and of the end
// points' activations (of the step's first replica), with their sparsity.
// total_loss again at the end.
class SummaryHook : public TrainHook {
 public:
  SummaryHook(const std::string& dir, double every_secs, NamedTensors vars)
      : events_(dir), every_secs_(every_secs), vars_(std::move(vars)) {}
  // Before each step: whether its stats will be written (Step then keeps
  // its end points).
  bool Arm() {
    armed_ = Seconds(last_, Clock::now()) >= every_secs_;
    return armed_;
  }
  void AfterStep(const StepStats& s) override {
    if (!armed_) return;
    armed_ = false;
    const int64_t step = s.global_step;
    events_.AddScalar("total_loss", static_cast<float>(s.loss), step);
    events_.AddScalar("losses/softmax_cross_entropy_loss",
                      static_cast<float>(s.cross_entropy), step);
    if (s.regularization) {
      events_.AddScalar("regularization_loss",
                        static_cast<float>(*s.regularization), step);
    }
    events_.AddScalar("learning_rate", static_cast<float>(s.learning_rate),
                      step);
    // model_deploy scales each clone's loss by 1 / num_clones.
    const size_t n = s.replica_losses.size();
    for (size_t k = 0; k < n; ++k) {
      events_.AddScalar(StrCat("Losses/clone_", k, "/clone_loss"),
                        static_cast<float>(s.replica_losses[k] / n), step);
    }
    for (const auto& [name, t] : s.end_points) {
      events_.AddHistogram("activations/" + name, MakeHistogram(t, name), step);
      events_.AddScalar("sparsity/" + name, static_cast<float>(ZeroFraction(t)),
                        step);
    }
    for (const auto& v : vars_) {
      events_.AddHistogram(v.name, MakeHistogram(v.tensor, v.name), step);
    }
    events_.Flush();
    last_ = Clock::now();
  }
  void End(const StepStats& last) override {
    events_.AddScalar("total_loss", static_cast<float>(last.loss),
                      last.global_step);
    events_.Flush();
  }

 private:
  EventWriter events_;
  double every_secs_;
  NamedTensors vars_;
  bool armed_ = false;
  Clock::time_point last_ = Clock::now();
};

// A checkpoint every save_interval_secs (the final one is the trainer's).
class SaveHook : public TrainHook {
 public:
  SaveHook(double every_secs, std::function<void()> save)
      : every_secs_(every_secs), save_(std::move(save)) {}
  void AfterStep(const StepStats&) override {
    if (Seconds(last_, Clock::now()) < every_secs_) return;
    save_();
    last_ = Clock::now();
  }

 private:
  double every_secs_;
  std::function<void()> save_;
  Clock::time_point last_ = Clock::now();
};

// ---------------------------------------------------------------- set-up

Trainer::Trainer(const TrainOptions& o) : o_(o) {
  SLIM_CHECK(!o.dataset_dir.empty(),
             "You must supply the dataset directory with --dataset_dir");
  SLIM_CHECK(o.batch_size > 0, "--batch_size must be positive, got ",
             o.batch_size);
  SLIM_CHECK(o.log_every_n_steps > 0, "--log_every_n_steps must be positive");
  SLIM_CHECK(
      o.num_replicas >= 1 && o.replica >= 0 && o.replica < o.num_replicas,
      "replica ", o.replica, " of ", o.num_replicas, " is out of range");
  SLIM_CHECK(o.num_replicas == 1 || o.gradient_exchange != nullptr,
             o.num_replicas, " replicas need a gradient exchange");
  SLIM_CHECK(o.clip_gradient_norm >= 0, "--clip_gradient_norm must be >= 0 ",
             "(0: no clipping), got ", o.clip_gradient_norm);
  SLIM_CHECK(o.checkpoint_format == "safetensors" ||
                 o.checkpoint_format == "tensorflow",
             "--checkpoint_format must be safetensors or tensorflow, not '",
             o.checkpoint_format, "'");
  if (o.cuda_graph) {
    SLIM_CHECK(o.device.is_cuda(),
               "--cuda_graph needs a CUDA device; training runs on ", o.device);
    SLIM_CHECK(DeviceUpdate::Supports(o.optimizer),
               "--cuda_graph with --optimizer=", o.optimizer,
               " is not supported yet (every other optimizer is)");
    SLIM_CHECK(o.num_replicas == 1, "--cuda_graph with ", o.num_replicas,
               " replicas is not supported yet");
    SLIM_CHECK(o.precision != "fp16",
               "--cuda_graph with --precision=fp16 is not supported yet (its "
               "loss scaling decides on the host)");
  }
  // Fail on an unwritable train_dir before any work.
  CheckDirWritable(o.train_dir, "--train_dir");

  spec_ = ResolveDatasetSpec(o.dataset_name, o.dataset_dir);
  num_samples_ = spec_.SplitSize(o.dataset_split_name);
  CheckTrainableData(spec_, o, num_samples_);
  const std::string preprocessing =
      o.preprocessing_name.empty() ? o.model_name : o.preprocessing_name;
  GetNetRegistry().Get(o.model_name);  // unknown names: fail early
  GetPreprocessingRegistry().Get(preprocessing);
  GetOptimizerRegistry().Get(o.optimizer);
  LearningRateOptions lr_options = o.learning_rate;
  lr_options.batch_size = o.batch_size;
  lr_options.num_samples_per_epoch = num_samples_;
  schedule_ =
      CreateLearningRateSchedule(o.learning_rate_decay_type, lr_options);

  input_.dataset_dir = o.dataset_dir;
  input_.split_name = o.dataset_split_name;
  input_.preprocessing_name = preprocessing;
  input_.use_grayscale = o.use_grayscale;
  // Every replica reads the global batch and decodes only its slice.
  input_.batch_size = o.batch_size * o.num_replicas;
  if (o.num_replicas > 1) {
    input_.shard_offset = o.replica * o.batch_size;
    input_.shard_size = o.batch_size;
  }
  input_.training = true;
  input_.num_readers = o.num_readers;
  input_.num_preprocessing_threads = o.num_preprocessing_threads;
  input_.shuffle_buffer_size = o.shuffle_buffer_size;
  input_.seed = o.seed;
  input_.labels_offset = o.labels_offset;
  input_.input_mode = o.input_mode;
  input_.in_memory_max_bytes = o.in_memory_max_bytes;
  input_.use_bounding_boxes = o.use_bounding_boxes;
  SLIM_CHECK(o.augmentation_draws == "auto" || o.augmentation_draws == "host" ||
                 o.augmentation_draws == "device",
             "--augmentation_draws must be auto, host or device, not '",
             o.augmentation_draws, "'");
  input_.draw_augmentation_on_device =
      o.augmentation_draws == "device" ||
      (o.augmentation_draws == "auto" && o.cuda_graph);
  input_.device = o.device;
  if (o.device.is_cuda()) {
    // TensorFlow autotunes its convolutions; so does cuDNN's benchmark mode.
    at::globalContext().setBenchmarkCuDNN(true);
  }

  torch::manual_seed(o.seed);
  net_ = CreateNet(o.model_name,
                   NetOptions()
                       .num_classes(NumNetClasses(spec_, o.labels_offset))
                       .weight_decay(o.weight_decay)
                       .input_channels(InputChannels(spec_, input_))
                       .image_size(std::max<int64_t>(o.train_image_size, 0)));
  precision_ = ParsePrecision(o.precision, o.device);
  loss_scaler_ = LossScaler(precision_ == Precision::kFloat16);
  net_->module().to(o.device);
  net_->SetMemoryFormat(
      ResolveDataFormat(o.data_format, o.model_name, o.device));
  net_->module().train();
  input_.image_size =
      o.train_image_size > 0 ? o.train_image_size : net_->default_image_size();
  net_->CheckImageSize(input_.image_size);

  model_vars_ = net_->ModelVariables();
  for (auto& v : net_->TrainableVariables()) {
    if (o.trainable_scopes.empty() || InScopes(v.name, o.trainable_scopes)) {
      trainable_.push_back(v);
    } else {
      v.tensor.requires_grad_(false);
    }
  }
  SLIM_CHECK(!trainable_.empty(), "--trainable_scopes selects no variable of ",
             o.model_name, " (variables are named like '",
             model_vars_.front().name, "')");
  optimizer_ = CreateOptimizer(o.optimizer, trainable_, o.optimizer_options);
  if (o.gradient_exchange != nullptr) o.gradient_exchange->Attach(trainable_);

  tf_format_ = o.checkpoint_format == "tensorflow";
  manager_ = std::make_unique<CheckpointManager>(
      o.train_dir, o.max_checkpoints_to_keep,
      tf_format_ ? CheckpointFormat::kTensorFlow
                 : CheckpointFormat::kSafetensors);
}

// --------------------------------------------------------------- restore

void Trainer::Restore() {
  latest_ = manager_->Latest();
  if (latest_) {
    if (!o_.checkpoint_path.empty()) {
      LOG(INFO) << "Ignoring --checkpoint_path because a checkpoint already "
                   "exists in "
                << o_.train_dir;
    }
    Resume(*latest_);
  } else if (!o_.checkpoint_path.empty()) {
    RestoreOptions restore;
    restore.exclude_scopes = o_.checkpoint_exclude_scopes;
    restore.ignore_missing = o_.ignore_missing_vars;
    restore.hints.model_name = o_.model_name;
    restore.hints.scope_flags = true;  // train_image_classifier has them
    const RestoredCheckpoint ckpt = RestoreCheckpointFor(
        o_.checkpoint_path, *net_, restore, /*shadows=*/false);
    LOG(INFO) << "Fine-tuning from "
              << (ckpt.tensorflow ? "TensorFlow checkpoint " : "") << ckpt.path
              << " (" << ckpt.restored << " variables restored)";
  }
  if (!latest_ && o_.moving_average_decay != 0.0) {
    // Shadows start from the variables as training starts (after a warm
    // start: the restored values).
    averages_ = std::make_unique<ExponentialMovingAverage>(
        o_.moving_average_decay, model_vars_);
  }
  position_ = input_.start_position;
  if (!input_.resume_state.empty()) {
    input_state_ = std::make_shared<const std::string>(input_.resume_state);
  }
}

void Trainer::Resume(const std::string& path) {
  const OpenedCheckpoint opened = OpenCheckpoint(path);
  CheckpointData ckpt;
  if (opened.tensorflow()) {  // --checkpoint_format=tensorflow
    ckpt.tensors = FromTfLayouts(opened.tf().ReadAll(), *net_);
  } else {
    ckpt = opened.data();
  }
  RestoreOptions restore;  // everything: a resume is not a warm start
  restore.hints.model_name = o_.model_name;
  restore.hints.checkpoint_flag = "--train_dir";
  RestoreVariables(model_vars_, ckpt, path, restore);
  std::map<std::string, torch::Tensor> state;
  for (auto& t : ckpt.tensors) state[t.name] = t.tensor;
  try {
    optimizer_->LoadState(state);
  } catch (const Error& e) {
    SLIM_FAIL("cannot resume from '", path, "' with --optimizer=", o_.optimizer,
              ": ", e.what());
  }
  torch::Tensor step = ckpt.Find(kGlobalStepKey);
  SLIM_CHECK(step.defined() && step.numel() == 1, "checkpoint '", path,
             "' has no ", kGlobalStepKey);
  global_step_ = step.item<int64_t>();
  torch::Tensor rng = ckpt.Find(kRngStateKey);
  if (rng.defined()) SetCpuRngState(rng);
  torch::Tensor pos = ckpt.Find(kInputPositionKey);
  input_.start_position =
      pos.defined() ? pos.item<int64_t>() : global_step_ * o_.batch_size;
  torch::Tensor input_state = ckpt.Find(kInputStateKey);
  if (input_state.defined() && input_state.scalar_type() == torch::kUInt8) {
    torch::Tensor bytes = input_state.contiguous().cpu();
    input_.resume_state.assign(
        reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
        static_cast<size_t>(bytes.numel()));
  }
  if (o_.moving_average_decay != 0.0) {
    averages_ = std::make_unique<ExponentialMovingAverage>(
        o_.moving_average_decay, model_vars_);
    if (!averages_->Load(ckpt, path)) {
      LOG(WARNING) << path << " has no moving averages (it was trained "
                   << "without --moving_average_decay); they start from the "
                   << "current variables";
    }
  }
  latest_step_ = global_step_;
  LOG(INFO) << "Resuming from " << path << " at global step " << global_step_;
}

// ------------------------------------------------------------------ step

StepStats Trainer::Step(const Batch& batch, bool summarize) {
  StepStats stats;
  stats.learning_rate = schedule_->At(global_step_);
  // With replicas, the input hands out this replica's slice only.
  const torch::Tensor& images = batch.images;
  const torch::Tensor& labels = batch.labels;
  SLIM_CHECK(labels.size(0) == o_.batch_size, "a batch of ", labels.size(0),
             " examples for replica ", o_.replica, ", expected ",
             o_.batch_size);
  if (o_.replica > 0) {
    // Dropout of this replica: a function of (seed, replica, step) only.
    torch::manual_seed(o_.seed * 0x9E3779B97F4A7C15ULL +
                       static_cast<uint64_t>(o_.replica) *
                           0xBF58476D1CE4E5B9ULL +
                       static_cast<uint64_t>(global_step_));
  }
  stats.examples = labels.size(0);

  NetOutput out;
  torch::Tensor ce;
  torch::Tensor total = ForwardLoss(images, labels, &out, &ce);
  if (summarize) {
    for (const auto& [name, t] : out.end_points) {
      stats.end_points.emplace_back(name, t.detach());
    }
  }
  for (auto& v : trainable_) v.tensor.mutable_grad() = torch::Tensor();
  if (o_.gradient_exchange != nullptr) {
    o_.gradient_exchange->ShareLoss(total);
  }
  // An attached exchange starts averaging gradients as backward makes them.
  loss_scaler_.Scale(total).backward();
  if (o_.gradient_exchange != nullptr) {
    for (auto& v : trainable_) {
      if (!v.tensor.grad().defined()) {
        v.tensor.mutable_grad() = torch::zeros_like(v.tensor);
      }
    }
    o_.gradient_exchange->Exchange(trainable_);
    stats.replica_losses = o_.gradient_exchange->ReplicaLosses();
  }
  // fp16: the gradients back to the loss's scale; a step with a non-finite
  // one (the same on every replica: they are averaged) updates nothing.
  const bool apply = loss_scaler_.Unscale(trainable_);
  stats.skipped = !apply;
  // The L2 terms' gradients go straight into .grad (also for weight_decay
  // 0: a net may fix its own, as cifarnet_tutorial); every replica has the
  // same variables, so they are added after the exchange.
  torch::Tensor reg = net_->ApplyRegularizationGradients();
  if (stats.replica_losses.empty()) {
    stats.loss = (total.detach() + reg).item<double>();
  } else {
    // model_deploy's total_loss: the clones' mean + the L2 terms. The same
    // on every replica, so a non-finite loss stops all of them alike.
    double sum = 0;
    for (double l : stats.replica_losses) sum += l;
    stats.loss = sum / static_cast<double>(stats.replica_losses.size()) +
                 reg.item<double>();
  }
  // Read now, while the device is synchronised by the loss anyway.
  stats.cross_entropy = ce.item<double>();
  if (reg.defined()) stats.regularization = reg.item<double>();
  SLIM_CHECK(std::isfinite(stats.loss), "loss is ",
             std::isnan(stats.loss) ? "NaN" : "infinite", " at global step ",
             global_step_ + 1, "; training stopped before the update",
             LastGoodCheckpoint());
  if (apply && o_.clip_gradient_norm > 0) {
    ClipGradientNorms(trainable_, o_.clip_gradient_norm);
  }
  if (apply && device_update_) {
    device_update_->SetStep(stats.learning_rate, global_step_ + 1);
    device_update_->ApplyOptimizer();
  } else if (apply) {
    optimizer_->Apply(stats.learning_rate);
  }
  ++global_step_;
  if (apply && averages_) {
    if (device_update_) {
      device_update_->ApplyAverages();
    } else {
      averages_->Apply(global_step_);
    }
  }
  if (!apply) {
    LOG(WARNING) << "global step " << global_step_
                 << ": a gradient is not finite in float16; update skipped, "
                    "loss scale now "
                 << loss_scaler_.scale();
  }
  position_ = batch.end_position;
  input_state_ = batch.input_state;

  stats.global_step = global_step_;
  return stats;
}

torch::Tensor Trainer::ForwardLoss(const torch::Tensor& images,
                                   const torch::Tensor& labels, NetOutput* out,
                                   torch::Tensor* ce) {
  {
    // --precision: the net under autocast; the losses in float32.
    AutocastScope autocast(precision_, o_.device);
    *out = net_->Forward(images);
  }
  *ce = SoftmaxCrossEntropy(out->logits.to(torch::kFloat32), labels,
                            o_.label_smoothing);
  if (!out->aux_logits.defined()) return *ce;
  return *ce + SoftmaxCrossEntropy(out->aux_logits.to(torch::kFloat32), labels,
                                   o_.label_smoothing, 0.4);
}

// ------------------------------------------------------------ cuda graph

bool Trainer::GraphDue(bool summarize) {
  CapturedStep& g = *graph_;
  if (g.failed || summarize) return false;
  if (g.captured) return true;
  if (g.eager_left > 0) {
    --g.eager_left;
    return false;
  }
  return true;
}

bool Trainer::GraphStep(BatchSource* source, const Batch* batch, int64_t end,
                        StepStats* stats) {
  CapturedStep& g = *graph_;
  if (!g.captured) {
    g.source = source;
    if (batch != nullptr) {
      g.images = batch->images.detach().clone();
      g.labels = batch->labels.detach().clone();
    }
    g.readout = torch::zeros(
        {5}, torch::TensorOptions().dtype(torch::kFloat64).device(o_.device));
    if (!Capture()) {
      g.failed = true;
      return false;
    }
    g.captured = true;
    LOG(INFO) << "--cuda_graph: the training step"
              << (source != nullptr ? " and the making of its batch are"
                                    : " is")
              << " captured; replaying from global step " << global_step_ + 1;
  }
  StepStats s;
  s.learning_rate = schedule_->At(global_step_);
  if (batch != nullptr) {
    SLIM_CHECK(batch->images.sizes() == g.images.sizes() &&
                   batch->labels.sizes() == g.labels.sizes(),
               "--cuda_graph: a batch of images ", batch->images.sizes(),
               " where the captured step takes ", g.images.sizes());
    g.images.copy_(batch->images, /*non_blocking=*/true);
    g.labels.copy_(batch->labels, /*non_blocking=*/true);
    input_state_ = batch->input_state;
  }
  s.examples = o_.batch_size;
#ifdef SLIMTORCH_WITH_CUDA
  device_update_->SetStep(s.learning_rate, global_step_ + 1);
  g.graph->replay();
#endif
  ++global_step_;
  position_ = end;
  s.global_step = global_step_;
  const bool read =
      global_step_ % o_.log_every_n_steps == 0 || !o_.hooks.empty() ||
      (o_.max_number_of_steps > 0 && global_step_ >= o_.max_number_of_steps);
  if (read) {
    ReadGraphLosses(&s);
  } else {
    s.loss = s.cross_entropy = std::nan("");
    s.losses_read = false;
  }
  *stats = std::move(s);
  return true;
}

void Trainer::GraphBody() {
  CapturedStep& g = *graph_;
  torch::Tensor images = g.images;
  torch::Tensor labels = g.labels;
  if (g.source != nullptr) {
    Batch batch = g.source->CapturedBatch();
    images = batch.images;
    labels = batch.labels;
  }
  NetOutput out;
  torch::Tensor ce;
  torch::Tensor total = ForwardLoss(images, labels, &out, &ce);
  total.backward();
  torch::Tensor reg = net_->ApplyRegularizationGradients();
  torch::NoGradGuard no_grad;
  // The losses, and the first non-finite one (step and value), for the next
  // read.
  device_update_->RecordLosses(total.detach(), ce.detach(), reg, g.readout);
  if (o_.clip_gradient_norm > 0) {
    ClipGradientNorms(trainable_, o_.clip_gradient_norm);
  }
  device_update_->ApplyOptimizer();
  if (averages_) device_update_->ApplyAverages();
}

bool Trainer::Capture() {
#ifdef SLIMTORCH_WITH_CUDA
  CapturedStep& g = *graph_;
  torch::cuda::synchronize();
  // Captured on a side stream, as PyTorch's torch.cuda.graph does; input
  // threads of the pipeline may keep using CUDA meanwhile (thread-local
  // capture mode). Casts are not cached by autocast while capturing (the
  // cache would be freed under the graph).
  const bool cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  g.graph = std::make_unique<at::cuda::CUDAGraph>();
  std::string error;
  {
    c10::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromPool());
    for (auto& v : trainable_) v.tensor.mutable_grad() = torch::Tensor();
    device_update_->SetStep(schedule_->At(global_step_), global_step_ + 1);
    try {
      g.graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        GraphBody();
      } catch (const std::exception& e) {
        error = e.what();
      }
      g.graph->capture_end();
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    }
  }
  at::autocast::set_autocast_cache_enabled(cache);
  if (!error.empty()) {
    (void)cudaGetLastError();
    g.graph.reset();
    for (auto& v : trainable_) v.tensor.mutable_grad() = torch::Tensor();
    LOG(WARNING) << "--cuda_graph: the training step could not be captured "
                    "as a CUDA graph; training goes on eagerly: "
                 << error.substr(0, 600);
    return false;
  }
  torch::cuda::synchronize();
  return true;
#else
  LOG(WARNING) << "--cuda_graph: this build has no CUDA; training eagerly";
  return false;
#endif
}

std::array<double, 5> Trainer::ReadGraph() {
  const torch::Tensor r = graph_->readout.to(torch::kCPU);
  std::array<double, 5> v;
  std::memcpy(v.data(), r.data_ptr<double>(), sizeof(v));
  const int64_t bad = static_cast<int64_t>(v[4]);
  if (bad != 0) {
    SLIM_FAIL("loss is ", std::isnan(v[3]) ? "NaN" : "infinite",
              " at global step ", bad,
              "; training stopped (--cuda_graph: no checkpoint after it was "
              "written)",
              LastGoodCheckpoint());
  }
  return v;
}

void Trainer::CheckGraphFinite() {
  if (graph_ == nullptr || !graph_->captured) return;
  ReadGraph();
}

void Trainer::ReadGraphLosses(StepStats* stats) {
  const std::array<double, 5> v = ReadGraph();
  stats->loss = v[0];
  stats->cross_entropy = v[1];
  stats->regularization = v[2];
  stats->losses_read = true;
}

// ------------------------------------------------------------ checkpoint

std::string Trainer::LastGoodCheckpoint() const {
  return latest_ ? StrCat("; the last good checkpoint is ", *latest_)
                 : std::string("; no checkpoint was written");
}

std::string Trainer::Save() {
  if (o_.replica != 0) return latest_.value_or("");  // replica 0 writes
  CheckGraphFinite();
  if (device_update_) device_update_->SyncState();  // Adam's beta powers
  std::string bad;
  SLIM_CHECK(AllFinite(model_vars_, &bad), "variable ", bad,
             " is not finite at global step ", global_step_,
             "; not saving a checkpoint",
             latest_ ? StrCat("; the last good checkpoint is ", *latest_)
                     : std::string());
  CheckpointData data;
  for (const auto& v : model_vars_) data.tensors.push_back(v);
  for (const auto& s : optimizer_->State()) data.tensors.push_back(s);
  if (averages_) {
    for (const auto& s : averages_->shadows()) data.tensors.push_back(s);
  }
  data.tensors.push_back(
      {kGlobalStepKey, torch::tensor(global_step_, torch::kInt64)});
  data.tensors.push_back({kRngStateKey, CpuRngState()});
  data.tensors.push_back(
      {kInputPositionKey, torch::tensor(position_, torch::kInt64)});
  if (input_state_) {
    torch::Tensor bytes = torch::empty(
        {static_cast<int64_t>(input_state_->size())}, torch::kUInt8);
    std::memcpy(bytes.data_ptr<uint8_t>(), input_state_->data(),
                input_state_->size());
    data.tensors.push_back({kInputStateKey, bytes});
  }
  data.metadata["model_name"] = o_.model_name;
  data.metadata["dataset_name"] = o_.dataset_name;
  data.metadata["optimizer"] = o_.optimizer;
  data.metadata["global_step"] = std::to_string(global_step_);
  if (tf_format_) data.tensors = ToTfLayouts(data.tensors, *net_);
  latest_ = manager_->Save(global_step_, data);
  latest_step_ = global_step_;
  LOG(INFO) << "Saved checkpoint " << *latest_;
  return *latest_;
}

// ------------------------------------------------------------------ loop

TrainResult Trainer::Run() {
  Restore();
  TrainResult result;
  result.global_step = global_step_;
  result.last_loss = std::nan("");
  const auto done = [&] {
    return o_.max_number_of_steps > 0 && global_step_ >= o_.max_number_of_steps;
  };
  if (done()) {
    LOG(INFO) << "global step " << global_step_
              << " already reached --max_number_of_steps="
              << o_.max_number_of_steps;
    result.checkpoint = latest_.value_or("");
    return result;
  }

  if (o_.device.is_cuda() && DeviceUpdate::Supports(o_.optimizer)) {
    device_update_ = std::make_unique<DeviceUpdate>(
        o_.optimizer, trainable_, *optimizer_, o_.optimizer_options,
        averages_.get(), model_vars_, o_.device);
  }
  if (o_.cuda_graph) graph_ = std::make_unique<CapturedStep>();
  std::unique_ptr<StepProfiler> profiler;
  if (!o_.profile_steps.empty() && o_.replica == 0) {
    profiler = std::make_unique<StepProfiler>(o_.profile_steps, o_.device,
                                              o_.train_dir + "/profile");
  }
  std::unique_ptr<BatchSource> pipeline = MakeInput(spec_, input_);
  // Logging, summaries and checkpoints are replica 0's.
  std::vector<TrainHook*> hooks;
  std::unique_ptr<LoggingHook> logging;
  std::unique_ptr<SummaryHook> summaries;
  std::unique_ptr<SaveHook> saving;
  if (o_.replica == 0) {
    logging = std::make_unique<LoggingHook>(o_.log_every_n_steps);
    summaries = std::make_unique<SummaryHook>(
        o_.train_dir, o_.save_summaries_secs, model_vars_);
    saving =
        std::make_unique<SaveHook>(o_.save_interval_secs, [this] { Save(); });
    hooks = {logging.get(), summaries.get(), saving.get()};
  }
  hooks.insert(hooks.end(), o_.hooks.begin(), o_.hooks.end());
  LOG(INFO) << "Training " << o_.model_name << " (" << net_->NumParameters()
            << " parameters) on " << o_.dataset_name << "/"
            << o_.dataset_split_name << " (" << num_samples_
            << " examples), batch " << o_.batch_size
            << (o_.num_replicas > 1
                    ? StrCat(" x ", o_.num_replicas, " replicas")
                    : std::string())
            << ", optimizer " << o_.optimizer << ", on " << o_.device
            << ", precision " << PrecisionName(precision_)
            << ", from global step " << global_step_;

  const auto start = Clock::now();
  double input_secs = 0;  // spent getting batches (the data path's cost)
  StepStats last;
  last.global_step = global_step_;
  last.loss = std::nan("");
  while (!done()) {
    bool stop = o_.stop_requested != nullptr && o_.stop_requested->load();
    if (o_.gradient_exchange != nullptr) {
      stop = o_.gradient_exchange->AgreeOnStop(stop);
    }
    if (stop) {
      LOG(INFO) << "Stop requested: saving at global step " << global_step_;
      result.stopped = true;
      break;
    }
    const bool summarize = summaries != nullptr && summaries->Arm();
    const bool graph = graph_ != nullptr && GraphDue(summarize);
    if (profiler) profiler->Before(global_step_ + 1);
    // The step's scope in a --profile_steps trace.
    at::RecordFunction step_scope(at::RecordScope::USER_SCOPE);
    if (step_scope.isActive()) step_scope.before("train_step");
    const auto wait_start = Clock::now();
    std::optional<Batch> batch;
    bool stepped = false;
    if (graph && pipeline->CanCaptureBatches()) {
      // The batch is made on the device, inside the graph.
      const int64_t end = pipeline->AdvanceCapturedBatch().second;
      input_secs += Seconds(wait_start, Clock::now());
      stepped = GraphStep(pipeline.get(), nullptr, end, &last);
      if (!stepped) batch = pipeline->CapturedBatch();
    } else {
      batch = pipeline->Next();
      input_secs += Seconds(wait_start, Clock::now());
      SLIM_CHECK(batch.has_value(), "training input ended unexpectedly");
      if (graph) {
        stepped = GraphStep(nullptr, &*batch, batch->end_position, &last);
      }
    }
    if (!stepped) last = Step(*batch, summarize);
    step_scope.end();
    if (profiler) profiler->After(last.global_step);
    result.global_step = last.global_step;
    result.last_loss = last.loss;
    for (TrainHook* hook : hooks) hook->AfterStep(last);
  }
  if (profiler) profiler->Finish(global_step_);
  if (!last.losses_read) ReadGraphLosses(&last);
  result.last_loss = last.loss;
  // Not again when the saving hook (or the resumed checkpoint) has this
  // step already.
  result.checkpoint = latest_step_ == global_step_ ? *latest_ : Save();
  for (TrainHook* hook : hooks) hook->End(last);
  const double total_secs = Seconds(start, Clock::now());
  LOG(INFO) << "Finished training at global step " << global_step_ << " in "
            << total_secs << " s; " << input_secs
            << " s of it waiting for input batches ("
            << 100.0 * input_secs / std::max(total_secs, 1e-9) << "%)";
  return result;
}

}  // namespace

TrainResult Train(const TrainOptions& options) {
  return Trainer(options).Run();
}

}  // namespace slimtorch
