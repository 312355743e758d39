#pragma once
// The flags train_image_classifier and eval_image_classifier share: the
// dataset, the input pipeline, the net and the devices, defined once in
// run_flags.cc, which both tools (and only they) compile. Where TF-Slim's
// two scripts give a flag different defaults (the split, the batch size),
// each tool sets its own before the command line is read.

#include <gflags/gflags.h>

#include "slimtorch/train/run_setup.h"

DECLARE_string(dataset_dir);
DECLARE_string(dataset_name);
DECLARE_string(dataset_split_name);
DECLARE_int32(batch_size);
DECLARE_string(model_name);
DECLARE_string(preprocessing_name);
DECLARE_bool(use_grayscale);
DECLARE_int32(labels_offset);
DECLARE_int32(num_preprocessing_threads);
DECLARE_string(input_mode);
DECLARE_int32(in_memory_max_mb);
DECLARE_string(data_format);
DECLARE_string(precision);
DECLARE_bool(clone_on_cpu);
DECLARE_bool(tf32);
DECLARE_int32(num_intra_op_threads);
DECLARE_string(master);

namespace slimtorch {
namespace tools {

enum class RunKind { kTrain, kEval };

// This tool's defaults of the shared flags, TF-Slim's: the train split and
// batches of 32 for training, the test split and batches of 100 for
// evaluation. Called in main, before the flags are read; --help shows them.
void SetRunFlagDefaults(RunKind kind);

// The process set-up the shared flags ask for, before any work: refuses
// --master (TensorFlow's sessions), requires --dataset_dir when the run
// reads data, and sets LibTorch's threads and TensorFloat-32.
void PrepareRunFromFlags(bool reads_data = true);

// The shared flags into `o`, parsed (throws naming a bad value); the device
// is --clone_on_cpu's pick, which a deployment may refine.
void SetRunOptionsFromFlags(RunKind kind, RunOptions* o);

}  // namespace tools
}  // namespace slimtorch
