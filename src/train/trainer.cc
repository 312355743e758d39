#include "slimtorch/train/trainer.h"

#include <ATen/record_function.h>
#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include "captured_step.h"
#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/data/input.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/nets/batch_norm.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/preprocessing/augment.h"
#include "slimtorch/train/device_update.h"
#include "slimtorch/train/loss.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/precision.h"
#include "slimtorch/train/run_setup.h"
#include "slimtorch/train/variables.h"
#include "train_state.h"

namespace slimtorch {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

// ---------------------------------------------------------------- set-up

Trainer::Trainer(const TrainOptions& o)
    : o_(o), rng_(std::make_unique<RunGenerator>(o.seed)) {
  RunGenerator::Scope rng(*rng_);
  CheckTrainOptions(o);
  augmentation_ = Augmentation::Create(o.auto_augment, o.random_erase);
  // Fail on an unwritable train_dir before any work.
  CheckDirWritable(o.train_dir, "--train_dir");
  if (o.replica == 0) {
    train_dir_lock_ = DirLock::Acquire(o.train_dir, "--train_dir");
  }
  ResolveData();
  BuildInputOptions();
  BuildNet();
  SelectTrainable();
  tf_format_ = o.checkpoint_format == CheckpointFormat::kTensorFlow;
  manager_ = std::make_unique<CheckpointManager>(
      o.train_dir, o.max_checkpoints_to_keep, o.checkpoint_format);
}

Trainer::~Trainer() = default;

// The dataset and its split, the registry names (unknown ones fail early)
// and the learning rate schedule.
void Trainer::ResolveData() {
  spec_ = ResolveDatasetSpec(o_.dataset_name, o_.dataset_dir);
  num_samples_ = spec_.SplitSize(o_.split_name);
  num_classes_ = spec_.num_classes - o_.labels_offset;
  CheckTrainableData(spec_, o_, num_samples_);
  GetNetRegistry().Get(o_.model_name);
  GetPreprocessingRegistry().Get(
      o_.preprocessing_name.empty() ? o_.model_name : o_.preprocessing_name);
  GetOptimizerRegistry().Get(o_.optimizer);
  LearningRateOptions lr_options = o_.learning_rate;
  // An update's batch: epochs count updates.
  lr_options.batch_size = o_.batch_size * o_.accumulate_gradients;
  lr_options.num_samples_per_epoch = num_samples_;
  schedule_ =
      CreateLearningRateSchedule(o_.learning_rate_decay_type, lr_options);
}

void Trainer::BuildInputOptions() {
  const TrainOptions& o = o_;
  input_ = ResolveRunInput(o);
  // Every replica reads the global batch and decodes only its slice.
  input_.batch_size = o.batch_size * o.num_replicas;
  if (o.num_replicas > 1) {
    input_.shard_offset = o.replica * o.batch_size;
    input_.shard_size = o.batch_size;
  }
  input_.training = true;
  // Copies of an example a replica's slice apart: on different replicas.
  input_.repeat.stride = o.num_replicas > 1 ? o.batch_size : 1;
  input_.draw_augmentation_on_device =
      o.augmentation_draws == AugmentationDraws::kDevice ||
      (o.augmentation_draws == AugmentationDraws::kAuto && o.cuda_graph);
}

// The net, seeded (the same initial weights on every device), on the
// device in its memory order, and the image size it is fed.
void Trainer::BuildNet() {
  torch::manual_seed(o_.seed);
  net_ = BuildRunNet(spec_, o_, NetOptions().weight_decay(o_.weight_decay),
                     /*training=*/true, &input_);
  precision_ = o_.precision;
  loss_scaler_ = LossScaler(precision_ == Precision::kFloat16);
  if (o_.sync_batch_norm && o_.num_replicas > 1) SyncBatchNorm();
}

// --sync_batch_norm: the net's batch norm layers normalise with the global
// batch's statistics.
void Trainer::SyncBatchNorm() {
  const int layers = nets::SetCrossReplicaBatchNorm(
      net_->module(), CrossReplicaSumOf(o_.gradient_exchange));
  LOG(INFO) << "Batch norm: statistics over the " << o_.num_replicas
            << " replicas' batches together in " << layers << " layers";
}

// The variables under --trainable_scopes (the others frozen) and their
// optimizer.
void Trainer::SelectTrainable() {
  model_vars_ = net_->ModelVariables();
  for (auto& v : net_->TrainableVariables()) {
    if (o_.trainable_scopes.empty() || InScopes(v.name, o_.trainable_scopes)) {
      trainable_.push_back(v);
    } else {
      v.tensor.requires_grad_(false);
    }
  }
  SLIM_CHECK(!trainable_.empty(), "--trainable_scopes selects no variable of ",
             o_.model_name, " (variables are named like '",
             model_vars_.front().name, "')");
  optimizer_ =
      CreateOptimizer(o_.optimizer, trainable_, o_.optimizer_parameters);
  if (o_.gradient_exchange != nullptr) o_.gradient_exchange->Attach(trainable_);
}

// ----------------------------------------------------------------- start

void Trainer::Start() {
  RunGenerator::Scope rng(*rng_);
  if (o_.device.is_cuda()) {
    // TensorFlow autotunes its convolutions; so does cuDNN's benchmark mode
    // (a process-wide setting).
    at::globalContext().setBenchmarkCuDNN(true);
  }
  if (o_.device.is_cuda() && DeviceUpdate::Supports(o_.optimizer)) {
    device_update_ = std::make_unique<DeviceUpdate>(
        *optimizer_, averages_.get(), model_vars_, o_.device);
  }
  if (o_.cuda_graph) {  // the options checked: a CUDA device_update_
    graph_ =
        std::make_unique<CapturedStep>(trainable_, *device_update_, o_.device);
  }
  InstallHooks();
  LogStart();
  start_time_ = Clock::now();
  input_secs_ = 0;
}

// The input, and the hooks in the order they run: the stop check (every
// replica), then replica 0's profiling, logging, summaries, training
// metrics and checkpoints, then every replica's memory trim, then
// TrainOptions::hooks; each hook then Begins.
void Trainer::InstallHooks() {
  GradientExchange* exchange = o_.gradient_exchange;
  own_hooks_.push_back(std::make_unique<StopHook>(
      o_.stop_requested,
      exchange == nullptr
          ? std::function<bool(bool)>()
          : [exchange](bool local) { return exchange->AgreeOnStop(local); }));
  if (!o_.profile_steps.empty() && o_.replica == 0) {
    own_hooks_.push_back(std::make_unique<ProfileHook>(
        o_.profile_steps, o_.device, o_.train_dir + "/profile"));
  }
  pipeline_ = MakeInput(spec_, input_);
  if (o_.replica == 0) {
    if (o_.progress) {
      own_hooks_.push_back(std::make_unique<ProgressHook>(
          stderr, o_.max_number_of_steps, o_.log_every_n_steps));
    }
    own_hooks_.push_back(std::make_unique<LoggingHook>(o_.log_every_n_steps));
    summaries_ = std::make_unique<EventWriter>(o_.train_dir);
    own_hooks_.push_back(
        std::make_unique<SummaryHook>(o_.save_summaries_secs, model_vars_));
    if (!o_.train_metrics.empty()) {
      own_hooks_.push_back(
          std::make_unique<MetricHook>(o_.train_metrics, num_classes_));
    }
    own_hooks_.push_back(
        std::make_unique<SaveHook>(o_.save_interval_secs, [this] { Save(); }));
  }
  own_hooks_.push_back(
      std::make_unique<MemoryTrimHook>(HeapTrimIntervalSeconds()));
  for (const auto& hook : own_hooks_) hooks_.push_back(hook.get());
  hooks_.insert(hooks_.end(), o_.hooks.begin(), o_.hooks.end());
  HookContext context;
  context.summaries = summaries_.get();
  context.replica = o_.replica;
  for (TrainHook* hook : hooks_) hook->Begin(context);
}

void Trainer::LogStart() const {
  LOG(INFO) << "Training " << o_.model_name << " (" << net_->NumParameters()
            << " parameters) on " << o_.dataset_name << "/" << o_.split_name
            << " (" << num_samples_ << " examples), batch " << o_.batch_size
            << (o_.num_replicas > 1
                    ? StrCat(" x ", o_.num_replicas, " replicas")
                    : std::string())
            << RecipeExtras() << ", optimizer " << o_.optimizer << ", on "
            << o_.device << ", precision " << PrecisionName(precision_)
            << ", from global step " << global_step_;
}

std::string Trainer::RecipeExtras() const {
  std::string s;
  if (o_.accumulate_gradients > 1) {
    s += StrCat(" x ", o_.accumulate_gradients, " accumulated an update");
  }
  if (o_.mix.enabled()) {
    s += StrCat(", mixup ", o_.mix.mixup_alpha, " / cutmix ",
                o_.mix.cutmix_alpha);
  }
  if (augmentation_) s += ", augmentation " + augmentation_->Describe();
  if (o_.repeat.on()) {
    s += StrCat(", each example ", o_.repeat.repeats, " times");
  }
  return s;
}

// ------------------------------------------------------------------ step

bool Trainer::RunStep(StepStats* stats) {
  RunGenerator::Scope rng(*rng_);
  StepPlan plan;
  if (!BeforeStep(&plan)) return false;
  const bool graph =
      graph_ != nullptr && graph_->Due(plan.summarize || plan.keep_outputs);
  keep_outputs_ = plan.keep_outputs;
  // The step's scope in a --profile_steps trace.
  at::RecordFunction step_scope(at::RecordScope::USER_SCOPE);
  if (step_scope.isActive()) step_scope.before("train_step");
  StepStats s = NextStep(plan.summarize, graph);
  keep_outputs_ = false;
  step_scope.end();
  try {
    for (TrainHook* hook : hooks_) hook->AfterStep(s);
  } catch (const Error& e) {
    SLIM_FAIL(e.what(), Stopped());  // a checkpoint or event file failed
  }
  *stats = std::move(s);
  return true;
}

bool Trainer::BeforeStep(StepPlan* plan) {
  plan->global_step = global_step_ + 1;
  for (TrainHook* hook : hooks_) {
    hook->BeforeStep(plan);
    if (plan->stop) return false;
  }
  return true;
}

StepStats Trainer::NextStep(bool summarize, bool graph) {
  const auto wait_start = Clock::now();
  std::optional<Batch> batch;
  StepStats stats;
  if (graph && pipeline_->CanCaptureBatches()) {
    // The batch is made on the device, inside the graph.
    const int64_t end = pipeline_->AdvanceCapturedBatch().second;
    input_secs_ += Seconds(wait_start, Clock::now());
    if (GraphStep(pipeline_.get(), nullptr, end, &stats)) return stats;
    batch = pipeline_->CapturedBatch();
  } else if (o_.accumulate_gradients > 1) {
    return NextAccumulatedStep(summarize);
  } else {
    batch = pipeline_->Next();
    input_secs_ += Seconds(wait_start, Clock::now());
    SLIM_CHECK(batch.has_value(), "training input ended unexpectedly");
    if (graph && GraphStep(nullptr, &*batch, batch->end_position, &stats)) {
      return stats;
    }
  }
  return Step(*batch, summarize);
}

StepStats Trainer::NextAccumulatedStep(bool summarize) {
  // Each micro-batch is read when its forward pass starts, so that only one
  // is held at a time.
  std::optional<Batch> batch;
  const MicroBatchFn micro = [&](int k) {
    const auto wait_start = Clock::now();
    batch = pipeline_->Next();
    input_secs_ += Seconds(wait_start, Clock::now());
    SLIM_CHECK(batch.has_value(), "training input ended unexpectedly");
    return MicroBatchInputs(*batch, k);
  };
  return EagerStep(micro, o_.accumulate_gradients, summarize,
                   [&]() -> const Batch& { return *batch; });
}

StepStats Trainer::Step(const Batch& batch, bool summarize) {
  return Step(std::vector<Batch>{batch}, summarize);
}

StepStats Trainer::Step(const std::vector<Batch>& micro_batches,
                        bool summarize) {
  RunGenerator::Scope rng(*rng_);
  SLIM_CHECK(static_cast<int>(micro_batches.size()) == o_.accumulate_gradients,
             "a step of ", micro_batches.size(), " micro-batches, expected ",
             "--accumulate_gradients=", o_.accumulate_gradients);
  const MicroBatchFn micro = [&](int k) {
    return MicroBatchInputs(micro_batches[k], k);
  };
  return EagerStep(micro, o_.accumulate_gradients, summarize,
                   [&]() -> const Batch& { return micro_batches.back(); });
}

StepStats Trainer::EagerStep(const MicroBatchFn& micro, int count,
                             bool summarize,
                             const std::function<const Batch&()>& last) {
  StepStats stats;
  stats.learning_rate = schedule_->At(global_step_);
  stats.examples = o_.batch_size * count;
  for (auto& v : trainable_) v.tensor.mutable_grad() = torch::Tensor();
  if (device_update_) {
    device_update_->SetStep(stats.learning_rate, global_step_ + 1);
  }
  const bool applied = StepBody(micro, count, summarize, &stats);
  ++global_step_;
  if (!applied) {
    LOG(WARNING) << "global step " << global_step_
                 << ": a gradient is not finite in float16; update skipped, "
                    "loss scale now "
                 << loss_scaler_.scale();
  }
  position_ = last().end_position;
  input_state_ = last().input_state;
  stats.global_step = global_step_;
  return stats;
}

void Trainer::PrepareReplicaStep(const Batch& batch, int k) {
  // With replicas, the input hands out this replica's slice only.
  SLIM_CHECK(batch.labels.size(0) == o_.batch_size, "a batch of ",
             batch.labels.size(0), " examples for replica ", o_.replica,
             ", expected ", o_.batch_size);
  if (o_.replica > 0) {
    // Dropout of this replica: a function of (seed, replica, micro-batch)
    // only; a micro-batch's number is the global step's with one per step.
    const auto micro_step =
        static_cast<uint64_t>(global_step_ * o_.accumulate_gradients + k);
    torch::manual_seed(
        o_.seed * 0x9E3779B97F4A7C15ULL +
        static_cast<uint64_t>(o_.replica) * 0xBF58476D1CE4E5B9ULL + micro_step);
  }
}

std::pair<torch::Tensor, torch::Tensor> Trainer::MicroBatchInputs(
    const Batch& batch, int k) {
  PrepareReplicaStep(batch, k);
  if (!o_.mix.enabled()) return {batch.images, batch.labels};
  std::mt19937_64 rng = MixGenerator(
      o_.seed, o_.replica, global_step_ * o_.accumulate_gradients + k);
  const MixDraws draws =
      DrawMix(o_.mix, batch.images.size(2), batch.images.size(3), rng);
  MixedBatch mixed = MixBatch(batch.images, batch.labels, num_classes_, draws,
                              o_.label_smoothing);
  return {std::move(mixed.images), std::move(mixed.targets)};
}

bool Trainer::StepBody(const MicroBatchFn& micro, int count, bool summarize,
                       StepStats* stats) {
  // The step's loss and cross entropy: the micro-batches' mean.
  torch::Tensor total, ce;
  bool apply = true;
  for (int k = 0; k < count; ++k) {
    const auto [images, labels] = micro(k);
    NetOutput out;
    torch::Tensor micro_ce;
    torch::Tensor micro_total = ForwardLoss(images, labels, &out, &micro_ce);
    const bool last = k + 1 == count;
    if (summarize && last && stats != nullptr) {
      for (const auto& [name, t] : out.end_points) {
        stats->end_points.emplace_back(name, t.detach());
      }
    }
    if (keep_outputs_ && last && stats != nullptr) {
      stats->logits = out.logits.detach();
      stats->labels = labels;
    }
    if (count == 1) {
      total = micro_total;
      ce = micro_ce;
      apply = Backward(micro_total, total, last, stats);
      continue;
    }
    total = k == 0 ? micro_total.detach() : total + micro_total.detach();
    ce = k == 0 ? micro_ce.detach() : ce + micro_ce.detach();
    if (last) {
      total = total / count;
      ce = ce / count;
    }
    apply = Backward(micro_total / count, total, last, stats);
  }
  // The L2 terms' gradients go straight into .grad (also for weight_decay
  // 0: a net may fix its own, as cifarnet_tutorial); every replica has the
  // same variables, so they are added after the exchange.
  torch::Tensor reg = net_->ApplyRegularizationGradients();
  torch::NoGradGuard no_grad;
  if (stats != nullptr) {
    ReadLosses(total, ce, reg, stats);
  } else {
    // The losses, and the first non-finite one (step and value), for the
    // next read of the captured step's readout.
    device_update_->RecordLosses(total.detach(), ce.detach(), reg,
                                 graph_->readout());
  }
  if (apply) ApplyUpdate(stats != nullptr ? stats->learning_rate : 0.0);
  return apply;
}

torch::Tensor Trainer::ForwardLoss(const torch::Tensor& images,
                                   const torch::Tensor& labels, NetOutput* out,
                                   torch::Tensor* ce) {
  {
    // --precision: the net under autocast; the losses in float32.
    AutocastScope autocast(precision_, o_.device);
    // The step the schedule of a net's drop path reads (NASNet): restored
    // with the checkpoint on resume.
    net_->SetGlobalStep(global_step_);
    *out = net_->Forward(images);
  }
  // Soft targets (batch mixing) hold the label smoothing already.
  const double smoothing = labels.dim() == 2 ? 0.0 : o_.label_smoothing;
  *ce = SoftmaxCrossEntropy(out->logits.to(torch::kFloat32), labels, smoothing);
  if (!out->aux_logits.defined()) return *ce;
  return *ce + SoftmaxCrossEntropy(out->aux_logits.to(torch::kFloat32), labels,
                                   smoothing, 0.4);
}

bool Trainer::Backward(const torch::Tensor& share,
                       const torch::Tensor& step_loss, bool last,
                       StepStats* stats) {
  // The captured step has one replica and no loss scaling (the options
  // refuse fp16 with --cuda_graph): a plain backward there.
  GradientExchange* exchange =
      stats != nullptr ? o_.gradient_exchange : nullptr;
  if (exchange != nullptr) {
    // Before the last micro-batch, gradients only add up here.
    exchange->AccumulateOnly(!last);
    if (last) exchange->ShareLoss(step_loss);
  }
  // An attached exchange starts averaging gradients as backward makes them.
  loss_scaler_.Scale(share).backward();
  if (!last) return true;
  if (exchange != nullptr) {
    for (auto& v : trainable_) {
      if (!v.tensor.grad().defined()) {
        v.tensor.mutable_grad() = torch::zeros_like(v.tensor);
      }
    }
    exchange->Exchange(trainable_);
    stats->replica_losses = exchange->ReplicaLosses();
  }
  // fp16: the gradients back to the loss's scale; a step with a non-finite
  // one (the same on every replica: they are averaged) updates nothing.
  const bool apply = loss_scaler_.Unscale(trainable_);
  if (stats != nullptr) stats->skipped = !apply;
  return apply;
}

void Trainer::ReadLosses(const torch::Tensor& total, const torch::Tensor& ce,
                         const torch::Tensor& reg, StepStats* stats) {
  if (stats->replica_losses.empty()) {
    stats->loss = (total.detach() + reg).item<double>();
  } else {
    // model_deploy's total_loss: the clones' mean + the L2 terms. The same
    // on every replica, so a non-finite loss stops all of them alike.
    double sum = 0;
    for (double l : stats->replica_losses) sum += l;
    stats->loss = sum / static_cast<double>(stats->replica_losses.size()) +
                  reg.item<double>();
  }
  // Read now, while the device is synchronised by the loss anyway.
  stats->cross_entropy = ce.item<double>();
  if (reg.defined()) stats->regularization = reg.item<double>();
  SLIM_CHECK(std::isfinite(stats->loss), "loss is ",
             std::isnan(stats->loss) ? "NaN" : "infinite", " at global step ",
             global_step_ + 1, "; training stopped before the update",
             LastGoodCheckpoint());
}

void Trainer::ApplyUpdate(double learning_rate) {
  if (o_.clip_gradient_norm > 0) {
    ClipGradientNorms(trainable_, o_.clip_gradient_norm);
  }
  // The device's update has its learning rate already (SetStep).
  if (device_update_) {
    device_update_->ApplyOptimizer();
  } else {
    optimizer_->Apply(learning_rate);
  }
  if (!averages_) return;
  if (device_update_) {
    device_update_->ApplyAverages();
  } else {
    averages_->Apply(global_step_ + 1);  // the global step after this one
  }
}

// ------------------------------------------------------------ cuda graph

bool Trainer::GraphStep(BatchSource* source, const Batch* batch, int64_t end,
                        StepStats* stats) {
  if (!graph_->captured()) {
    const auto body = [this](const torch::Tensor& images,
                             const torch::Tensor& labels) {
      StepBody([&](int) { return std::make_pair(images, labels); }, 1,
               /*summarize=*/false, /*stats=*/nullptr);
    };
    if (!graph_->Capture(source, batch, body, schedule_->At(global_step_),
                         global_step_ + 1)) {
      return false;
    }
    LOG(INFO) << "--cuda_graph: the training step"
              << (source != nullptr ? " and the making of its batch are"
                                    : " is")
              << " captured; replaying from global step " << global_step_ + 1;
  }
  StepStats s;
  s.learning_rate = schedule_->At(global_step_);
  graph_->Replay(batch, s.learning_rate, global_step_ + 1);
  if (batch != nullptr) input_state_ = batch->input_state;
  s.examples = o_.batch_size;
  ++global_step_;
  position_ = end;
  s.global_step = global_step_;
  const bool read =
      global_step_ % o_.log_every_n_steps == 0 || !o_.hooks.empty() || Done();
  if (read) {
    ReadGraphLosses(&s);
  } else {
    s.loss = s.cross_entropy = std::nan("");
    s.losses_read = false;
  }
  *stats = std::move(s);
  return true;
}

std::array<double, 5> Trainer::ReadGraph() {
  const std::array<double, 5> v = graph_->Read();
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
  if (graph_ == nullptr || !graph_->captured()) return;
  ReadGraph();
}

void Trainer::ReadGraphLosses(StepStats* stats) {
  const std::array<double, 5> v = ReadGraph();
  stats->loss = v[0];
  stats->cross_entropy = v[1];
  stats->regularization = v[2];
  stats->losses_read = true;
}

// ------------------------------------------------------------------ loop

bool Trainer::Done() const {
  return o_.max_number_of_steps > 0 && global_step_ >= o_.max_number_of_steps;
}

TrainResult Trainer::Run() {
  RunGenerator::Scope rng(*rng_);
  Restore();
  if (Done()) {
    LOG(INFO) << "global step " << global_step_
              << " already reached --max_number_of_steps="
              << o_.max_number_of_steps;
    TrainResult result;
    result.global_step = global_step_;
    result.last_loss = std::nan("");
    result.checkpoint = latest_.value_or("");
    return result;
  }
  Start();
  StepStats last;
  last.global_step = global_step_;
  last.loss = std::nan("");
  bool stopped = false;
  while (!Done() && !stopped) stopped = !RunStep(&last);
  return Finish(std::move(last), stopped);
}

TrainResult Trainer::Finish(StepStats last, bool stopped) {
  for (TrainHook* hook : hooks_) hook->LoopEnded(global_step_);
  if (!last.losses_read) ReadGraphLosses(&last);
  TrainResult result;
  result.global_step = last.global_step;
  result.last_loss = last.loss;
  result.stopped = stopped;
  try {
    // Not again when the saving hook (or the resumed checkpoint) has this
    // step already.
    result.checkpoint = latest_step_ == global_step_ ? *latest_ : Save();
    for (TrainHook* hook : hooks_) hook->End(last);
  } catch (const Error& e) {
    SLIM_FAIL(e.what(), Stopped());
  }
  const double total_secs = Seconds(start_time_, Clock::now());
  LOG(INFO) << "Finished training at global step " << global_step_ << " in "
            << total_secs << " s; " << input_secs_
            << " s of it waiting for input batches ("
            << 100.0 * input_secs_ / std::max(total_secs, 1e-9) << "%)";
  return result;
}

TrainResult Train(const TrainOptions& options) {
  return Trainer(options).Run();
}

}  // namespace slimtorch
