#pragma once
// The input pipeline: TFRecord shards → tf.train.Example → decoded image →
// preprocessing → batches, with a reader thread and worker threads.
//
//   reader thread: reads records from up to num_readers files at a time,
//     interleaved round robin (file order reshuffled every epoch when
//     training), through a shuffle buffer (training), into raw batches;
//   num_preprocessing_threads workers: decode + preprocess whole batches;
//   Next(): hands batches out strictly in order.
//
// Determinism: the record order depends only on the files, the seed and the
// epoch; each example's preprocessing RNG is seeded from (seed, position),
// so a pipeline's output never depends on thread timing, and a pipeline
// started at start_position = P yields exactly what an uninterrupted one
// yields after P examples (the reader replays P records without decoding).
//
// Training pipelines repeat forever. Evaluation pipelines make exactly one
// ordered pass: the last batch is partial, nothing wraps around (unlike
// TF-Slim, which tops the last batch up from the next pass).

#include <torch/torch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "slimtorch/preprocessing/photo_preprocessing.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {

// Seed of the preprocessing generator of the example at stream position
// `position` (std::mt19937_64 seeded with it). Every data path uses it, so a
// position gets the same augmentation whichever path decodes it.
uint64_t ExampleRngSeed(uint64_t seed, int64_t position);

// --repeated_augmentation=k (the repeated-augmentation sampler of DeiT,
// timm's RepeatAugSampler, torchvision's RASampler): every example of the
// stream is handed out k times, each copy with the augmentation of its own
// stream position. The distinct examples run through the usual order (an
// epoch's permutation, the shuffle buffer) at 1/k of the rate: stream
// position p shows the example at source position SourcePosition(p), in
// blocks of k * stride positions that show `stride` examples k times over.
// With replicas the stride is a replica's slice of the batch, so the
// copies of an example land on different replicas (as the samplers deal
// them); with one, stride 1 keeps them next to each other in one batch.
struct ExampleRepeat {
  int64_t repeats = 1;  // k; 1: off
  int64_t stride = 1;
  bool on() const { return repeats > 1; }
  // Positions of one block (stride examples, repeats copies each).
  int64_t block() const { return repeats * stride; }
  int64_t SourcePosition(int64_t position) const {
    if (!on()) return position;
    return position / block() * stride + position % stride;
  }
};

// Throws unless `repeat` is off or valid for training.
void CheckRepeat(const char* source, bool training,
                 const ExampleRepeat& repeat);

struct Batch {
  // [N, C, H, W] float32, contiguous; on the CPU, or on the training
  // device for a source that augments there.
  torch::Tensor images;
  torch::Tensor labels;  // [N] int64, same device, in [0, num_classes)
  // Stream position of the first example (start_position counts).
  int64_t first_position = 0;
  // Stream position after this batch: first_position + size(), or, for a
  // shard of a larger batch (PipelineOptions::shard_size), the end of that
  // batch.
  int64_t end_position = 0;
  // The record reader's state after this batch (training pipelines with a
  // bounded shuffle buffer; else null): saved in checkpoints and handed
  // back as PipelineOptions::resume_state, it resumes the stream without
  // reading the records before it.
  std::shared_ptr<const std::string> input_state;
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// A source of batches: the record pipeline or the in-memory one.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch in order; std::nullopt once a one-pass source is done.
  virtual std::optional<Batch> Next() = 0;
  // Examples handed out so far, start_position included.
  virtual int64_t position() const = 0;

  // Batches made from device state alone, so that a CUDA graph can capture
  // their making with the step (--cuda_graph): a source that can
  // (CanCaptureBatches) keeps the batch's stream position in a device
  // tensor. AdvanceCapturedBatch (host, outside any graph) points it at the
  // batch Next() would hand out and advances past it, returning the batch's
  // first and end positions; CapturedBatch then computes that batch with
  // device ops only (captured once, it recomputes at every replay; called
  // eagerly, it is that batch). Sources that cannot: false / throw.
  virtual bool CanCaptureBatches() const { return false; }
  virtual std::pair<int64_t, int64_t> AdvanceCapturedBatch();
  virtual Batch CapturedBatch();
};

struct PipelineOptions {
  // TFRecord files (a split's shards), in their canonical (sorted) order.
  std::vector<std::string> files;
  int64_t batch_size = 32;
  // true: shuffle (file order + buffer) and repeat forever (training).
  // false: one ordered pass with one reader (evaluation).
  bool training = true;
  // Files read at a time, interleaved (--num_readers).
  int num_readers = 4;
  // Decode/preprocess worker threads (--num_preprocessing_threads).
  int num_preprocessing_threads = 4;
  // Records in the shuffle buffer; 0 = 20 * batch_size (TF-Slim's
  // common_queue_capacity).
  int64_t shuffle_buffer_size = 0;
  uint64_t seed = 0;
  // Examples already consumed by an earlier run (resume).
  int64_t start_position = 0;
  // Batch::input_state of the batch that ended at start_position, or empty.
  // When it matches these files and options the reader continues from it
  // (cost independent of start_position); otherwise, or when empty, it
  // replays start_position records (reading, not decoding them).
  std::string resume_state;
  // Decoded batches kept ready ahead of Next().
  int prefetch_batches = 2;

