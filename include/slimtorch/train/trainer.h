#pragma once
// The training loop of train_image_classifier (TF-Slim's main() +
// slim.learning.train) on one device, as an object with phases in Caffe's
// Solver tradition (class Trainer below; src/train/trainer.cc): set-up,
// restore (resume or warm start), start, one step (forward, loss, backward,
// gradient exchange, update), the checkpoint, and the loop, with hooks
// before and after every step and at the end (train/train_hooks.h: the stop
// check, --profile_steps, logging, summaries, periodic saving, and any given
// in TrainOptions::hooks). With --cuda_graph the same step body is captured
// once and replayed (src/train/captured_step.h). Deployment plugs in
// through TrainOptions::gradient_exchange, a stop signal through
// TrainOptions::stop_requested; neither touches the step.
//
// Resume: when train_dir holds a checkpoint, training continues from it
// exactly: model variables, optimizer slots, global step, the CPU RNG state
// (dropout) and the input position are all restored, so that training 2N
// steps equals training N, stopping and training N more (on CPU, same
// flags, same thread counts). --checkpoint_path then is ignored, as in
// TF-Slim. On a CUDA device resume restores the same state, but dropout
// draws from the CUDA generator (not checkpointed) and cuDNN picks its own
// algorithms, so runs are not bit-exact there.
//
// Storage faults (docs/storage_faults.md): a checkpoint or event file that
// cannot be written stops training (Run throws naming the file, the step
// and the last good checkpoint, which the index still names); a latest
// checkpoint that cannot be read is refused naming it and the one before;
// when its files were removed, Restore resumes from the newest checkpoint
// the index lists that is still there.
//
// One trainer per train_dir: replica 0 holds train_dir's lock
// (core/dir_lock.h) from set-up until the Trainer is destroyed; a second
// trainer there is refused at set-up naming the holder. The other replicas
// of the job share replica 0's lock; evaluation and export read without it.

#include <torch/torch.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/core/dir_lock.h"
#include "slimtorch/core/named_tensor.h"
#include "slimtorch/data/input.h"
#include "slimtorch/data/pipeline.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/train/batch_mixing.h"
#include "slimtorch/train/gradient_exchange.h"
#include "slimtorch/train/learning_rate.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/optimizer.h"
#include "slimtorch/train/precision.h"
#include "slimtorch/train/profile.h"
#include "slimtorch/train/run_setup.h"
#include "slimtorch/train/train_hooks.h"

namespace slimtorch {

// Where the in-memory input path draws a GPU batch's augmentation
// parameters (--augmentation_draws): kDevice (hashed there from (seed,
// stream position): no per-batch CPU work, and with --cuda_graph the making
// of the batch is captured with the step), kHost (per-example generators on
// the CPU, as on a CPU), or kAuto: device with --cuda_graph, else host
// (eagerly the ~100 small ops of the device draws cost more host time than
// the CPU draws: 3.72 vs 3.21 ms a tutorial step on an H100).
enum class AugmentationDraws { kAuto, kHost, kDevice };
// "auto", "host" or "device"; throws naming the flag on any other value.
AugmentationDraws ParseAugmentationDraws(const std::string& flag);
// --checkpoint_format: "safetensors" or "tensorflow"; throws naming the flag
// on any other value.
CheckpointFormat ParseCheckpointFormat(const std::string& flag);

// The run's input, dataset, net and device (RunOptions, embedded: fields
// such as dataset_dir, split_name, batch_size, seed and device are set
// here directly; image_size is --train_image_size) and the training's own.
// InputOptions as training reads them: batch_size per replica;
// shuffle_buffer_size 0 = the whole split up to 100 000 examples, else 20 *
// batch_size; the seed also seeds initialisation and dropout; the device
// holds the net, its optimizer slots and moving averages (variables are
// initialised on the CPU, so a seed gives the same initial weights on every
// device, and then moved). The trainer decides training, the shards, the
// start position and draw_augmentation_on_device itself.
struct TrainOptions : RunOptions {
  TrainOptions() { split_name = "train"; }

  // Checkpoints and event files (--train_dir).
  std::string train_dir = "/tmp/tfmodel/";
  double weight_decay = 0.00004;
  double label_smoothing = 0.0;

  std::string optimizer = "rmsprop";
  OptimizerOptions optimizer_options;
  std::string learning_rate_decay_type = "exponential";
  // batch_size and num_samples_per_epoch are filled in by Train().
  LearningRateOptions learning_rate;

