#include "slimtorch/data/memory_pipeline.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "record_decode.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace {

// Records decoded in parallel at a time.
constexpr size_t kDecodeChunk = 4096;

struct PendingRecord {
  std::string data;
  int file;
  int64_t index;
};

// A seed for epoch `epoch`'s permutation (distinct from the per-example
// streams: ExampleRngSeed mixes its own stream id).
uint64_t PermutationSeed(uint64_t seed, int64_t epoch) {
  return ExampleRngSeed(seed ^ 0x5bd1e9955bd1e995ULL, -1 - epoch);
}

// Decodes a split's records in chunks of kDecodeChunk, each chunk on
// `threads` threads, into one buffer of pixels and one of labels, both in
// stream order.
class SplitDecoder {
 public:
  explicit SplitDecoder(const DecodeSplitOptions& o)
      : o_(o),
        format_(internal::RecordFormatOf(o)),
        image_bytes_(o.height * o.width * o.decode_channels),
        threads_(std::max(1, o.num_threads)) {}

  void Add(const PendingRecord& r) {
    chunk_.push_back(r);
    if (chunk_.size() == kDecodeChunk) DecodeChunk();
  }

  // Decodes what is pending; the split as tensors (images NHWC uint8,
  // labels int64).
  DecodedSplit Finish() {
    if (!chunk_.empty()) DecodeChunk();
    const int64_t n = static_cast<int64_t>(labels_.size());
    SLIM_CHECK(n > 0, "no records in ", o_.files.front(),
               o_.files.size() > 1 ? " and the other files of the split" : "");
    DecodedSplit split;
    auto* owned = new std::vector<uint8_t>(std::move(pixels_));
    split.images = torch::from_blob(
        owned->data(), {n, o_.height, o_.width, o_.decode_channels},
        [owned](void*) { delete owned; }, torch::kUInt8);
    split.labels = torch::tensor(labels_, torch::kInt64);
    return split;
  }

