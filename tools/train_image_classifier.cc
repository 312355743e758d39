// train_image_classifier: TF-Slim's train_image_classifier.py in C++.
// Every upstream flag is declared with its name and default; features not
// built yet fail with "--X is not supported yet" when set.

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "run_flags.h"
#include "slimtorch/core/dir_lock.h"
#include "slimtorch/core/error.h"
#include "slimtorch/data/input.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/deploy/all_reduce.h"
#include "slimtorch/deploy/cluster.h"
#include "slimtorch/deploy/launcher.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/learning_rate.h"
#include "slimtorch/train/trainer.h"
#include "slimtorch/train/variables.h"
#include "tool_common.h"

// General / deployment.
DEFINE_string(train_dir, "/tmp/tfmodel/",
              "Directory where checkpoints and event logs are written to.");
DEFINE_int32(num_clones, 1, "Number of model clones to deploy.");
DEFINE_bool(sync_batch_norm, false,
            "With several clones or replicas: batch norm trains on the "
            "statistics of the whole global batch, every replica's slice "
            "together, as one replica would (ours; PyTorch's SyncBatchNorm).");
DEFINE_int32(worker_replicas, 1, "Number of worker replicas.");
DEFINE_int32(num_ps_tasks, 0,
             "The number of parameter servers. If the value is 0, then the "
             "parameters are handled locally by the worker.");
DEFINE_int32(num_readers, 4,
             "The number of parallel readers that read data from the dataset.");
DEFINE_int32(log_every_n_steps, 10, "The frequency with which logs are print.");
DEFINE_string(progress, "auto",
              "A progress line (step, examples/s, ETA) rewritten in place: "
              "auto (when standard error is a terminal), on or off (ours).");
DEFINE_int32(save_summaries_secs, 600,
             "The frequency with which summaries are saved, in seconds.");
DEFINE_bool(summarize_train_metrics, false,
            "Also summarize train/Accuracy and train/Recall_5 (5 classes or "
            "more) of each summary step's batch (ours).");
DEFINE_int32(save_interval_secs, 600,
             "The frequency with which the model is saved, in seconds.");
DEFINE_int32(task, 0, "Task id of the replica running the training.");
DEFINE_int32(collective_timeout_secs, 300,
             "Multi-process jobs (ours): a rendezvous or gradient all-reduce "
             "that waits this long for a missing process fails, naming it.");

// Optimization.
DEFINE_double(weight_decay, 0.00004, "The weight decay on the model weights.");
DEFINE_string(optimizer, "rmsprop", "The name of the optimizer.");
DEFINE_double(adadelta_rho, 0.95, "The decay rate for adadelta.");
DEFINE_double(adagrad_initial_accumulator_value, 0.1,
              "Starting value for the AdaGrad accumulators.");
DEFINE_double(adam_beta1, 0.9,
              "The exponential decay rate for the 1st moment estimates.");
DEFINE_double(adam_beta2, 0.999,
              "The exponential decay rate for the 2nd moment estimates.");
DEFINE_double(opt_epsilon, 1.0, "Epsilon term for the optimizer.");
DEFINE_double(ftrl_learning_rate_power, -0.5, "The learning rate power.");
DEFINE_double(ftrl_initial_accumulator_value, 0.1,
              "Starting value for the FTRL accumulators.");
DEFINE_double(ftrl_l1, 0.0, "The FTRL l1 regularization strength.");
DEFINE_double(ftrl_l2, 0.0, "The FTRL l2 regularization strength.");
DEFINE_double(momentum, 0.9,
              "The momentum for the MomentumOptimizer and RMSPropOptimizer.");
DEFINE_double(rmsprop_momentum, 0.9, "Momentum.");
DEFINE_double(rmsprop_decay, 0.9, "Decay term for RMSProp.");
DEFINE_int32(quantize_delay, -1,
             "Number of steps to start quantized training. Set to -1 would "
             "disable quantized training.");
DEFINE_bool(quantize_per_channel, false,
            "With --quantize_delay: quantize the weights per output channel "
            "rather than per tensor (TF-Slim's) (ours).");
DEFINE_int32(freeze_bn_delay, -1,
             "With --quantize_delay: from this step on, batch norm folds "
             "with its moving statistics and stops updating them "
             "(contrib.quantize's freeze_bn_delay); -1: never (ours).");