  // Stop once global_step reaches this; <= 0 trains forever.
  int64_t max_number_of_steps = 0;
  int64_t log_every_n_steps = 10;
  // --progress: a progress line on standard error (train_hooks.h's
  // ProgressHook; replica 0).
  bool progress = false;
  double save_summaries_secs = 600;
  double save_interval_secs = 600;
  int max_checkpoints_to_keep = 5;
  // kSafetensors, or kTensorFlow: V2 bundles with TF-Slim's names and
  // TensorFlow's layouts (model variables, optimizer slots, moving
  // averages, global_step, plus our resume state), which TensorFlow and
  // eval_image_classifier read and training resumes from.
  CheckpointFormat checkpoint_format = CheckpointFormat::kSafetensors;

  // The in-memory path's augmentation draws on a GPU (AugmentationDraws).
  AugmentationDraws augmentation_draws = AugmentationDraws::kAuto;

  // Exponential moving averages of the model variables, saved in
  // checkpoints (0 = none), and how their decay starts
  // (--moving_average_warmup; train/moving_average.h).
  double moving_average_decay = 0.0;
  EmaWarmup moving_average_warmup = EmaWarmup::kTensorFlow;

  // Warm start (only when train_dir has no checkpoint).
  std::string checkpoint_path;
  std::vector<std::string> checkpoint_exclude_scopes;
  bool ignore_missing_vars = false;
  // Only variables under these scopes are trained (empty = all).
  std::vector<std::string> trainable_scopes;

  // --accumulate_gradients (ours): each update sums the gradients of this
  // many micro-batches of batch_size examples (one forward and backward at
  // a time), so that it sees accumulate_gradients x batch_size examples
  // per replica; the loss is their mean. The global step, the learning
  // rate (whose epochs count batches of accumulate_gradients x batch_size),
  // the gradient exchange, the L2 terms, clipping, the moving averages and
  // the summaries go once per update; batch norm normalizes and updates its
  // moving statistics per micro-batch, so only a net without batch norm
  // (and dropout) trains exactly as with one batch that many times larger.
  int accumulate_gradients = 1;

  // --sync_batch_norm (ours; PyTorch's SyncBatchNorm): with replicas, batch
  // norm trains on the statistics of the global batch (every replica's
  // slice together) through the gradient exchange
  // (GradientExchange::SumAcrossReplicas; nets::SetCrossReplicaBatchNorm),
  // as one replica would on the whole batch. Nothing changes with one.
  bool sync_batch_norm = false;

  // --mixup_alpha, --cutmix_alpha, --mix_prob, --mix_switch_prob
  // (train/batch_mixing.h; label_smoothing is folded into the soft targets
  // by the trainer). Off by default.
  MixOptions mix;

  // slim.learning's clip_gradient_norm: > 0 clips each variable's gradient
  // (after the gradient exchange) by this L2 norm (ClipGradientNorms).
  double clip_gradient_norm = 0.0;

  // --cuda_graph: on a CUDA device, after a few eager steps the whole step
  // (forward, loss, backward, L2 terms, clipping, the optimizer's update and
  // the moving averages) is captured once as a CUDA graph and replayed every
  // step: no host synchronisation per step; the loss is read on logging
  // steps (and the last), and a non-finite loss is still caught at the step
  // it happened (the first one is kept on the device and reported at the
  // next read or save, before anything is written). Needs
  // any --optimizer but ftrl, --precision=fp32|bf16 and one
  // replica; steps that write summaries run eagerly. A step that cannot be
  // captured is reported and training goes on eagerly.
  bool cuda_graph = false;

  // --profile_steps: LibTorch's profiler over these global steps (see
  // train/profile.h); the trace goes to train_dir/profile/ and a table of
  // where the steps' device (or CPU) time went to the log. Empty = none.
  StepRange profile_steps;

  // Data-parallel replicas (deploy/): this process's index and their
  // number, as model_deploy's clones. Each replica trains on its slice
  // [replica * B, (replica + 1) * B) of every global batch of
  // num_replicas x batch_size examples (its input decodes only that
  // slice; InputOptions::shard_size), so the example stream (and a
  // checkpoint's input position) does not depend on the number of
  // replicas. Only replica 0 writes checkpoints, summaries and the step log;
  // every replica resumes from train_dir's latest checkpoint. Replicas
  // other than 0 draw dropout from a generator reseeded every step from
  // (seed, replica, global step), so that resume stays exact.
  int replica = 0;
  int num_replicas = 1;