 private:
  void DecodeChunk() {
    const size_t base = labels_.size();
    SLIM_CHECK(o_.max_bytes <= 0 ||
                   static_cast<int64_t>(base + chunk_.size()) * image_bytes_ <=
                       o_.max_bytes,
               "the split holds more than ", o_.max_bytes,
               " bytes of decoded pixels (at ", o_.files[chunk_.front().file],
               " record ", chunk_.front().index,
               "); it is too large for the in-memory input path");
    pixels_.resize((base + chunk_.size()) * image_bytes_);
    labels_.resize(base + chunk_.size());
    std::vector<std::exception_ptr> errors(chunk_.size());
    auto work = [&](int t) {
      for (size_t i = t; i < chunk_.size(); i += threads_) {
        try {
          DecodeRecord(chunk_[i], base + i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads_; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
    // The first bad record in stream order, whatever the thread timing.
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    chunk_.clear();
  }

  // Record `r` into slot `slot` of the buffers.
  void DecodeRecord(const PendingRecord& r, size_t slot) {
    std::string context = StrCat(o_.files[r.file], " record ", r.index);
    int64_t label = 0;
    ImageExample ex = internal::ParseRecord(r.data, format_, context, &label);
    labels_[slot] = label;
    internal::DecodeRecordImageInto(
        ex, format_, static_cast<int>(o_.height), static_cast<int>(o_.width),
        pixels_.data() + slot * image_bytes_, context);
  }

  const DecodeSplitOptions& o_;
  const internal::RecordFormat format_;
  const int64_t image_bytes_;
  const int threads_;
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  std::vector<PendingRecord> chunk_;
};

}  // namespace

DecodedSplit DecodeSplit(const DecodeSplitOptions& o) {
  SLIM_CHECK(!o.files.empty(), "DecodeSplit: no files");
  SLIM_CHECK(o.height > 0 && o.width > 0,
             "DecodeSplit: the dataset has no fixed image size");
  SplitDecoder decoder(o);
  for (size_t f = 0; f < o.files.size(); ++f) {
    TFRecordReader reader(o.files[f]);
    PendingRecord r;
    r.file = static_cast<int>(f);
    while (true) {
      r.index = static_cast<int64_t>(reader.record_index());
      if (!reader.Read(&r.data)) break;
      decoder.Add(r);
    }
  }
  return decoder.Finish();
}

MemoryPipeline::MemoryPipeline(std::shared_ptr<const DecodedSplit> split,
                               MemoryPipelineOptions options)
    : split_(std::move(split)),
      options_(std::move(options)),
      size_(split_->images.size(0)),
      position_(options_.start_position) {
  const auto& o = options_;
  SLIM_CHECK(o.batch_size > 0, "batch size must be positive, got ",
             o.batch_size);
  SLIM_CHECK(o.preprocess, "the in-memory input path needs a batched "
                           "preprocessing function");
  SLIM_CHECK(o.start_position >= 0, "start position must be >= 0");
  CheckShard("in-memory input", o.training, o.batch_size, o.shard_offset,
             o.shard_size);
  CheckRepeat("in-memory input", o.training, o.repeat);
  SLIM_CHECK(!o.repeat.on() || !o.counter_preprocess,
             "--repeated_augmentation with augmentation parameters drawn on "
             "the device is not supported yet");
  SLIM_CHECK(split_->images.dim() == 4 && split_->labels.dim() == 1 &&
                 split_->labels.size(0) == size_ && size_ > 0,
             "in-memory split: images ", split_->images.sizes(), ", labels ",
             split_->labels.sizes());
  // The whole split is copied to the device once; batches are gathered
  // there.
  images_ = split_->images.to(o.device);
  labels_ = split_->labels.to(o.device);
}

std::vector<int64_t> MemoryPipeline::EpochPermutation(uint64_t seed,
                                                      int64_t n,
                                                      int64_t epoch) {
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  // Fisher–Yates with explicit arithmetic (std::shuffle's algorithm is
  // unspecified, so it is not portable across standard libraries).
  std::mt19937_64 rng(PermutationSeed(seed, epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

int64_t MemoryPipeline::ExampleIndex(int64_t stream_position) {
  if (!options_.training) return stream_position;
  const int64_t position = options_.repeat.SourcePosition(stream_position);
  const int64_t epoch = position / size_;
  if (epoch != epoch_) {
    permutation_ = EpochPermutation(options_.seed, size_, epoch);
    epoch_ = epoch;
  }
  return permutation_[position % size_];
}

bool MemoryPipeline::CanCaptureBatches() const {
  const auto& o = options_;
  return o.counter_preprocess && o.training;
}

std::pair<int64_t, int64_t> MemoryPipeline::AdvanceCapturedBatch() {
  SLIM_CHECK(CanCaptureBatches(),
             "this in-memory input cannot make batches "
             "on the device alone");
  const auto& o = options_;
  const auto ints =
      torch::TensorOptions().dtype(torch::kInt64).device(o.device);
  // A batch of B starting anywhere in an epoch spans at most
  // ceil(B / size) + 1 epochs.
  const int64_t epochs = (o.batch_size + size_ - 1) / size_ + 1;
  if (!captured_first_.defined()) {
    captured_first_ = torch::zeros({}, ints);
    captured_base_ = torch::zeros({}, ints);
    captured_orders_ = torch::empty({epochs * size_}, ints);
    captured_offsets_ =
        torch::arange(o.shard_size > 0 ? o.shard_size : o.batch_size, ints);
  }
  const int64_t first = position_;
  const int64_t epoch = first / size_;
  if (epoch != captured_epoch_) {
    std::vector<int64_t> orders;
    orders.reserve(epochs * size_);
    for (int64_t e = epoch; e < epoch + epochs; ++e) {
      std::vector<int64_t> order = EpochPermutation(o.seed, size_, e);
      orders.insert(orders.end(), order.begin(), order.end());
    }
    captured_orders_.copy_(torch::tensor(orders, torch::kInt64));
    captured_base_.fill_(epoch * size_);
    captured_epoch_ = epoch;
  }
  // This replica's slice of the batch (the whole batch without replicas).
  captured_begin_ = first + o.shard_offset;
  captured_first_.fill_(captured_begin_);
  captured_end_ = first + o.batch_size;
  position_ = captured_end_;
  return {captured_begin_, captured_end_};
}

Batch MemoryPipeline::CapturedBatch() {
  SLIM_CHECK(captured_first_.defined(),
             "CapturedBatch before AdvanceCapturedBatch");
  torch::Tensor positions = captured_first_ + captured_offsets_;
  torch::Tensor index =
      captured_orders_.index_select(0, positions - captured_base_);
  Batch batch;
  batch.first_position = captured_begin_;
  batch.end_position = captured_end_;
  batch.labels = labels_.index_select(0, index);
  batch.images = options_
                     .counter_preprocess(images_.index_select(0, index),
                                         positions, options_.seed)
                     .contiguous();
  return batch;
}

std::optional<Batch> MemoryPipeline::Next() {
  if (CanCaptureBatches()) {
    AdvanceCapturedBatch();
    return CapturedBatch();
  }
  const auto& o = options_;
  int64_t first = position_;
  int64_t n = o.batch_size;
  if (!o.training) {
    if (first >= size_) return std::nullopt;
    n = std::min(n, size_ - first);
  }
  const int64_t end = first + n;
  if (o.shard_size > 0) {  // this replica's slice of the batch
    first += o.shard_offset;
    n = o.shard_size;
  }
  torch::Tensor index = torch::empty({n}, torch::kInt64);
  int64_t* idx = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) idx[i] = ExampleIndex(first + i);
  std::vector<std::mt19937_64> rngs;
  rngs.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    rngs.emplace_back(ExampleRngSeed(o.seed, first + i));
  }
  if (!o.device.is_cpu()) index = index.to(o.device);
  torch::Tensor images = images_.index_select(0, index);
  Batch batch;
  batch.first_position = first;
  batch.end_position = end;
  batch.labels = labels_.index_select(0, index);
  torch::Tensor out = o.preprocess(images, rngs);
  SLIM_CHECK(out.dim() == 4 && out.size(0) == n &&
                 out.size(1) == o.output_channels &&
                 out.size(2) == o.output_height &&
                 out.size(3) == o.output_width,
             "batch at stream position ", first, ": preprocessing produced ",
             out.sizes(), ", expected [", n, ", ", o.output_channels, ", ",
             o.output_height, ", ", o.output_width, "]");
  batch.images = out.contiguous();
  position_ = end;
  return batch;
}

}  // namespace slimtorch
