#include "slimtorch/data/input.h"

#include <ATen/CPUGeneratorImpl.h>
#include <glog/logging.h>

#include <algorithm>

#include "slimtorch/core/error.h"
#include "slimtorch/data/memory_pipeline.h"

namespace slimtorch {

namespace {

PreprocessingOptions PreprocessingFor(const InputOptions& o) {
  PreprocessingOptions pre;
  pre.output_height = o.image_size;
  pre.output_width = o.image_size;
  pre.is_training = o.training;
  pre.use_grayscale = o.use_grayscale;
  if (o.training) {
    pre.augmentation = Augmentation::Create(o.auto_augment, o.random_erase);
  }
  return pre;
}

// Hands a CPU source's batches out on another device.
class ToDevice : public BatchSource {
 public:
  ToDevice(std::unique_ptr<BatchSource> source, torch::Device device)
      : source_(std::move(source)), device_(device) {}

  std::optional<Batch> Next() override {
    std::optional<Batch> batch = source_->Next();
    if (batch) {
      // Pinned batches (PipelineOptions::pin_memory) copy asynchronously.
      batch->images = batch->images.to(device_, /*non_blocking=*/true);
      batch->labels = batch->labels.to(device_, /*non_blocking=*/true);
    }
    return batch;
  }
  int64_t position() const override { return source_->position(); }

 private:
  std::unique_ptr<BatchSource> source_;
  torch::Device device_;
};

}  // namespace

int64_t DefaultShuffleBufferSize(int64_t split_size, int64_t batch_size,
                                 bool photos) {
  if (photos) {
    return std::min(split_size,
                    std::max(kPhotoShuffleRecords, 20 * batch_size));
  }
  return split_size <= kFullShuffleMaxExamples ? split_size : 20 * batch_size;
}

int64_t InputChannels(const DatasetSpec& spec, const InputOptions& options) {
  PreprocessingOptions p;
  p.use_grayscale = options.use_grayscale;
  return PreprocessedChannels(spec.image_channels, p);
}

int64_t NumNetClasses(const DatasetSpec& spec, int64_t labels_offset) {
  SLIM_CHECK(labels_offset >= 0 && labels_offset < spec.num_classes,
             "--labels_offset=", labels_offset, " must be in [0, ",
             spec.num_classes, ") for dataset '", spec.name, "'");
  return spec.num_classes - labels_offset;
}

PipelineOptions MakePipelineOptions(const DatasetSpec& spec,
                                    const InputOptions& o) {
  PipelineOptions p;
  p.files = spec.SplitFiles(o.dataset_dir, o.split_name);
  p.batch_size = o.batch_size;
  p.training = o.training;
  p.num_readers = o.num_readers;
  p.num_preprocessing_threads = o.num_preprocessing_threads;
  p.shuffle_buffer_size =
      o.shuffle_buffer_size > 0
          ? o.shuffle_buffer_size
          : DefaultShuffleBufferSize(spec.SplitSize(o.split_name), o.batch_size,
                                     /*photos=*/spec.image_height <= 0);
  p.seed = o.seed;
  p.start_position = o.start_position;
  p.shard_offset = o.shard_offset;
  p.shard_size = o.shard_size;
  p.repeat = o.repeat;
  p.resume_state = o.resume_state;
  p.decode_channels = spec.image_channels;
  p.default_format = spec.default_format;
  p.num_classes = NumNetClasses(spec, o.labels_offset);
  p.labels_offset = o.labels_offset;
  const PreprocessingOptions pre = PreprocessingFor(o);
  p.preprocess = GetPreprocessing(o.preprocessing_name, pre);
  p.photo = PhotoPreprocessing::Create(o.preprocessing_name, pre);
  p.use_bounding_boxes = o.use_bounding_boxes;
  p.pin_memory = o.device.is_cuda();
  p.output_channels = PreprocessedChannels(spec.image_channels, pre);
  p.output_height = o.image_size;
  p.output_width = o.image_size;
  return p;
}

InputMode ParseInputMode(const std::string& flag, bool training) {
  if (flag == "auto") return InputMode::kAuto;
  if (flag == "in_memory") return InputMode::kInMemory;
  if (flag == "streaming") return InputMode::kStreaming;
  // Evaluation takes it too, for MakeInput to say why it cannot.
  if (flag == "synthetic") return InputMode::kSynthetic;
  SLIM_FAIL("--input_mode=", flag, " is not one of auto, in_memory, streaming",
            training ? ", synthetic" : "");
}

std::string InMemoryUnavailableReason(const DatasetSpec& spec,
                                      const InputOptions& o) {
  SLIM_CHECK(o.in_memory_max_bytes > 0, "--in_memory_max_mb must be positive");
  std::string reason;
  const int64_t bytes = spec.SplitSize(o.split_name) * spec.image_height *
                        spec.image_width * spec.image_channels;
  if (o.input_mode == InputMode::kStreaming) {
    reason = "--input_mode=streaming";
  } else if (!HasBatchPreprocessing(o.preprocessing_name)) {
    reason = StrCat("preprocessing '", o.preprocessing_name,
                    "' has no batched form");
  } else if (spec.image_height <= 0 || spec.image_width <= 0) {
    reason = StrCat("dataset '", spec.name, "' has no fixed image size");
  } else if (bytes > o.in_memory_max_bytes) {
    reason = StrCat("the decoded split needs ", bytes >> 20,
                    " MiB, more than --in_memory_max_mb=",
                    o.in_memory_max_bytes >> 20);
  }
  SLIM_CHECK(o.input_mode != InputMode::kInMemory || reason.empty(),
             "--input_mode=in_memory is not possible for ", spec.name, "/",
             o.split_name, ": ", reason);
  return reason;
}

namespace {

// --input_mode=synthetic: one batch of random preprocessed images (uniform
// in [-1, 1)) and labels, made once from the seed on the device and handed
// out at every step, so that a benchmark measures the net alone (as
// tf_cnn_benchmarks' synthetic data). Reads no record.
class SyntheticInput : public BatchSource {
 public:
  SyntheticInput(const DatasetSpec& spec, const InputOptions& o)
      : position_(o.start_position) {
    const PreprocessingOptions pre = PreprocessingFor(o);
    const int64_t n = o.shard_size > 0 ? o.shard_size : o.batch_size;
    batch_size_ = o.batch_size;
    torch::Generator gen = at::detail::createCPUGenerator(o.seed);
    images_ = (torch::rand({n, PreprocessedChannels(spec.image_channels, pre),
                            o.image_size, o.image_size},
                           gen) *
                   2 -
               1)
                  .to(o.device);
    labels_ = torch::randint(NumNetClasses(spec, o.labels_offset), {n}, gen,
                             torch::kInt64)
                  .to(o.device);
    LOG(INFO) << "Input: synthetic, one random batch " << images_.sizes()
              << " on " << o.device << " every step (no records read)";
  }
  std::optional<Batch> Next() override {
    AdvanceCapturedBatch();
    return CapturedBatch();
  }
  int64_t position() const override { return position_; }
  bool CanCaptureBatches() const override { return true; }
  std::pair<int64_t, int64_t> AdvanceCapturedBatch() override {
    first_ = position_;
    position_ += batch_size_;
    return {first_, position_};
  }
  Batch CapturedBatch() override {
    Batch b;
    b.images = images_;
    b.labels = labels_;
    b.first_position = first_;
    b.end_position = first_ + batch_size_;
    return b;
  }