  // Checked before every step: once true, training stops after the step in
  // progress, writes its checkpoint and returns with TrainResult::stopped
  // (train_image_classifier sets it on SIGINT / SIGTERM).
  const std::atomic<bool>* stop_requested = nullptr;
  // Between backward and update; nullptr = one replica. Not owned.
  GradientExchange* gradient_exchange = nullptr;
  // Run after the trainer's own hooks. Not owned.
  std::vector<TrainHook*> hooks;
};

struct TrainResult {
  int64_t global_step = 0;
  // Total loss of the last step run (NaN when no step ran).
  double last_loss = 0.0;
  // The checkpoint written at the end.
  std::string checkpoint;
  // Training ended on TrainOptions::stop_requested, before
  // max_number_of_steps.
  bool stopped = false;
};

class CapturedStep;
class DeviceUpdate;
class ExponentialMovingAverage;
class Net;
struct NetOutput;

// One training run. Train() is Trainer(options).Run(); the phases are
// public so that tests (and other loops) can drive them one by one:
//   Trainer t(options);  t.Restore();  t.Start();
//   while (...) t.RunStep(&stats);   (or t.Step(batch) on batches of one's own)
//   t.Save();
// Not thread-safe. `options` must outlive the trainer.
class Trainer {
 public:
  // Set-up: checks the options, resolves the dataset, builds the learning
  // rate schedule, the net (seeded, on the device), the trainable variables
  // and the optimizer, and the checkpoint manager. Throws slimtorch::Error
  // on bad options or data.
  explicit Trainer(const TrainOptions& options);
  ~Trainer();

  // Resume from train_dir's latest checkpoint (everything, exactly), or
  // warm start from --checkpoint_path; then the moving averages.
  void Restore();
  // Before the first step (after Restore): the update on the device (CUDA),
  // the captured step (--cuda_graph), the input and the hooks (the
  // trainer's own, then TrainOptions::hooks); logs the start line.
  void Start();
  // One step of the loop (after Start): the hooks before it, a batch of the
  // input, the step (eager or a graph replay), the hooks after it; its
  // stats in *stats. False, running nothing, when a hook stops training.
  bool RunStep(StepStats* stats);
  // One eager step on `batch` (this replica's slice): forward, loss,
  // backward, the L2 terms, gradient exchange, the update, the moving
  // averages; no hook runs. Throws before the update on a non-finite loss.
  // `summarize`: keep the step's end points in the stats.
  StepStats Step(const Batch& batch, bool summarize = false);
  // The same on the micro-batches of one update (accumulate_gradients of
  // them, in stream order).
  StepStats Step(const std::vector<Batch>& micro_batches,
                 bool summarize = false);
  // Writes the checkpoint of the current state (refuses non-finite
  // variables) and returns its path (replicas other than 0 write nothing
  // and return the latest one's).
  std::string Save();
  // Restore, Start, RunStep until max_number_of_steps or a stop, then the
  // final checkpoint and the hooks' End.
  TrainResult Run();

  // Whether global_step has reached max_number_of_steps.
  bool Done() const;
  int64_t global_step() const { return global_step_; }
  Net& net() { return *net_; }
  const NamedTensors& trainable_variables() const { return trainable_; }
  // The input as the trainer reads it (the image size resolved; after
  // Restore, its start position).
  const InputOptions& input_options() const { return input_; }
  const DatasetSpec& dataset() const { return spec_; }

 private:
  using Clock = std::chrono::steady_clock;

  // Set-up's parts.
  void CheckOptions() const;
  void ResolveData();
  void BuildInputOptions();
  void BuildNet();
  void SyncBatchNorm();
  void SelectTrainable();
  // Restore's parts.
  std::optional<std::string> ResumableCheckpoint() const;
  CheckpointData ReadCheckpoint(const std::string& path) const;
  std::string ResumeFromEarlier(const std::string& path) const;
  void Resume(const std::string& path);
  void WarmStart();
  // The variables --moving_average_decay averages: the model variables but
  // the quantization ranges.
  NamedTensors AveragedVariables() const;
  void ReadResumeState(const CheckpointData& ckpt, const std::string& path);
  // Start's parts.
  void InstallHooks();
  void LogStart() const;
  // The start line's words for the recipe flags of issue 34 (accumulation,
  // mixing, augmentation), or "".
  std::string RecipeExtras() const;
  // The hooks before a step; false when one stops training.
  bool BeforeStep(StepPlan* plan);
  // The step's batch and the step itself, eager or replayed.
  StepStats NextStep(bool summarize, bool graph);
  // An eager step on the input's next accumulate_gradients batches.
  StepStats NextAccumulatedStep(bool summarize);

