#pragma once
// Glue between a dataset, a preprocessing and the pipeline, shared by
// training and evaluation (TF-Slim's DatasetDataProvider + preprocessing_fn
// + tf.train.batch).

#include <memory>
#include <string>

#include "slimtorch/data/pipeline.h"
#include "slimtorch/datasets/dataset.h"

namespace slimtorch {

// --input_mode: in memory when possible (kAuto) or required (kInMemory),
// the record pipeline decoding every step (kStreaming), or for training
// benchmarks one random batch every step, no records (kSynthetic).
enum class InputMode { kAuto, kInMemory, kStreaming, kSynthetic };

// "auto", "in_memory", "streaming" or "synthetic"; throws naming the flag
// on any other value (listing synthetic for `training` only, where it
// works).
InputMode ParseInputMode(const std::string& flag, bool training);

// The input of a split, as training and evaluation read it. The options of
// both (TrainOptions, EvalOptions) embed these: the tools fill them once.
struct InputOptions {
  std::string dataset_dir;
  // The split (--dataset_split_name).
  std::string split_name;
  // Preprocessing registry name (TF-Slim: --preprocessing_name or model;
  // "" = the model's, resolved by ResolveRunInput).
  std::string preprocessing_name;
  // Square output size of preprocessing (--train_image_size,
  // --eval_image_size); 0 = the net's default_image_size, resolved by
  // BuildRunNet.
  int64_t image_size = 0;
  bool use_grayscale = false;
  // Training only: --auto_augment and --random_erase
  // (preprocessing/augment.h; "" and 0: none).
  std::string auto_augment;
  double random_erase = 0.0;
  int64_t batch_size = 32;
  bool training = true;
  int num_readers = 4;
  int num_preprocessing_threads = 4;
  // Records in the training shuffle buffer; 0 = automatic: the whole split
  // when it has at most kFullShuffleMaxExamples examples (a fresh
  // permutation-like order every epoch), else 20 * batch_size (TF-Slim's
  // queue capacity); for photo datasets see kPhotoShuffleRecords.
  int64_t shuffle_buffer_size = 0;
  uint64_t seed = 0;
  int64_t start_position = 0;
  // The record reader's saved state at start_position
  // (PipelineOptions::resume_state), or empty.
  std::string resume_state;
  int64_t labels_offset = 0;
  // Inception training on records with image/object/bbox/* (ImageNet): the
  // boxes guide sample_distorted_bounding_box (--use_bounding_boxes).
  bool use_bounding_boxes = true;
  // --input_mode (InputMode).
  InputMode input_mode = InputMode::kAuto;
  // The in-memory path holds at most this many bytes of decoded pixels
  // (--in_memory_max_mb).
  int64_t in_memory_max_bytes = int64_t{2048} << 20;
  // The in-memory path on a GPU: preprocessings with a counter-based form
  // (CounterBatchPreprocessingFn) draw their parameters on the device.
  bool draw_augmentation_on_device = false;
  // Where batches are handed out (the in-memory path augments there).
  torch::Device device = torch::kCPU;
  // Training: hand out only examples [shard_offset, shard_offset +
  // shard_size) of every batch of batch_size (PipelineOptions::shard_size;
  // 0 = whole batches).
  int64_t shard_offset = 0;
  int64_t shard_size = 0;
  // Training: --repeated_augmentation (PipelineOptions::repeat).
  ExampleRepeat repeat;
};

// Splits of small fixed-size images (MNIST, CIFAR) up to this size are
// shuffled whole by default.
inline constexpr int64_t kFullShuffleMaxExamples = 100000;
// Photo datasets (image size varies, ~110 KB a record for ImageNet): the
// default buffer holds at most this many records, or 20 * batch_size if
// that is more (the whole of flowers' training split fits).
inline constexpr int64_t kPhotoShuffleRecords = 4096;

// The shuffle buffer MakePipelineOptions uses for a split of `split_size`.
int64_t DefaultShuffleBufferSize(int64_t split_size, int64_t batch_size,
                                 bool photos = false);

// Channels the net sees after preprocessing.
int64_t InputChannels(const DatasetSpec& spec, const InputOptions& options);

// Classes the net predicts: spec.num_classes - labels_offset (> 0).
int64_t NumNetClasses(const DatasetSpec& spec, int64_t labels_offset);

// Resolves the split's files and the preprocessing function.
PipelineOptions MakePipelineOptions(const DatasetSpec& spec,
                                    const InputOptions& options);

// Whether the input runs in memory, and why not when it does not ("" when
// it does). Throws for --input_mode=in_memory when it cannot.
std::string InMemoryUnavailableReason(const DatasetSpec& spec,
                                      const InputOptions& options);

// The batch source for a split: the in-memory path (the split decoded once,
// batches augmented whole) or the record pipeline, per options.input_mode.
// Logs which one runs.
std::unique_ptr<BatchSource> MakeInput(const DatasetSpec& spec,
                                       const InputOptions& options);

}  // namespace slimtorch