// Learning rate.
DEFINE_string(learning_rate_decay_type, "exponential",
              "Specifies how the learning rate is decayed. One of \"fixed\", "
              "\"exponential\", or \"polynomial\"; ours: \"cosine\" (to "
              "--end_learning_rate over --num_epochs_per_decay), \"step\" "
              "(x --learning_rate_decay_factor every --num_epochs_per_decay, "
              "as PyTorch's StepLR) or \"multistep\" "
              "(--learning_rate_boundaries).");
DEFINE_string(learning_rate_boundaries, "",
              "multistep: the epochs at which the learning rate changes, "
              "comma-separated and increasing (ours).");
DEFINE_string(learning_rate_values, "",
              "multistep: the learning rate from each boundary on, one per "
              "boundary (default: x --learning_rate_decay_factor at each) "
              "(ours).");
DEFINE_double(warmup_epochs, 0.0,
              "Epochs of linear warm-up from --warmup_learning_rate to "
              "--learning_rate, step by step, before the decay schedule "
              "starts (0 = none) (ours).");
DEFINE_double(warmup_learning_rate, 0.0,
              "The learning rate of the warm-up's first step (ours).");
DEFINE_double(learning_rate, 0.01, "Initial learning rate.");
DEFINE_double(end_learning_rate, 0.0001,
              "The minimal end learning rate used by a polynomial (or "
              "cosine) decay learning rate.");
DEFINE_double(label_smoothing, 0.0, "The amount of label smoothing.");
DEFINE_double(learning_rate_decay_factor, 0.94, "Learning rate decay factor.");
DEFINE_double(num_epochs_per_decay, 2.0,
              "Number of epochs after which learning rate decays. Note: this "
              "flag counts epochs per clone but aggregates per sync replicas.");
DEFINE_bool(sync_replicas, false,
            "Whether or not to synchronize the replicas during training.");
DEFINE_int32(replicas_to_aggregate, 1,
             "The Number of gradients to collect before updating params.");
DEFINE_double(moving_average_decay, 0.0,
              "The decay to use for the moving average. 0 (TF-Slim's None): "
              "no moving average.");
DEFINE_string(auto_augment, "",
              "A per-image augmentation policy of torchvision's, after the "
              "preprocessing's crop and flip: rand-m<M>-n<N> (RandAugment), "
              "trivialaugment_wide, autoaugment_imagenet, autoaugment_cifar10 "
              "or autoaugment_svhn (\"\" = none) (ours).");
DEFINE_double(random_erase, 0.0,
              "Probability of erasing a random box of each training image "
              "(torchvision's RandomErasing, value 0) (ours).");
DEFINE_int32(repeated_augmentation, 1,
             "Repeated augmentation: each training example is shown this many "
             "times in a row (a replica's slice apart across replicas), every "
             "copy augmented on its own; epochs still count examples shown "
             "(1 = off) (ours; DeiT's and timm's RepeatAugSampler, "
             "torchvision's RASampler).");
DEFINE_double(mixup_alpha, 0.0,
              "Mixup: each batch mixed with itself reversed by lam ~ "
              "Beta(alpha, alpha), the labels likewise (0 = off) (ours; "
              "timm's Mixup).");
DEFINE_double(cutmix_alpha, 0.0,
              "CutMix: a box of each image replaced by the reversed batch's, "
              "lam ~ Beta(alpha, alpha) (0 = off) (ours; timm's Mixup).");
DEFINE_double(mix_prob, 1.0,
              "The probability that a batch is mixed at all (ours).");
DEFINE_double(mix_switch_prob, 0.5,
              "With both --mixup_alpha and --cutmix_alpha: the probability "
              "of CutMix rather than Mixup for a batch (ours).");
DEFINE_int32(accumulate_gradients, 1,
             "Sum the gradients of this many batches of --batch_size before "
             "each update: one step, of that many times the examples (ours).");
DEFINE_string(moving_average_warmup, "tf",
              "How the moving averages' decay starts: tf (min(decay, (1 + "
              "step) / (10 + step)), TF-Slim's), none (the decay from the "
              "first step) or timm (a copy at step 1, then min(decay, 1 - "
              "step^(-2/3)), timm's EMA warm-up) (ours).");
DEFINE_double(clip_gradient_norm, 0.0,
              "slim.learning's clip_gradient_norm: > 0 clips every "
              "variable's gradient by this L2 norm (tf.clip_by_norm); 0: "
              "no clipping (ours: TF-Slim's script does not expose it).");

