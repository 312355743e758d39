#pragma once
// The training loop of train_image_classifier (TF-Slim's main() +
// slim.learning.train) on one device. Its parts (src/train/trainer.cc):
// set-up, restore (resume or warm start), one step (forward, loss,
// backward, gradient exchange, update), the checkpoint, and hooks run after
// every step (logging, summaries, periodic saving, and any given in
// TrainOptions::hooks). Deployment plugs in through
// TrainOptions::gradient_exchange, a stop signal through
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

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/train/learning_rate.h"
#include "slimtorch/train/optimizer.h"
#include "slimtorch/train/profile.h"

namespace slimtorch {

// What one training step did, as the hooks see it.
struct StepStats {
  // After the step.
  int64_t global_step = 0;
  // Total loss: cross entropy (+ 0.4 x the auxiliary head's) + L2 terms.
  double loss = 0.0;
  double cross_entropy = 0.0;  // the main head's
  // The L2 terms; unset when the net has none.
  std::optional<double> regularization;
  double learning_rate = 0.0;
  // Examples of the step on this replica.
  int64_t examples = 0;
  // With replicas: each one's loss (cross entropy + 0.4 x aux), by replica;
  // `loss` is then their mean + the L2 terms, as model_deploy's total_loss.
  std::vector<double> replica_losses;
  // On summary steps only (StepStats::summarize): the net's end points of
  // the step (this replica's), for activation histograms.
  std::vector<std::pair<std::string, torch::Tensor>> end_points;
  // --precision=fp16: the gradients were not finite at the loss scale, so
  // the step changed no variable (the global step still counts it).
  bool skipped = false;
  // --cuda_graph steps read the losses only on logging steps (and the
  // last); on others loss, cross_entropy and regularization are NaN / unset.
  bool losses_read = true;
};

// Work run after every step, in order (the trainer's own logging, summary
// and saving hooks first), and once more when training ends.
class TrainHook {
 public:
  virtual ~TrainHook() = default;
  virtual void AfterStep(const StepStats& step) = 0;
  // After the final checkpoint; `last` is the last step run (global_step
  // only, when none ran).
  virtual void End(const StepStats& last) {}
};

// Combines the trainable variables' gradients across replicas between the
// backward pass and the update (data-parallel deployment). Without one,
// training is one replica's.
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  // Once, before the first step, with the variables Exchange will get: an
  // exchange may hook into the backward pass to start combining gradients
  // while backward still runs.
  virtual void Attach(const NamedTensors& trainable) {}
  // After backward (and before the L2 terms' gradients, which are the same
  // on every replica, are added): `trainable` in a fixed order; every
  // .grad() is defined.
  virtual void Exchange(const NamedTensors& trainable) = 0;
  // Before backward: this replica's loss of the step (without the L2
  // terms; a scalar tensor on the device, not read here so that the device
  // need not synchronise), shared with the others by Exchange.
  virtual void ShareLoss(const torch::Tensor& loss) {}
  // After Exchange: every replica's ShareLoss value, by replica (empty when
  // the exchange does not share them).
  virtual std::vector<double> ReplicaLosses() const { return {}; }
  // Called by every replica before each step with its own stop request:
  // true when any replica asks to stop, so that all stop after the same
  // step. An exchange may answer from the requests it shared in an earlier
  // Exchange (every replica gets the same answer; a request then takes one
  // step longer to arrive).
  virtual bool AgreeOnStop(bool local) { return local; }
};

struct TrainOptions {
  // Checkpoints and event files (--train_dir).
  std::string train_dir = "/tmp/tfmodel/";
  std::string dataset_name = "imagenet";
  std::string dataset_split_name = "train";
  std::string dataset_dir;
  std::string model_name = "inception_v3";
  // The net's memory order: auto, channels_first or channels_last
  // (ResolveDataFormat).
  std::string data_format = "auto";
  // fp32, bf16 or fp16 (ParsePrecision): the forward pass autocast to it,
  // variables and losses float32; fp16 with dynamic loss scaling.
  std::string precision = "fp32";
  // "" = model_name.
  std::string preprocessing_name;
  // Per-clone batch size.
  int64_t batch_size = 32;
  // 0 = the net's default_image_size.
  int64_t train_image_size = 0;
  bool use_grayscale = false;
  int64_t labels_offset = 0;
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
  double save_summaries_secs = 600;
  double save_interval_secs = 600;
  int max_checkpoints_to_keep = 5;
  // "safetensors", or "tensorflow": V2 bundles with TF-Slim's names and
  // TensorFlow's layouts (model variables, optimizer slots, moving
  // averages, global_step, plus our resume state), which TensorFlow and
  // eval_image_classifier read and training resumes from.
  std::string checkpoint_format = "safetensors";

  int num_readers = 4;
  int num_preprocessing_threads = 4;
  // 0 = the whole split up to 100 000 examples, else 20 * batch_size.
  int64_t shuffle_buffer_size = 0;
  // Seeds initialisation, dropout, shuffling and augmentation.
  uint64_t seed = 0;
  // "auto", "in_memory" or "streaming" (see data/input.h).
  std::string input_mode = "auto";
  int64_t in_memory_max_bytes = int64_t{2048} << 20;
  // Inception preprocessing crops around the records' object boxes
  // (ImageNet's image/object/bbox/*) when they have any.
  bool use_bounding_boxes = true;
  // Where the in-memory path draws a GPU batch's augmentation parameters
  // (--augmentation_draws): "device" (hashed there from (seed, stream
  // position): no per-batch CPU work, and with --cuda_graph the making of
  // the batch is captured with the step), "host" (per-example generators on
  // the CPU, as on a CPU), or "auto": device with --cuda_graph, else host
  // (eagerly the ~100 small ops of the device draws cost more host time
  // than the CPU draws: 3.72 vs 3.21 ms a tutorial step on an H100).
  std::string augmentation_draws = "auto";

  // Exponential moving averages of the model variables, saved in
  // checkpoints (0 = none).
  double moving_average_decay = 0.0;

  // Warm start (only when train_dir has no checkpoint).
  std::string checkpoint_path;
  std::vector<std::string> checkpoint_exclude_scopes;
  bool ignore_missing_vars = false;
  // Only variables under these scopes are trained (empty = all).
  std::vector<std::string> trainable_scopes;

  // Where the net, its optimizer slots and moving averages live, and where
  // the in-memory input path augments batches (CPU or one CUDA device).
  // Variables are initialised on the CPU (so a seed gives the same initial
  // weights on every device) and then moved.
  torch::Device device = torch::kCPU;

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

// Runs training; throws slimtorch::Error on bad options, bad data or a
// non-finite loss (training stops before the update and the last good
// checkpoint stays the latest).
TrainResult Train(const TrainOptions& options);

}  // namespace slimtorch