  // Micro-batch k of a step (k < accumulate_gradients): its images and
  // labels, on the device.
  using MicroBatchFn =
      std::function<std::pair<torch::Tensor, torch::Tensor>(int k)>;
  // An eager step on the micro-batches `micro` hands out; `last` (the
  // final micro-batch) gives the step's stream position.
  StepStats EagerStep(const MicroBatchFn& micro, int count, bool summarize,
                      const std::function<const Batch&()>& last);
  // The step body, shared by the eager step and the captured step of
  // --cuda_graph (`stats` null: inside the capture, where nothing is read
  // on the host and there is no gradient exchange): forward, loss and
  // backward of each of `count` micro-batches, the L2 terms, the losses
  // (read and checked, or recorded on the device), clipping, update,
  // moving averages. Returns whether the update was applied (fp16 skips
  // steps with non-finite gradients).
  bool StepBody(const MicroBatchFn& micro, int count, bool summarize,
                StepStats* stats);
  // The forward pass (under --precision's autocast) and the float32 losses:
  // returns the total (cross entropy + 0.4 x the auxiliary head's), the
  // net's output in *out and the main cross entropy in *ce.
  torch::Tensor ForwardLoss(const torch::Tensor& images,
                            const torch::Tensor& labels, NetOutput* out,
                            torch::Tensor* ce);
  // Backward of a micro-batch's share of the loss (fp16: loss-scaled); on
  // the last (`step_loss`: the step's mean loss, shared with the other
  // replicas) the gradient exchange and whether the gradients are finite
  // (fp16), so that the update applies.
  bool Backward(const torch::Tensor& share, const torch::Tensor& step_loss,
                bool last, StepStats* stats);
  // Eager: the step's losses read into `stats`; throws if not finite.
  void ReadLosses(const torch::Tensor& total, const torch::Tensor& ce,
                  const torch::Tensor& reg, StepStats* stats);
  // Clipping, the optimizer's update and the moving averages.
  void ApplyUpdate(double learning_rate);
  // Checks an eager step's micro-batch k and reseeds this replica's
  // dropout.
  void PrepareReplicaStep(const Batch& batch, int k);
  // Micro-batch k of an eager step as the forward pass takes it: checked,
  // this replica's dropout reseeded, mixed (--mixup_alpha, --cutmix_alpha:
  // the labels become soft targets).
  std::pair<torch::Tensor, torch::Tensor> MicroBatchInputs(const Batch& batch,
                                                           int k);

  // --cuda_graph: the step as a graph replay, capturing it first if needed,
  // on the batch `source` made (AdvanceCapturedBatch done) or on `batch`,
  // the other null; `end`: the stream position after the batch. False when
  // the capture failed: the step is then to be run eagerly.
  bool GraphStep(BatchSource* source, const Batch* batch, int64_t end,
                 StepStats* stats);
  // Reads the graph's losses into `stats`; throws if a step's loss was
  // not finite.
  void ReadGraphLosses(StepStats* stats);
  // Throws if a captured step's loss was not finite.
  void CheckGraphFinite();
  // The captured step's readout; throws (as CheckGraphFinite) when a loss
  // was not finite.
  std::array<double, 5> ReadGraph();

  CheckpointData CheckpointOf();
  std::string LastGoodCheckpoint() const;
  // The end of the message of an error that stops training (a checkpoint
  // or event file that cannot be written): the step, the last good
  // checkpoint and that the same command resumes from it.
  std::string Stopped() const;
  // The final checkpoint, the hooks' End and the closing log line.
  TrainResult Finish(StepStats last, bool stopped);

  const TrainOptions& o_;
  DatasetSpec spec_;
  int64_t num_samples_ = 0;
  int64_t num_classes_ = 0;  // the net's (after --labels_offset)
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
  std::shared_ptr<DirLock> train_dir_lock_;  // replica 0's
  std::unique_ptr<CheckpointManager> manager_;
  std::unique_ptr<ExponentialMovingAverage> averages_;
  // On a CUDA device with any optimizer but ftrl: the multi-tensor update.
  std::unique_ptr<DeviceUpdate> device_update_;
  // --cuda_graph's step strategy (null: every step eager).
  std::unique_ptr<CapturedStep> graph_;
  std::unique_ptr<BatchSource> pipeline_;
  // The trainer's own hooks, and all hooks in the order they run.
  std::vector<std::unique_ptr<TrainHook>> own_hooks_;
  std::vector<TrainHook*> hooks_;

  // Training state: what a checkpoint holds beside the variables.
  int64_t global_step_ = 0;
  int64_t position_ = 0;  // examples of the input stream consumed
  // The reader state at position_ (the checkpoint's input state).
  std::shared_ptr<const std::string> input_state_;
  std::optional<std::string> latest_;
  // The global step latest_ holds (-1: none).
  int64_t latest_step_ = -1;
  // The loop's timing: its start and the time spent getting batches.
  Clock::time_point start_time_;
  double input_secs_ = 0;
};

// Runs training; throws slimtorch::Error on bad options, bad data or a
// non-finite loss (training stops before the update and the last good
// checkpoint stays the latest).
TrainResult Train(const TrainOptions& options);

}  // namespace slimtorch