// Dataset.
DEFINE_string(augmentation_draws, "auto",
              "The in-memory input path on a GPU (cifarnet preprocessings): "
              "device: draw the augmentation parameters there, hashed from "
              "(seed, example position); host: per example on the CPU; auto: "
              "device with --cuda_graph (the batch is then made inside the "
              "captured step), else host (ours).");
DEFINE_bool(cuda_graph, false,
            "On a CUDA GPU: capture the whole training step (forward, loss, "
            "backward, update, moving averages) once as a CUDA graph and "
            "replay it every step, without a host synchronisation per step "
            "(the loss is read on logging steps). Any optimizer but ftrl; "
            "fp32 or bf16; one replica (ours).");
DEFINE_string(profile_steps, "",
              "Profile these global steps with LibTorch's profiler (Kineto), "
              "as Keras' profile_batch: N or A,B. Writes a Chrome / Perfetto "
              "trace to <train_dir>/profile/ and logs where the steps' GPU "
              "time went, kernel by kernel (CPU ops alone with a LibTorch "
              "built without Kineto, as Debian's 1.13) (ours).");
DEFINE_int32(train_image_size, 0,
             "Train image size (0: the network's default_image_size).");
DEFINE_int64(max_number_of_steps, 0,
             "The maximum number of training steps (0: train forever, "
             "TF-Slim's None).");

// Fine-tuning.
DEFINE_string(checkpoint_path, "",
              "The path to a checkpoint from which to fine-tune.");
DEFINE_string(checkpoint_exclude_scopes, "",
              "Comma-separated list of scopes of variables to exclude when "
              "restoring from a checkpoint.");
DEFINE_string(trainable_scopes, "",
              "Comma-separated list of scopes to filter the set of variables "
              "to train. By default, empty means all variables are trained.");
DEFINE_bool(ignore_missing_vars, false,
            "When restoring a checkpoint would ignore missing variables.");

// slimtorch's own.
DEFINE_uint64(seed, 0,
              "Seed of initialisation, dropout, shuffling and augmentation. "
              "Runs with the same seed and thread counts repeat exactly on "
              "CPU.");
DEFINE_int64(shuffle_buffer_size, 0,
             "Records in the shuffle buffer (0: the whole split when it has "
             "at most 100000 examples, else 20 * batch_size, TF-Slim's queue "
             "capacity; photo datasets: at most max(4096, 20 * batch_size)).");
DEFINE_bool(use_bounding_boxes, true,
            "Inception preprocessing samples its training crop around the "
            "object boxes of records that have them (ImageNet's "
            "image/object/bbox/*; TF-Slim's train_image_classifier passes "
            "none, its Inception scripts do) (ours).");
DEFINE_bool(model_summary, false,
            "Print the net's end points (output shape, parameters and "
            "multiply-adds per image at --train_image_size, for "
            "--dataset_name's classes) and exit without training (ours).");
DEFINE_int32(max_checkpoints_to_keep, 5,
             "How many recent checkpoints to keep in --train_dir.");
DEFINE_string(checkpoint_format, "safetensors",
              "safetensors, or tensorflow: TensorFlow V2 checkpoints "
              "(model.ckpt-N.index + .data-00000-of-00001) with TF-Slim's "
              "names and layouts, readable by TensorFlow (ours).");

namespace {

// --optimizer and every flag some registered optimizer reads.
std::vector<const char*> OptimizerFlagNames() {
  static const std::vector<std::string> names =
      slimtorch::OptimizerParameterFlags();
  std::vector<const char*> flags = {"optimizer"};
  for (const std::string& name : names) flags.push_back(name.c_str());
  return flags;
}

// The optimizers that read `flag`, as "adam, rmsprop".
std::string OptimizerReaders(const std::string& flag) {
  std::string readers;
  for (const std::string& name : slimtorch::OptimizersReading(flag)) {
    readers += (readers.empty() ? "" : ", ") + name;
  }
  return readers;
}

// The optimizer names for --optimizer; which optimizers read each other
// flag.
std::string OptimizerFlagNote(const std::string& flag) {
  if (flag == "optimizer") {
    return "One of: " + slimtorch::GetOptimizerRegistry().JoinedNames() + ".";
  }
  return "Read by --optimizer=" + OptimizerReaders(flag) + ".";
}

}  // namespace

