#pragma once
// The in-memory data path for small datasets (CIFAR, MNIST): the split is
// decoded once into one uint8 [N, H, W, C] tensor, and every batch is
// gathered from it and augmented as a whole with the batched preprocessing,
// on the training device. No image is decoded per step.
//
// Order: training streams epoch after epoch, each a fresh permutation of the
// split drawn from (seed, epoch); stream position p is example
// perm_{p / N}[p % N], and a batch is positions [p, p + batch_size), so
// batches run across epoch boundaries as TF-Slim's repeated queues do.
// Evaluation makes one ordered pass with a partial last batch.
//
// Determinism: the batches depend only on the split, the seed and the
// position; example i of a batch gets the generator seeded with
// ExampleRngSeed(seed, position + i), as in the record pipeline. A pipeline
// started at start_position = P yields what an uninterrupted one yields
// after P examples, at once (nothing is replayed).
//
// Next() gathers and augments a batch on the caller's thread: on the CPU this
// costs ~1% of a CifarNet step (bench/train_cpu/cifarnet_throughput.sh). On a CUDA
// device the split is copied there once (CIFAR-10's train split: 147 MiB);
// per batch only the example indices and the augmentation parameters (drawn
// on the CPU from the per-example generators) are copied, the gather and the
// augmentation are kernels queued on the current stream; with a
// counter-based preprocessing (MemoryPipelineOptions::counter_preprocess)
// not even those: the parameters are hashed on the device from (seed,
// position) and each epoch's order is copied there once.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "slimtorch/data/pipeline.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {

// One split, decoded.
struct DecodedSplit {
  torch::Tensor images;  // uint8 [N, H, W, C], CPU
  torch::Tensor labels;  // int64 [N], CPU, label - labels_offset
};

struct DecodeSplitOptions {
  // TFRecord files, in canonical order (their records concatenated).
  std::vector<std::string> files;
  // Every image must decode to this size (the dataset's fixed shape).
  int64_t height = 0;
  int64_t width = 0;
  int decode_channels = 3;
  std::string default_format = "png";
  int64_t num_classes = 0;
  int64_t labels_offset = 0;
  int num_threads = 4;
  // Fail before decoding more than this many bytes of pixels (0 = no cap).
  int64_t max_bytes = 0;
};

// Reads and decodes every record; errors name the file and record.
DecodedSplit DecodeSplit(const DecodeSplitOptions& options);

struct MemoryPipelineOptions {
  int64_t batch_size = 32;
  // true: shuffled epochs forever; false: one ordered pass.
  bool training = true;
  uint64_t seed = 0;
  int64_t start_position = 0;
  BatchPreprocessingFn preprocess;
  // Training: when set (the GPU path sets it), batches are augmented with this
  // counter-based form instead (parameters hashed from (seed, position) on
  // the device, the epoch's order held there too): no per-batch work or
  // copy on the CPU.
  CounterBatchPreprocessingFn counter_preprocess;
  int64_t output_channels = 3;
  int64_t output_height = 0;
  int64_t output_width = 0;
  // Where batches are augmented and handed out.
  torch::Device device = torch::kCPU;
  // As PipelineOptions::shard_offset / shard_size (training only).
  int64_t shard_offset = 0;
  int64_t shard_size = 0;
  // As PipelineOptions::repeat: position p shows the example of position
  // repeat.SourcePosition(p) of the epochs' permutations (with p's own
  // augmentation). Not with counter_preprocess.
  ExampleRepeat repeat;
};

class MemoryPipeline : public BatchSource {
 public:
  MemoryPipeline(std::shared_ptr<const DecodedSplit> split,
                 MemoryPipelineOptions options);

  std::optional<Batch> Next() override;
  int64_t position() const override { return position_; }
  // With counter_preprocess and training: the batch's first position and
  // the orders of the epochs it can span live on the device (Next() then
  // uses the same path).
  bool CanCaptureBatches() const override;
  std::pair<int64_t, int64_t> AdvanceCapturedBatch() override;
  Batch CapturedBatch() override;

  // The order of epoch `epoch` of a training stream over `n` examples.
  static std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t n,
                                               int64_t epoch);

 private:
  int64_t ExampleIndex(int64_t position);

  std::shared_ptr<const DecodedSplit> split_;
  MemoryPipelineOptions options_;
  // The split on options_.device (split_'s own tensors on the CPU).
  torch::Tensor images_;
  torch::Tensor labels_;
  int64_t size_;
  int64_t position_;
  // The current epoch's order (training).
  int64_t epoch_ = -1;
  std::vector<int64_t> permutation_;
  // Captured batches: the first position of this replica's slice (int64,
  // 0-dim), the position of captured_orders_[0], the orders of the
  // consecutive epochs a batch can span [k * size], arange(slice size); all
  // on the device. captured_epoch_: the first of the epochs held (-1: none).
  torch::Tensor captured_first_;
  torch::Tensor captured_base_;
  torch::Tensor captured_orders_;
  torch::Tensor captured_offsets_;
  int64_t captured_epoch_ = -1;
  int64_t captured_begin_ = 0;
  int64_t captured_end_ = 0;
};

}  // namespace slimtorch
