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
// exactly: model variables, optimizer slots, global step, the run's CPU
// generator (dropout) and the input position are all restored, so that training
// 2N steps equals training N, stopping and training N more (on CPU, same flags,
// same thread counts). --checkpoint_path then is ignored, as in TF-Slim. On a
// CUDA device resume restores the same state, but dropout draws from the CUDA
// generator (not checkpointed) and cuDNN picks its own algorithms, so runs are
// not bit-exact there.
//
// Randomness: a run draws from its own CPU generator (seeded with
// TrainOptions::seed; src/train/train_state.h), in LibTorch's default
// generator's place during each public phase, so the caller's draws and the
// run's do not mix. CUDA generators stay the process's.
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
#include "slimtorch/train/train_options.h"

namespace slimtorch {

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

class Augmentation;
class CapturedStep;
class DeviceUpdate;
class ExponentialMovingAverage;
class Net;
struct NetOutput;
class RunGenerator;

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
  void ResolveData();
  void BuildInputOptions();
  void BuildNet();
  void SyncBatchNorm();
  void SelectTrainable();
  // Restore's parts.
  // Reads all of checkpoint `path`; a damaged file throws naming it and how
  // to resume from the one before.
  CheckpointData ReadCheckpoint(const std::string& path) const;
  void Resume(const std::string& path);
  void WarmStart();
  // The variables --moving_average_decay averages: the model variables but
  // the quantization ranges.
  NamedTensors AveragedVariables() const;
  // The global step, the run's generator and the input's position and
  // reader state.
  void ReadResumeState(const CheckpointData& ckpt, const std::string& path);
  // Start's parts.
  void InstallHooks();
  void LogStart() const;
  // The start line's words for the recipe flags (accumulation, mixing,
  // augmentation), or "".
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
  // The run's CPU generator: every public phase draws from it (net
  // initialisation, dropout, drop path), not from the caller's sequence.
  std::unique_ptr<RunGenerator> rng_;
  // --auto_augment, --random_erase (null: neither).
  std::shared_ptr<const Augmentation> augmentation_;
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
  // Replica 0's summary event file, which the hooks share
  // (HookContext::summaries); outlives them.
  std::unique_ptr<EventWriter> summaries_;
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
  // RunStep's plan asked for the step's logits and labels.
  bool keep_outputs_ = false;
  // The loop's timing: its start and the time spent getting batches.
  Clock::time_point start_time_;
  double input_secs_ = 0;
};

// Runs training; throws slimtorch::Error on bad options, bad data or a
// non-finite loss (training stops before the update and the last good
// checkpoint stays the latest).
TrainResult Train(const TrainOptions& options);

}  // namespace slimtorch
