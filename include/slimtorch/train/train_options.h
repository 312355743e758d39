#pragma once
// What one training run is asked to do (TrainOptions: the flags of
// train_image_classifier as the library takes them) and the checks made on
// them before anything is built.

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/train/batch_mixing.h"
#include "slimtorch/train/gradient_exchange.h"
#include "slimtorch/train/learning_rate.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/optimizer.h"
#include "slimtorch/train/precision.h"
#include "slimtorch/train/run_setup.h"
#include "slimtorch/train/train_hooks.h"

namespace slimtorch {

// Where the in-memory input path draws a GPU batch's augmentation
// parameters (--augmentation_draws): kDevice (hashed there from (seed,
// stream position): no per-batch CPU work, and with --cuda_graph the making
// of the batch is captured with the step), kHost (per-example generators on
// the CPU, as on a CPU), or kAuto: device with --cuda_graph, else host
// (eagerly the ~100 small ops of the device draws cost more host time than
// the CPU draws).
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
  // The optimizer's hyper-parameters by flag name (OptimizerParameters);
  // absent ones take the optimizer's defaults.
  OptimizerParameters optimizer_parameters;
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
  // --summarize_train_metrics (ours): these metrics of each summary step's
  // batch as train/<name> (train_hooks.h's MetricHook; replica 0); empty:
  // none.
  std::vector<MetricFactory> train_metrics;
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

// Throws naming the flag on options that contradict each other or are out
// of range, and on combinations that are not supported yet (--cuda_graph's
// among them). The augmentation flags are checked where the trainer builds
// its Augmentation.
void CheckTrainOptions(const TrainOptions& options);

// Refuses data a classifier cannot learn from (its loss would stay
// constant): a split of `num_samples` = 0 examples, or fewer than 2 classes
// after --labels_offset; names the dataset description or labels file.
void CheckTrainableData(const DatasetSpec& spec, const TrainOptions& options,
                        int64_t num_samples);

}  // namespace slimtorch