// --help's groups of the flags above (tools/tool_common.h), each flag in
// one; built after the registries are filled.
slimtorch::tools::FlagGroups FlagGroups() {
  return {
      {"Data",
       {"dataset_name", "dataset_split_name", "dataset_dir", "labels_offset",
        "preprocessing_name", "train_image_size", "use_grayscale"}},
      {"Input pipeline",
       {"input_mode", "in_memory_max_mb", "shuffle_buffer_size", "num_readers",
        "num_preprocessing_threads", "use_bounding_boxes",
        "augmentation_draws"}},
      {"Model", {"model_name", "model_summary"}},
      {"Training",
       {"batch_size", "accumulate_gradients", "max_number_of_steps",
        "weight_decay", "label_smoothing", "moving_average_decay",
        "moving_average_warmup", "clip_gradient_norm", "seed"}},
      {"Augmentation and batch mixing (ours)",
       {"auto_augment", "random_erase", "repeated_augmentation", "mixup_alpha",
        "cutmix_alpha", "mix_prob", "mix_switch_prob"}},
      {"8-bit (quantization-aware training)",
       {"quantize_delay", "quantize_per_channel", "freeze_bn_delay"}},
      {"Optimizer", OptimizerFlagNames(), OptimizerFlagNote},
      {"Learning rate",
       {"learning_rate", "learning_rate_decay_type",
        "learning_rate_decay_factor", "num_epochs_per_decay",
        "end_learning_rate", "learning_rate_boundaries", "learning_rate_values",
        "warmup_epochs", "warmup_learning_rate"}},
      {"Checkpoints and fine-tuning",
       {"train_dir", "save_interval_secs", "max_checkpoints_to_keep",
        "checkpoint_format", "checkpoint_path", "checkpoint_exclude_scopes",
        "trainable_scopes", "ignore_missing_vars"}},
      {"Logging and summaries",
       {"log_every_n_steps", "progress", "save_summaries_secs",
        "summarize_train_metrics", "profile_steps"}},
      {"Devices and speed",
       {"num_clones", "clone_on_cpu", "sync_batch_norm", "precision",
        "data_format", "cuda_graph", "tf32", "num_intra_op_threads"}},
      {"Distributed training",
       {"worker_replicas", "task", "sync_replicas", "replicas_to_aggregate",
        "num_ps_tasks", "collective_timeout_secs", "master"}},
  };
}

namespace {

// --model_summary: the net as training would build it, summarized.
void PrintModelSummary() {
  const slimtorch::DatasetSpec spec =
      slimtorch::ResolveDatasetSpec(FLAGS_dataset_name, FLAGS_dataset_dir);
  auto net = slimtorch::CreateNet(
      FLAGS_model_name,
      slimtorch::NetOptions()
          .num_classes(slimtorch::NumNetClasses(spec, FLAGS_labels_offset))
          .input_channels(slimtorch::PreprocessedChannels(
              spec.image_channels,
              slimtorch::PreprocessingOptions{0, 0, false,
                                              FLAGS_use_grayscale}))
          .image_size(std::max(FLAGS_train_image_size, 0)));
  const int64_t size = FLAGS_train_image_size > 0 ? FLAGS_train_image_size
                                                  : net->default_image_size();
  std::cout << slimtorch::SummarizeNet(*net, size).ToString() << std::flush;
}

}  // namespace

