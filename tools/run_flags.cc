#include "run_flags.h"

#include "slimtorch/core/error.h"
#include "slimtorch/data/input.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/precision.h"
#include "tool_common.h"

// Dataset.
DEFINE_string(dataset_dir, "",
              "The directory where the dataset files are stored.");
DEFINE_string(dataset_name, "imagenet", "The name of the dataset to load.");
// Defaults: SetRunFlagDefaults.
DEFINE_string(dataset_split_name, "train", "The name of the train/test split.");
DEFINE_int32(batch_size, 32, "The number of samples in each batch.");
DEFINE_int32(labels_offset, 0,
             "An offset for the labels in the dataset. This flag is primarily "
             "used to evaluate the VGG and ResNet architectures which do not "
             "use a background class for the ImageNet dataset.");
DEFINE_string(preprocessing_name, "",
              "The name of the preprocessing to use. If left as empty, then "
              "the model_name flag is used.");
DEFINE_bool(use_grayscale, false,
            "Whether to convert input images to grayscale.");

// Input pipeline.
DEFINE_int32(num_preprocessing_threads, 4,
             "The number of threads used to create the batches.");
DEFINE_string(input_mode, "auto",
              "auto: decode a small split once into memory and augment whole "
              "batches when the preprocessing has a batched form, else stream "
              "records; in_memory: require that; streaming: decode records "
              "every step; synthetic (training only): one random batch every "
              "step, no records read, for benchmarks (ours).");
DEFINE_int32(in_memory_max_mb, 2048,
             "Largest decoded split (MiB of pixels) the in-memory input path "
             "holds (ours).");

// Model.
DEFINE_string(model_name, "inception_v3",
              "The name of the architecture to train or evaluate.");

// Devices and speed.
DEFINE_bool(clone_on_cpu, false,
            "Use CPUs to deploy clones: train or evaluate on the CPU even "
            "when a CUDA GPU is present.");
DEFINE_string(data_format, "auto",
              "The net's memory order (ours): channels_first (NCHW), "
              "channels_last (NHWC) or auto: channels-last on CPU for the "
              "nets measured faster in it (docs/performance.md), NCHW "
              "otherwise. Checkpoints are the same either way.");
DEFINE_string(precision, "fp32",
              "fp32, bf16 or fp16 (ours): the forward pass under LibTorch's "
              "autocast in that type, variables, optimizer slots and losses "
              "in float32; fp16 on GPUs only, trained with dynamic loss "
              "scaling, as TensorFlow's LossScaleOptimizer.");
DEFINE_bool(tf32, true,
            "On NVIDIA GPUs from Ampere on, float32 matrix products and "
            "convolutions in TensorFloat-32 (TensorFlow's default, "
            "enable_tensor_float_32_execution); false: full float32 "
            "(ours).");
DEFINE_int32(num_intra_op_threads, 0,
             "Threads for LibTorch's math (0: every core).");
DEFINE_string(master, "", "The address of the TensorFlow master to use.");

namespace slimtorch {
namespace tools {

void SetRunFlagDefaults(RunKind kind) {
  const bool training = kind == RunKind::kTrain;
  gflags::SetCommandLineOptionWithMode("dataset_split_name",
                                       training ? "train" : "test",
                                       gflags::SET_FLAGS_DEFAULT);
  gflags::SetCommandLineOptionWithMode("batch_size", training ? "32" : "100",
                                       gflags::SET_FLAGS_DEFAULT);
}

void PrepareRunFromFlags(bool reads_data) {
  FailIfSet({"master"});
  if (!reads_data) return;
  CheckDatasetDir(FLAGS_dataset_dir);
  SetThreads(FLAGS_num_intra_op_threads);
  SetTf32(FLAGS_tf32);
}

void SetRunOptionsFromFlags(RunKind kind, RunOptions* o) {
  const bool training = kind == RunKind::kTrain;
  o->dataset_name = FLAGS_dataset_name;
  o->split_name = FLAGS_dataset_split_name;
  o->dataset_dir = FLAGS_dataset_dir;
  o->model_name = FLAGS_model_name;
  o->data_format = ParseDataFormat(FLAGS_data_format);
  o->precision = ParsePrecision(FLAGS_precision);
  o->preprocessing_name = FLAGS_preprocessing_name;
  o->batch_size = FLAGS_batch_size;
  o->use_grayscale = FLAGS_use_grayscale;
  o->labels_offset = FLAGS_labels_offset;
  o->num_preprocessing_threads = FLAGS_num_preprocessing_threads;
  o->input_mode = ParseInputMode(FLAGS_input_mode, training);
  o->in_memory_max_bytes = int64_t{FLAGS_in_memory_max_mb} << 20;
  o->device = PickDevice(FLAGS_clone_on_cpu);
}

}  // namespace tools
}  // namespace slimtorch