 private:
  int64_t position_;
  int64_t first_ = 0;
  int64_t batch_size_;
  torch::Tensor images_;
  torch::Tensor labels_;
};

}  // namespace

std::unique_ptr<BatchSource> MakeInput(const DatasetSpec& spec,
                                       const InputOptions& o) {
  if (o.input_mode == InputMode::kSynthetic) {
    SLIM_CHECK(o.training,
               "--input_mode=synthetic is for training "
               "benchmarks; evaluation needs the dataset's records");
    return std::make_unique<SyntheticInput>(spec, o);
  }
  PipelineOptions p = MakePipelineOptions(spec, o);
  const std::string reason = InMemoryUnavailableReason(spec, o);
  if (!reason.empty()) {
    LOG(INFO) << "Input: streaming records, decoding every step (" << reason
              << ")";
    auto pipeline = std::make_unique<Pipeline>(std::move(p));
    if (o.device.is_cpu()) return pipeline;
    return std::make_unique<ToDevice>(std::move(pipeline), o.device);
  }
  DecodeSplitOptions d;
  d.files = p.files;
  d.height = spec.image_height;
  d.width = spec.image_width;
  d.decode_channels = p.decode_channels;
  d.default_format = p.default_format;
  d.num_classes = p.num_classes;
  d.labels_offset = p.labels_offset;
  d.num_threads = p.num_preprocessing_threads;
  d.max_bytes = o.in_memory_max_bytes;
  auto split = std::make_shared<const DecodedSplit>(DecodeSplit(d));
  const PreprocessingOptions pre = PreprocessingFor(o);
  MemoryPipelineOptions m;
  m.batch_size = o.batch_size;
  m.training = o.training;
  m.seed = o.seed;
  m.start_position = o.start_position;
  m.preprocess = GetBatchPreprocessing(o.preprocessing_name, pre);
  // (Repeated examples are drawn on the CPU: their order is not the
  // permutations' the device holds.)
  if (o.training && o.draw_augmentation_on_device && !o.device.is_cpu() &&
      !o.repeat.on()) {
    m.counter_preprocess =
        GetCounterBatchPreprocessing(o.preprocessing_name, pre);
  }
  LOG(INFO) << "Input: in memory, " << split->images.size(0)
            << " examples decoded once (" << (split->images.numel() >> 20)
            << " MiB), batches augmented whole on " << o.device
            << (m.counter_preprocess
                    ? " (parameters drawn there, counter-based)"
                    : "");
  m.output_channels = p.output_channels;
  m.output_height = p.output_height;
  m.output_width = p.output_width;
  m.device = o.device;
  m.shard_offset = o.shard_offset;
  m.shard_size = o.shard_size;
  m.repeat = o.repeat;
  return std::make_unique<MemoryPipeline>(std::move(split), std::move(m));
}

}  // namespace slimtorch