namespace {

// The data-parallel set-up of this process: with --num_clones=N (one
// machine) the launcher runs N clones of the command and returns its exit
// status (`*launched`); in a clone, or under torchrun / SLURM /
// --worker_replicas, the process joins the group and trains its replica.
struct Deployment {
  slimtorch::ClusterSpec cluster;
  // Where this process trains: the CPU, or with replicas on GPUs the GPU of
  // its local rank.
  torch::Device device = torch::kCPU;
  std::unique_ptr<slimtorch::AllReduceGradients> exchange;
  // The chief's (replica 0's, or its launcher's) lock on --train_dir, taken
  // before the rendezvous so that a second job is refused at once.
  std::shared_ptr<slimtorch::DirLock> train_dir_lock;
};

// GPU replicas: one GPU per process of this machine, over NCCL.
void CheckGpuReplicas(int local_processes) {
  SLIM_CHECK(slimtorch::HaveNccl(),
             "replicas on GPUs need c10d's NCCL process group, and this "
             "slimtorch was built without it (a LibTorch without CUDA "
             "distributed support, or no nccl.h): add --clone_on_cpu to train "
             "the replicas on CPUs over Gloo");
  const int gpus = static_cast<int>(torch::cuda::device_count());
  SLIM_CHECK(local_processes <= gpus, local_processes,
             " replicas on this machine need as many GPUs; it has ", gpus,
             " (or add --clone_on_cpu)");
}

// A replica's device and threads on its machine: on GPUs, one per process
// of this machine (LOCAL_RANK's, or the only one this process sees: a
// launcher that binds a GPU to each task, as srun --gpus-per-task=1 does,
// shows each task just its own); the cores shared by the machine's
// processes unless --num_intra_op_threads says otherwise.
void PlaceReplica(Deployment* d) {
  if (d->device.is_cuda()) {
    const bool own_gpu = torch::cuda::device_count() == 1;
    CheckGpuReplicas(own_gpu ? 1 : d->cluster.local_rank + 1);
    d->device =
        torch::Device(torch::kCUDA, own_gpu ? 0 : d->cluster.local_rank);
  }
  if (FLAGS_num_intra_op_threads == 0) {
    const int local = slimtorch::IsLaunchedClone() ? FLAGS_num_clones
                      : d->cluster.local_world_size > 0
                          ? d->cluster.local_world_size
                          : 1;
    slimtorch::tools::SetThreads(std::max<int>(
        1, static_cast<int>(std::thread::hardware_concurrency()) / local));
  }
}

Deployment Deploy(char** original_argv, bool* launched) {
  *launched = false;
  Deployment d;
  SLIM_CHECK(FLAGS_num_ps_tasks == 0, "--num_ps_tasks=", FLAGS_num_ps_tasks,
             " is not supported: slimtorch has no parameter servers; its "
             "replicas average gradients with c10d all-reduce (--num_clones "
             "on one machine, torchrun / srun / --worker_replicas across "
             "machines)");
  SLIM_CHECK(FLAGS_num_clones >= 1, "--num_clones must be >= 1, got ",
             FLAGS_num_clones);
  // A clone's place comes from its launcher, which took --worker_replicas
  // and --task into account.
  const bool clone = slimtorch::IsLaunchedClone();
  d.cluster = slimtorch::ResolveCluster(
      clone ? slimtorch::ClusterFlags()
            : slimtorch::ClusterFlags{FLAGS_worker_replicas, FLAGS_task},
      slimtorch::ProcessEnvironment());
  d.device = slimtorch::tools::PickDevice(FLAGS_clone_on_cpu);
  if (d.cluster.rank == 0) {
    d.train_dir_lock =
        slimtorch::DirLock::Acquire(FLAGS_train_dir, "--train_dir");
  }
  if (FLAGS_num_clones > 1 && !clone) {
    // model_deploy's clones on each of --worker_replicas machines.
    SLIM_CHECK(d.cluster.world_size == 1 || d.cluster.source == "flags",
               "--num_clones=", FLAGS_num_clones, " inside a ",
               d.cluster.source, " job of ", d.cluster.world_size,
               " processes is not supported yet: start one process per "
               "clone (torchrun --nproc_per_node, srun --ntasks-per-node)");
    if (d.device.is_cuda()) CheckGpuReplicas(FLAGS_num_clones);
    *launched = true;
    // Clone 0 adopts the launcher's lock (the others share it).
    if (d.train_dir_lock) d.train_dir_lock->ShareWithChildren();
    slimtorch::RunClones(FLAGS_num_clones, original_argv,
                         std::chrono::seconds(30), d.cluster);
    return d;
  }
  if (clone) {
    SLIM_CHECK(d.cluster.world_size == FLAGS_num_clones * FLAGS_worker_replicas,
               "clone environment of ", d.cluster.world_size,
               " processes for --num_clones=", FLAGS_num_clones,
               " x --worker_replicas=", FLAGS_worker_replicas);
  }
  if (d.cluster.world_size > 1) {
    PlaceReplica(&d);
    d.exchange = std::make_unique<slimtorch::AllReduceGradients>(
        slimtorch::ProcessGroup::Connect(
            d.cluster, std::chrono::seconds(FLAGS_collective_timeout_secs),
            d.device));
    LOG(INFO) << "replica " << d.cluster.rank << " of " << d.cluster.world_size
              << " (" << d.cluster.source << "), rendezvous at "
              << d.cluster.master_addr << ":" << d.cluster.master_port
              << ", on " << d.device
              << (d.device.is_cuda() ? " over NCCL" : " over Gloo");
  }
  return d;
}

}  // namespace

