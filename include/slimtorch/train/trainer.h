#pragma once
// The training loop of train_image_classifier (TF-Slim's main() +
// slim.learning.train) on one device.
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

#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/train/learning_rate.h"
#include "slimtorch/train/optimizer.h"

namespace slimtorch {

struct TrainOptions {
  // Checkpoints and event files (--train_dir).
  std::string train_dir = "/tmp/tfmodel/";
  std::string dataset_name = "imagenet";
  std::string dataset_split_name = "train";
  std::string dataset_dir;
  std::string model_name = "inception_v3";
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
};

struct TrainResult {
  int64_t global_step = 0;
  // Total loss of the last step run (NaN when no step ran).
  double last_loss = 0.0;
  // The checkpoint written at the end.
  std::string checkpoint;
};

// Runs training; throws slimtorch::Error on bad options, bad data or a
// non-finite loss (training stops before the update and the last good
// checkpoint stays the latest).
TrainResult Train(const TrainOptions& options);

}  // namespace slimtorch