  // Decoding: channels to decode to (1 or 3) and the stored image/format
  // assumed when a record has none.
  int decode_channels = 3;
  std::string default_format = "png";
  // Labels: label - labels_offset must fall in [0, num_classes).
  int64_t num_classes = 0;
  int64_t labels_offset = 0;

  // Per-image preprocessing producing [C, H, W] float of this shape.
  PreprocessingFn preprocess;
  // The same preprocessing fused (preprocessing/photo_preprocessing.h), or
  // null. When set it replaces `preprocess` (same results): each worker
  // reads the record in place, decodes only the window of a JPEG that the
  // preprocessing reads, and writes the batch tensor directly, reusing its
  // decoder and buffers.
  std::shared_ptr<const PhotoPreprocessing> photo;
  // With `photo` in inception training: the record's image/object/bbox/*
  // boxes (ImageNet) go to sample_distorted_bounding_box.
  bool use_bounding_boxes = true;
  // Batches in page-locked memory (the target is a CUDA device, copied with
  // non_blocking=true).
  bool pin_memory = false;
  int64_t output_channels = 3;
  int64_t output_height = 0;
  int64_t output_width = 0;
  // Training only: > 0 hands out only examples [shard_offset, shard_offset +
  // shard_size) of every batch of batch_size (a data-parallel replica's
  // slice); the others are read but not decoded. Each example keeps the
  // augmentation of its stream position, so the shards of all replicas
  // together equal the whole batch.
  int64_t shard_offset = 0;
  int64_t shard_size = 0;
  // Training only: each example handed out repeat.repeats times. With a
  // saved reader state the stream resumes mid-block too.
  ExampleRepeat repeat;
};

// Throws unless shard_size is 0 (whole batches) or [shard_offset,
// shard_offset + shard_size) lies in a training batch of batch_size;
// `source` names the input path in the error.
void CheckShard(const char* source, bool training, int64_t batch_size,
                int64_t shard_offset, int64_t shard_size);

namespace internal {
class BatchBufferPool;
struct RecordFormat;
}  // namespace internal

class Pipeline : public BatchSource {
 public:
  // Validates the options and starts the threads.
  explicit Pipeline(PipelineOptions options);
  // Stops and joins all threads.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next batch in order; std::nullopt once a one-pass pipeline is done.
  // Errors surface in stream order: every good batch before a bad record is
  // handed out first, then the error is rethrown (naming the record's file
  // and index) on this and every later call, whatever the thread timing.
  std::optional<Batch> Next() override;

  // Examples handed out so far, start_position included.
  int64_t position() const override { return position_; }

  // Records replayed to reach start_position (0 when resumed from a state).
  int64_t replayed_records() const { return replayed_records_.load(); }

 private:
  struct RawRecord {
    std::string data;
    int file = 0;
    uint64_t offset = 0;  // byte offset within its file
    int64_t index = 0;    // record index within its file
  };
  struct RawBatch {
    int64_t id;
    int64_t first_position;
    std::vector<RawRecord> records;
    std::shared_ptr<const std::string> input_state;
  };
  class RecordSource;
  struct WorkerState;

  void ReaderLoop();
  // Reaches start_position: from the saved reader state, else by replaying
  // records. False when the pipeline stopped meanwhile.
  bool SeekStart(RecordSource* source);
  // The next batch_size records from `source` (fewer at its end), the first
  // at stream position `position`.
  RawBatch ReadBatch(RecordSource* source, int64_t position);
  // Queues `batch` (unless empty) once fewer than `capacity` batches are in
  // flight. False when the pipeline stopped or `batch` was the last.
  bool Enqueue(RawBatch batch, bool last, int64_t capacity);
  void WorkerLoop();
  Batch DecodeBatch(const RawBatch& raw, WorkerState* state) const;
  // Image and label tensors for `n` records (pooled or pinned images).
  Batch AllocateBatch(int64_t n) const;
  // The generic path for one record: decode, preprocess, copy into `out`
  // (output_channels x output_height x output_width).
  void DecodeRecord(const RawRecord& rec, const internal::RecordFormat& format,
                    int64_t position, torch::Tensor out, int64_t* label) const;
  // The photo path for one record: label to *label, the preprocessed image
  // to `out` (output_channels x output_height x output_width floats).
  void DecodePhoto(const RawRecord& rec, int64_t position, WorkerState* state,
                   float* out, int64_t* label) const;

  PipelineOptions options_;
  int64_t position_;
  std::atomic<int64_t> replayed_records_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  // A reader error stands after batch ids < reader_error_id_.
  std::exception_ptr reader_error_;
  int64_t reader_error_id_ = -1;
  std::vector<RawBatch> raw_queue_;         // FIFO of batches to decode
  // Decoded batches' record vectors, handed back to the reader for reuse.
  std::vector<std::vector<RawRecord>> spare_records_;
  // Recycled image buffers of CPU batches (null when pinned).
  std::shared_ptr<internal::BatchBufferPool> image_buffers_;
  // Decoded batches (or their decoding errors), by batch id.
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  std::map<int64_t, Slot> ready_;
  // The first error Next() raised; raised again on later calls.
  std::exception_ptr raised_;
  int64_t next_id_ = 0;                     // next id Next() hands out
  int64_t produced_ = 0;                    // raw batches produced
  int64_t end_id_ = -1;                     // id after the last (one pass)
  std::vector<std::thread> threads_;
};

}  // namespace slimtorch