namespace {

// The dataset, input, net and device flags (RunOptions), parsed.
void SetRunFlags(const Deployment& deployment, slimtorch::TrainOptions* o) {
  slimtorch::tools::SetRunOptionsFromFlags(slimtorch::tools::RunKind::kTrain,
                                           o);
  o->image_size = FLAGS_train_image_size;
  o->auto_augment = FLAGS_auto_augment;
  o->random_erase = FLAGS_random_erase;
  o->repeat.repeats = FLAGS_repeated_augmentation;
  o->num_readers = FLAGS_num_readers;
  o->use_bounding_boxes = FLAGS_use_bounding_boxes;
  o->shuffle_buffer_size = FLAGS_shuffle_buffer_size;
  o->seed = FLAGS_seed;
  o->device = deployment.device;
  if (FLAGS_quantize_delay >= 0) {
    o->quantize = slimtorch::nets::QuantizeOptions()
                      .quant_delay(FLAGS_quantize_delay)
                      .per_channel(FLAGS_quantize_per_channel)
                      .freeze_bn_delay(FLAGS_freeze_bn_delay);
  } else {
    SLIM_CHECK(!FLAGS_quantize_per_channel && FLAGS_freeze_bn_delay < 0,
               "--quantize_per_channel and --freeze_bn_delay apply to "
               "quantization-aware training: set --quantize_delay too");
  }
}

// Every optimizer's flags by name (each optimizer takes its own). A flag
// set for an optimizer that does not read it is warned of, as TF-Slim
// would silently pass it by.
slimtorch::OptimizerParameters OptimizerParametersFromFlags() {
  slimtorch::GetOptimizerRegistry().Get(FLAGS_optimizer);
  slimtorch::OptimizerParameters parameters;
  for (const std::string& flag : slimtorch::OptimizerParameterFlags()) {
    gflags::CommandLineFlagInfo info;
    SLIM_CHECK(gflags::GetCommandLineFlagInfo(flag.c_str(), &info) &&
                   info.type == "double",
               "an optimizer reads --", flag,
               ", which train_image_classifier does not define as a double");
    parameters[flag] = std::stod(info.current_value);
    const std::vector<std::string> readers = slimtorch::OptimizersReading(flag);
    if (!info.is_default && std::find(readers.begin(), readers.end(),
                                      FLAGS_optimizer) == readers.end()) {
      LOG(WARNING) << "--" << flag
                   << " is read by --optimizer=" << OptimizerReaders(flag)
                   << " only; --optimizer=" << FLAGS_optimizer << " ignores it";
    }
  }
  return parameters;
}

void SetOptimizerFlags(slimtorch::TrainOptions* o) {
  o->weight_decay = FLAGS_weight_decay;
  o->label_smoothing = FLAGS_label_smoothing;
  o->optimizer = FLAGS_optimizer;
  o->optimizer_parameters = OptimizerParametersFromFlags();
  o->learning_rate_decay_type = FLAGS_learning_rate_decay_type;
  auto& lr = o->learning_rate;
  lr.learning_rate = FLAGS_learning_rate;
  lr.end_learning_rate = FLAGS_end_learning_rate;
  lr.learning_rate_decay_factor = FLAGS_learning_rate_decay_factor;
  lr.num_epochs_per_decay = FLAGS_num_epochs_per_decay;
  lr.boundaries = slimtorch::ParseNumberList("learning_rate_boundaries",
                                             FLAGS_learning_rate_boundaries);
  lr.values = slimtorch::ParseNumberList("learning_rate_values",
                                         FLAGS_learning_rate_values);
  lr.warmup_epochs = FLAGS_warmup_epochs;
  lr.warmup_learning_rate = FLAGS_warmup_learning_rate;
  lr.sync_replicas = FLAGS_sync_replicas;
  lr.replicas_to_aggregate = FLAGS_replicas_to_aggregate;
  o->moving_average_decay = FLAGS_moving_average_decay;
  o->moving_average_warmup =
      slimtorch::ParseEmaWarmup(FLAGS_moving_average_warmup);
  o->clip_gradient_norm = FLAGS_clip_gradient_norm;
  o->accumulate_gradients = FLAGS_accumulate_gradients;
  o->sync_batch_norm = FLAGS_sync_batch_norm;
  o->mix.mixup_alpha = FLAGS_mixup_alpha;
  o->mix.cutmix_alpha = FLAGS_cutmix_alpha;
  o->mix.mix_prob = FLAGS_mix_prob;
  o->mix.switch_prob = FLAGS_mix_switch_prob;
}

// The training the flags ask for, as this process's replica of
// `deployment`; the flags' string values parsed (throws naming a bad one).
slimtorch::TrainOptions TrainOptionsFromFlags(const Deployment& deployment) {
  slimtorch::TrainOptions o;
  o.replica = deployment.cluster.rank;
  o.num_replicas = deployment.cluster.world_size;
  o.gradient_exchange = deployment.exchange.get();
  SetRunFlags(deployment, &o);
  SetOptimizerFlags(&o);
  o.train_dir = FLAGS_train_dir;
  o.cuda_graph = FLAGS_cuda_graph;
  o.augmentation_draws =
      slimtorch::ParseAugmentationDraws(FLAGS_augmentation_draws);
  o.profile_steps = slimtorch::ParseProfileSteps(FLAGS_profile_steps);
  o.max_number_of_steps = FLAGS_max_number_of_steps;
  o.log_every_n_steps = FLAGS_log_every_n_steps;
  o.progress = slimtorch::ProgressWanted(FLAGS_progress);
  o.save_summaries_secs = FLAGS_save_summaries_secs;
  if (FLAGS_summarize_train_metrics) {
    o.train_metrics = slimtorch::ClassifierMetrics();
  }
  o.save_interval_secs = FLAGS_save_interval_secs;
  o.max_checkpoints_to_keep = FLAGS_max_checkpoints_to_keep;
  o.checkpoint_format =
      slimtorch::ParseCheckpointFormat(FLAGS_checkpoint_format);
  o.checkpoint_path = FLAGS_checkpoint_path;
  o.checkpoint_exclude_scopes =
      slimtorch::SplitScopes(FLAGS_checkpoint_exclude_scopes);
  o.ignore_missing_vars = FLAGS_ignore_missing_vars;
  o.trainable_scopes = slimtorch::SplitScopes(FLAGS_trainable_scopes);
  o.stop_requested = slimtorch::tools::InstallStopSignals();
  return o;
}

// The tool's work after the flags: --model_summary, or the deployment and
// training of this process's replica.
void TrainFromFlags(std::vector<char*>& original_argv) {
  slimtorch::tools::PrepareRunFromFlags(/*reads_data=*/!FLAGS_model_summary);
  if (FLAGS_model_summary) {
    PrintModelSummary();
    return;
  }
  bool launched = false;
  Deployment deployment = Deploy(original_argv.data(), &launched);
  if (launched) return;  // the clones did the work
  const slimtorch::TrainOptions o = TrainOptionsFromFlags(deployment);
  slimtorch::TrainResult r = slimtorch::Train(o);
  if (o.replica != 0) return;
  std::cout << "global_step " << r.global_step << " loss " << r.last_loss
            << " checkpoint " << r.checkpoint
            << (r.stopped ? " (stopped by signal)" : "") << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  // The clones get the command as typed (a copy: nothing below may reorder
  // argv, as gflags' own parser did).
  std::vector<char*> original_argv(argv, argv + argc + 1);
  slimtorch::tools::SetRunFlagDefaults(slimtorch::tools::RunKind::kTrain);
  return slimtorch::tools::RunTool(
      argc, argv,
      "Trains an image classifier, as TF-Slim's train_image_classifier.py.\n"
      "Example:\n  train_image_classifier --train_dir=/tmp/lenet-model "
      "--dataset_name=mnist --dataset_split_name=train "
      "--dataset_dir=/tmp/mnist --model_name=lenet --optimizer=sgd "
      "--learning_rate=0.01 --learning_rate_decay_type=fixed "
      "--batch_size=50 --max_number_of_steps=20000 --weight_decay=0",
      FlagGroups(), [&original_argv] {
        slimtorch::tools::LogKernelSwitches();
        TrainFromFlags(original_argv);
      });
}
