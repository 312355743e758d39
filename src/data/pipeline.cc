#include "slimtorch/data/pipeline.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <filesystem>
#include <random>

#include "slimtorch/core/error.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/jpeg_decoder.h"
#include "slimtorch/io/tfrecord.h"
#include "example_scan.h"
#include "record_decode.h"

namespace slimtorch {
namespace {

// SplitMix64 finaliser: decorrelates (seed, stream, index) into a seed.
uint64_t Mix(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed ^ (stream * 0x9e3779b97f4a7c15ULL) ^
               (index + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kFileOrderStream = 1;
constexpr uint64_t kShuffleStream = 2;
constexpr uint64_t kExampleStream = 3;

// Appends / reads the little-endian fixed-width fields of a reader state.
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

struct StateReader {
  const std::string& s;
  size_t pos = 0;
  bool ok = true;
  uint64_t U64() {
    if (s.size() - pos < 8 || pos > s.size()) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(s[pos + i])) << (8 * i);
    }
    pos += 8;
    return v;
  }
};

// FNV-1a over bytes.
uint64_t Fnv(uint64_t h, const std::string& bytes) {
  for (char c : bytes) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h;
}

// The reader state written by RecordSource::State() (persisted in training
// checkpoints as "slimtorch/input_state"; do not change without a new
// version): "slimtorch input state 1\n", then u64s: fingerprint, epoch,
// next_file, rr, records_in_epoch, shuffle draws, open file count, then
// (file, byte offset, record index) per open file, buffer size, and
// (file, byte offset, record index) per buffer slot.
constexpr const char* kStateMagic = "slimtorch input state 1\n";
// With --repeated_augmentation (PipelineOptions::repeat): this, then u64s
// repeats, stride, stream positions handed out, then the state above as of
// the start of the current block (whose records are read back on resume).
constexpr const char* kRepeatedStateMagic =
    "slimtorch repeated input state 1\n";
// Shuffle buffers larger than this are not saved (resume replays instead).
constexpr int64_t kMaxSavedBufferRecords = int64_t{1} << 17;

}  // namespace

uint64_t ExampleRngSeed(uint64_t seed, int64_t position) {
  return Mix(seed, kExampleStream, static_cast<uint64_t>(position));
}

// The record stream: epochs of interleaved files, through a shuffle buffer
// when training. Runs on the reader thread only.
//
// The shuffle buffer is filled once, then each record taken from slot
// j = Mix(seed, kShuffleStream, draw) % capacity is replaced in place by the
// next record of the interleaved stream, so the whole stream state is a few
// counters, the open files' offsets and the slots' record locations
// (State()), and a restored source continues exactly.
class Pipeline::RecordSource {
 public:
  explicit RecordSource(const PipelineOptions& o)
      : o_(o),
        buffer_capacity_(o.shuffle_buffer_size > 0 ? o.shuffle_buffer_size
                                                   : 20 * o.batch_size),
        fingerprint_(Fingerprint()) {
    StartEpoch(0);
  }

  // The record at the next stream position; false when a one-pass stream
  // is exhausted.
  bool Next(RawRecord* out) {
    if (!o_.repeat.on()) return NextShuffled(out);
    const ExampleRepeat& repeat = o_.repeat;
    const int64_t block = handed_ / repeat.block();
    if (block != block_index_) {  // a new block: read its examples
      block_state_ = HasState() ? ShuffledState() : std::string();
      block_records_.resize(repeat.stride);
      for (RawRecord& r : block_records_) NextShuffled(&r);
      block_index_ = block;
    }
    const RawRecord& r = block_records_[handed_ % repeat.stride];
    out->data.assign(r.data);
    out->file = r.file;
    out->offset = r.offset;
    out->index = r.index;
    ++handed_;
    return true;
  }

  // Whether State() is worth saving (training, a bounded buffer).
  bool HasState() const {
    return o_.training && buffer_capacity_ <= kMaxSavedBufferRecords;
  }

  // Everything needed to continue after the last record Next() returned.
  std::string State() const {
    if (!o_.repeat.on()) return ShuffledState();
    std::string out = kRepeatedStateMagic;
    for (int64_t v : {o_.repeat.repeats, o_.repeat.stride, handed_}) {
      PutU64(&out, static_cast<uint64_t>(v));
    }
    // At a block's end the next block is unread: the state as it is.
    const bool at_boundary = handed_ % o_.repeat.block() == 0;
    return out + (at_boundary ? ShuffledState() : block_state_);
  }

  // Continues from a State() of a source over the same files with the same
  // options: opens the files at their offsets and reads the buffer's
  // records (and the current block's) back. Returns false with *why
  // (changing nothing) when the state is not one of this stream's.
  bool Restore(const std::string& state, std::string* why) {
    if (!o_.repeat.on()) return RestoreShuffled(state, why);
    const std::string magic = kRepeatedStateMagic;
    if (state.compare(0, magic.size(), magic) != 0) {
      *why = "the saved input state is not one of --repeated_augmentation";
      return false;
    }
    StateReader r{state, magic.size()};
    const int64_t repeats = static_cast<int64_t>(r.U64());
    const int64_t stride = static_cast<int64_t>(r.U64());
    const int64_t handed = static_cast<int64_t>(r.U64());
    if (!r.ok || repeats != o_.repeat.repeats || stride != o_.repeat.stride ||
        handed < 0) {
      *why = "the saved input state repeats examples otherwise";
      return false;
    }
    if (!RestoreShuffled(state.substr(r.pos), why)) return false;
    handed_ = handed;
    block_index_ = -1;
    if (handed % o_.repeat.block() != 0) {  // mid-block: read it back
      const int64_t rest = handed % o_.repeat.block();
      handed_ = handed - rest;
      RawRecord record;
      for (int64_t i = 0; i < rest; ++i) Next(&record);
    }
    return true;
  }

 private:
  // The next record of the shuffled stream (each once).
  bool NextShuffled(RawRecord* out) {
    if (!o_.training) return NextInterleaved(out);
    while (static_cast<int64_t>(buffer_.size()) < buffer_capacity_) {
      buffer_.emplace_back();
      NextInterleaved(&buffer_.back());  // never ends when training
    }
    const size_t j = Mix(o_.seed, kShuffleStream, draws_++) % buffer_.size();
    std::swap(*out, buffer_[j]);
    NextInterleaved(&buffer_[j]);
    return true;
  }

  // The shuffled stream's state after the last NextShuffled().
  std::string ShuffledState() const {
    std::string out = kStateMagic;
    for (uint64_t v : {fingerprint_, static_cast<uint64_t>(epoch_),
                       static_cast<uint64_t>(next_file_),
                       static_cast<uint64_t>(rr_),
                       static_cast<uint64_t>(records_in_epoch_), draws_}) {
      PutU64(&out, v);
    }
    PutU64(&out, open_.size());
    for (const OpenFile& f : open_) {
      for (uint64_t v : {static_cast<uint64_t>(f.file), f.reader->offset(),
                         f.reader->record_index()}) {
        PutU64(&out, v);
      }
    }
    PutU64(&out, buffer_.size());
    for (const RawRecord& r : buffer_) {
      for (uint64_t v : {static_cast<uint64_t>(r.file), r.offset,
                         static_cast<uint64_t>(r.index)}) {
        PutU64(&out, v);
      }
    }
    return out;
  }

  // Restore() of the shuffled stream: opens the files at their offsets and
  // reads the buffer's records back.
  bool RestoreShuffled(const std::string& state, std::string* why) {
    const std::string magic = kStateMagic;
    if (state.compare(0, magic.size(), magic) != 0) {
      *why = "the saved input state has an unknown format";
      return false;
    }
    StateReader r{state, magic.size()};
    if (r.U64() != fingerprint_) {
      *why = "the saved input state is for other files or input options";
      return false;
    }
    const int64_t epoch = static_cast<int64_t>(r.U64());
    const size_t next_file = r.U64(), rr = r.U64();
    const int64_t records_in_epoch = static_cast<int64_t>(r.U64());
    const uint64_t draws = r.U64();
    auto locations = [&](std::vector<RawRecord>* out) {
      const uint64_t n = r.U64();
      if (!r.ok || n > (state.size() - r.pos) / 24) return false;
      out->resize(n);
      for (RawRecord& rec : *out) {
        rec.file = static_cast<int>(r.U64());
        rec.offset = r.U64();
        rec.index = static_cast<int64_t>(r.U64());
        if (rec.file < 0 || rec.file >= static_cast<int>(o_.files.size())) {
          return false;
        }
      }
      return r.ok;
    };
    std::vector<RawRecord> open, buffer;
    if (!locations(&open) || !locations(&buffer) || r.pos != state.size() ||
        next_file > o_.files.size() ||
        static_cast<int64_t>(buffer.size()) > buffer_capacity_) {
      *why = "the saved input state is damaged";
      return false;
    }
    StartEpoch(epoch);
    next_file_ = next_file;
    rr_ = rr;
    records_in_epoch_ = records_in_epoch;
    draws_ = draws;
    open_.clear();
    for (const RawRecord& f : open) {
      open_.push_back({std::make_unique<TFRecordReader>(o_.files[f.file]),
                       f.file});
      open_.back().reader->Seek(f.offset, static_cast<uint64_t>(f.index));
    }
    std::map<int, std::unique_ptr<TFRecordReader>> readers;
    for (RawRecord& rec : buffer) {
      auto& reader = readers[rec.file];
      if (!reader) reader = std::make_unique<TFRecordReader>(o_.files[rec.file]);
      reader->Seek(rec.offset, static_cast<uint64_t>(rec.index));
      SLIM_CHECK(reader->Read(&rec.data), o_.files[rec.file],
                 ": no record ", rec.index, " at byte offset ", rec.offset,
                 " to resume from (the file changed since the checkpoint)");
    }
    buffer_ = std::move(buffer);
    return true;
  }

  // Identifies the stream: the files (names and sizes) and the options the
  // record order depends on.
  uint64_t Fingerprint() const {
    uint64_t h = 0xcbf29ce484222325ULL;
    h = Fnv(h, StrCat(o_.training, " ", o_.seed, " ", o_.num_readers, " ",
                      buffer_capacity_, " ", o_.files.size()));
    if (o_.repeat.on()) {  // (states without it keep their fingerprints)
      h = Fnv(h, StrCat(" repeat ", o_.repeat.repeats, " ", o_.repeat.stride));
    }
    for (const std::string& f : o_.files) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(f, ec);
      h = Fnv(h, StrCat(std::filesystem::path(f).filename().string(), " ",
                        ec ? 0 : size, "\n"));
    }
    return h;
  }

  void StartEpoch(int64_t epoch) {
    epoch_ = epoch;
    order_.resize(o_.files.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int>(i);
    if (o_.training) {
      std::mt19937_64 rng(Mix(o_.seed, kFileOrderStream, epoch_));
      for (size_t i = order_.size(); i > 1; --i) {
        std::swap(order_[i - 1], order_[rng() % i]);
      }
    }
    next_file_ = 0;
    records_in_epoch_ = 0;
  }

  bool NextInterleaved(RawRecord* out) {
    const size_t max_open = o_.training ? std::max(1, o_.num_readers) : 1;
    while (true) {
      while (open_.size() < max_open && next_file_ < order_.size()) {
        int file = order_[next_file_++];
        open_.push_back({std::make_unique<TFRecordReader>(o_.files[file]),
                         file});
      }
      if (open_.empty()) {
        if (!o_.training) return false;
        SLIM_CHECK(records_in_epoch_ > 0, "the dataset files hold no records (",
                   o_.files.size(), " files, first '", o_.files.front(), "')");
        StartEpoch(epoch_ + 1);
        continue;
      }
      size_t idx = rr_ % open_.size();
      OpenFile& f = open_[idx];
      const uint64_t offset = f.reader->offset();
      if (f.reader->Read(&out->data)) {
        out->file = f.file;
        out->offset = offset;
        out->index = static_cast<int64_t>(f.reader->record_index()) - 1;
        rr_ = idx + 1;
        ++records_in_epoch_;
        return true;
      }
      open_.erase(open_.begin() + idx);
      rr_ = idx;
    }
  }

  struct OpenFile {
    std::unique_ptr<TFRecordReader> reader;
    int file;
  };
  const PipelineOptions& o_;
  int64_t buffer_capacity_;
  uint64_t fingerprint_;
  int64_t epoch_ = 0;
  std::vector<int> order_;
  size_t next_file_ = 0;
  std::vector<OpenFile> open_;
  size_t rr_ = 0;
  int64_t records_in_epoch_ = 0;
  uint64_t draws_ = 0;  // shuffle draws so far
  std::vector<RawRecord> buffer_;
  // With o_.repeat: stream positions handed out, the block held (-1: none),
  // its records and the shuffled stream's state before them.
  int64_t handed_ = 0;
  int64_t block_index_ = -1;
  std::vector<RawRecord> block_records_;
  std::string block_state_;
};

Pipeline::Pipeline(PipelineOptions options)
    : options_(std::move(options)), position_(options_.start_position) {
  const auto& o = options_;
  SLIM_CHECK(!o.files.empty(), "input pipeline: no input files");
  SLIM_CHECK(o.batch_size > 0, "--batch_size must be positive, got ",
             o.batch_size);
  SLIM_CHECK(o.num_readers > 0, "--num_readers must be positive, got ",
             o.num_readers);
  SLIM_CHECK(o.num_preprocessing_threads > 0,
             "--num_preprocessing_threads must be positive, got ",
             o.num_preprocessing_threads);
  SLIM_CHECK(o.num_classes > 0, "input pipeline: num_classes must be positive");
  SLIM_CHECK(static_cast<bool>(o.preprocess),
             "input pipeline: no preprocessing function");
  SLIM_CHECK(o.start_position >= 0, "input pipeline: negative start position");
  CheckShard("input pipeline", o.training, o.batch_size, o.shard_offset,
             o.shard_size);
  CheckRepeat("input pipeline", o.training, o.repeat);
  if (!o.pin_memory) {
    image_buffers_ = std::make_shared<internal::BatchBufferPool>(
        sizeof(float) * o.batch_size * o.output_channels * o.output_height *
        o.output_width);
  }
  threads_.emplace_back([this] { ReaderLoop(); });
  for (int i = 0; i < o.num_preprocessing_threads; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Pipeline::ReaderLoop() {
  try {
    RecordSource source(options_);
    if (!SeekStart(&source)) return;
    const int64_t capacity =
        options_.prefetch_batches + options_.num_preprocessing_threads;
    int64_t position = options_.start_position;
    while (true) {
      RawBatch batch = ReadBatch(&source, position);
      position += static_cast<int64_t>(batch.records.size());
      const bool last =
          static_cast<int64_t>(batch.records.size()) < options_.batch_size;
      if (!Enqueue(std::move(batch), last, capacity)) return;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    reader_error_ = std::current_exception();
    reader_error_id_ = produced_;
    cv_.notify_all();
  }
}

bool Pipeline::SeekStart(RecordSource* source) {
  std::string why = "no saved input state";
  if (!options_.resume_state.empty() &&
      source->Restore(options_.resume_state, &why)) {
    LOG(INFO) << "Input: resumed at example " << options_.start_position
              << " from the saved reader state";
    return true;
  }
  if (options_.start_position > 0) {
    LOG(INFO) << "Input: replaying " << options_.start_position
              << " records to resume (" << why << ")";
  }
  RawRecord record;
  for (int64_t i = 0; i < options_.start_position; ++i) {
    if (!source->Next(&record)) break;
    replayed_records_.fetch_add(1, std::memory_order_relaxed);
    if ((i & 1023) == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
    }
  }
  return true;
}

Pipeline::RawBatch Pipeline::ReadBatch(RecordSource* source,
                                       int64_t position) {
  RawBatch batch;
  batch.first_position = position;
  {
    // Record strings a worker gave back: reading into them allocates
    // nothing once they are as long as the longest record.
    std::lock_guard<std::mutex> lock(mu_);
    if (!spare_records_.empty()) {
      batch.records = std::move(spare_records_.back());
      spare_records_.pop_back();
    }
  }
  size_t filled = 0;
  while (static_cast<int64_t>(filled) < options_.batch_size) {
    if (filled == batch.records.size()) batch.records.emplace_back();
    if (!source->Next(&batch.records[filled])) break;
    ++filled;
  }
  batch.records.resize(filled);
  if (source->HasState()) {
    batch.input_state = std::make_shared<const std::string>(source->State());
  }
  return batch;
}

bool Pipeline::Enqueue(RawBatch batch, bool last, int64_t capacity) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stop_ || produced_ - next_id_ < capacity; });
  if (stop_) return false;
  if (!batch.records.empty()) {
    batch.id = produced_++;
    raw_queue_.push_back(std::move(batch));
  }
  if (last) end_id_ = produced_;
  cv_.notify_all();
  return !last;
}

// What a worker keeps between records, so that steady-state decoding
// allocates nothing.
struct Pipeline::WorkerState {
  JpegDecoder jpeg;
  PhotoScratch scratch;
  internal::ExampleScan scan;
};

void Pipeline::WorkerLoop() {
  WorkerState state;
  while (true) {
    RawBatch raw;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !raw_queue_.empty(); });
      if (stop_) return;
      raw = std::move(raw_queue_.front());
      raw_queue_.erase(raw_queue_.begin());
    }
    Slot slot;
    try {
      slot.batch = DecodeBatch(raw, &state);
    } catch (...) {
      slot.error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    ready_.emplace(raw.id, std::move(slot));
    // The record strings go back to the reader for reuse.
    if (spare_records_.size() < 4) {
      spare_records_.push_back(std::move(raw.records));
    }
    cv_.notify_all();
  }
}

namespace internal {

// Recycles the image buffers of CPU batches. A fresh buffer per batch (19
// MB at 32x3x224x224) is mapped anew and costs thousands of page faults: 15%
// of the photo path's time before this pool. A tensor's deleter hands its
// buffer back (keeping the pool alive); the pool keeps at most the peak
// number of batches in flight.
class BatchBufferPool : public std::enable_shared_from_this<BatchBufferPool> {
 public:
  explicit BatchBufferPool(size_t bytes) : bytes_((bytes + 63) / 64 * 64) {}
  ~BatchBufferPool() {
    for (void* p : free_) std::free(p);
  }
  BatchBufferPool(const BatchBufferPool&) = delete;
  BatchBufferPool& operator=(const BatchBufferPool&) = delete;

  // A float tensor of `sizes` (at most `bytes` in all) on a pooled buffer.
  torch::Tensor Take(at::IntArrayRef sizes) {
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        p = free_.back();
        free_.pop_back();
      }
    }
    if (p == nullptr) {
      p = std::aligned_alloc(64, bytes_);
      if (p == nullptr) throw std::bad_alloc();
    }
    std::shared_ptr<BatchBufferPool> self = shared_from_this();
    return torch::from_blob(
        p, sizes, [self](void* q) { self->Give(q); },
        torch::TensorOptions().dtype(torch::kFloat32));
  }

 private:
  void Give(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(p);
  }

  const size_t bytes_;
  std::mutex mu_;
  std::vector<void*> free_;
};

}  // namespace internal

void CheckRepeat(const char* source, bool training,
                 const ExampleRepeat& repeat) {
  SLIM_CHECK(repeat.repeats >= 1 && repeat.stride >= 1, source,
             ": --repeated_augmentation=", repeat.repeats, " (stride ",
             repeat.stride, ") must be >= 1");
  SLIM_CHECK(training || !repeat.on(), source,
             ": --repeated_augmentation is for training only");
}

void CheckShard(const char* source, bool training, int64_t batch_size,
                int64_t shard_offset, int64_t shard_size) {
  SLIM_CHECK(
      shard_size == 0 || (training && shard_size > 0 && shard_offset >= 0 &&
                          shard_offset + shard_size <= batch_size),
      source, ": shard [", shard_offset, ", ", shard_offset + shard_size,
      ") of batches of ", batch_size,
      (training ? "" : " (sharding is for training only)"));
}

Batch Pipeline::DecodeBatch(const RawBatch& raw, WorkerState* state) const {
  const auto& o = options_;
  // The shard of the batch this pipeline hands out: records [first, first +
  // n) at stream positions raw.first_position + first + i.
  const int64_t count = static_cast<int64_t>(raw.records.size());
  const int64_t first = o.shard_size > 0 ? o.shard_offset : 0;
  const int64_t n = o.shard_size > 0 ? o.shard_size : count;
  SLIM_CHECK(first + n <= count, "a batch of ", count,
             " records has no shard [", first, ", ", first + n, ")");
  const int64_t position0 = raw.first_position + first;
  Batch batch = AllocateBatch(n);
  batch.first_position = position0;
  batch.end_position = raw.first_position + count;
  batch.input_state = raw.input_state;
  int64_t* labels = batch.labels.data_ptr<int64_t>();
  if (o.photo) {
    const int64_t image_floats =
        o.output_channels * o.output_height * o.output_width;
    float* images = batch.images.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      DecodePhoto(raw.records[first + i], position0 + i, state,
                  images + i * image_floats, &labels[i]);
    }
    return batch;
  }
  const internal::RecordFormat format = internal::RecordFormatOf(o);
  for (int64_t i = 0; i < n; ++i) {
    DecodeRecord(raw.records[first + i], format, position0 + i,
                 batch.images[i], &labels[i]);
  }
  return batch;
}

Batch Pipeline::AllocateBatch(int64_t n) const {
  const auto& o = options_;
  Batch batch;
  auto options = torch::TensorOptions().pinned_memory(o.pin_memory);
  if (image_buffers_ != nullptr) {
    batch.images = image_buffers_->Take(
        {n, o.output_channels, o.output_height, o.output_width});
  } else {
    batch.images =
        torch::empty({n, o.output_channels, o.output_height, o.output_width},
                     options.dtype(torch::kFloat32));
  }
  batch.labels = torch::empty({n}, options.dtype(torch::kInt64));
  return batch;
}

void Pipeline::DecodeRecord(const RawRecord& rec,
                            const internal::RecordFormat& format,
                            int64_t position, torch::Tensor out,
                            int64_t* label) const {
  const auto& o = options_;
  std::string context = StrCat(o.files[rec.file], " record ", rec.index);
  int64_t parsed_label = 0;
  ImageExample ex =
      internal::ParseRecord(rec.data, format, context, &parsed_label);
  *label = parsed_label;
  Image image = internal::DecodeRecordImage(ex, format, context);
  torch::Tensor hwc = torch::from_blob(
      image.pixels.data(), {image.height, image.width, image.channels},
      torch::kUInt8);
  std::mt19937_64 rng(ExampleRngSeed(o.seed, position));
  torch::Tensor image_out = o.preprocess(hwc, rng);
  SLIM_CHECK(image_out.dim() == 3 && image_out.size(0) == o.output_channels &&
                 image_out.size(1) == o.output_height &&
                 image_out.size(2) == o.output_width,
             context, ": preprocessing produced ", image_out.sizes(),
             ", expected [", o.output_channels, ", ", o.output_height, ", ",
             o.output_width, "]");
  out.copy_(image_out);
}

void Pipeline::DecodePhoto(const RawRecord& rec, int64_t position,
                           WorkerState* state, float* out,
                           int64_t* label) const {
  const auto& o = options_;
  const int channels = o.decode_channels;
  // Errors get the record's name only when they happen (no string is built
  // per record).
  try {
    internal::ExampleScan& scan = state->scan;
    internal::ScanExample(rec.data, "", &scan);
    const int64_t l = scan.label - o.labels_offset;
    SLIM_CHECK(l >= 0 && l < o.num_classes, ": label ", scan.label,
               (o.labels_offset ? StrCat(" - labels_offset ", o.labels_offset)
                                : std::string()),
               " is outside [0, ", o.num_classes, ")");
    *label = l;
    std::mt19937_64 rng(ExampleRngSeed(o.seed, position));
    static const std::vector<std::array<float, 4>> kNoBoxes;
    const auto& boxes = o.use_bounding_boxes ? scan.boxes : kNoBoxes;
    const auto* bytes = reinterpret_cast<const uint8_t*>(scan.encoded.data());
    const std::string_view format =
        scan.format.empty() ? std::string_view(o.default_format) : scan.format;
    if (format != "raw" && format != "RAW" &&
        JpegDecoder::IsJpeg(bytes, scan.encoded.size())) {
      const JpegDecoder::Header header =
          state->jpeg.ReadHeader(bytes, scan.encoded.size(), "");
      const PhotoPlan plan =
          o.photo->Plan(header.height, header.width, rng, boxes);
      const image_ops::CropBox& src = plan.source;
      int64_t stride = 0;
      const uint8_t* pixels = state->jpeg.DecodeWindowInPlace(
          bytes, scan.encoded.size(), src.y, src.x, src.height, src.width,
          channels, &stride, "");
      o.photo->Apply(plan, pixels, stride, channels, out, &state->scratch);
      return;
    }
    // PNG and raw records: decoded whole (the generic decoder).
    ImageExample ex;
    ex.encoded.assign(scan.encoded);
    ex.format.assign(format);
    ex.height = scan.height;
    ex.width = scan.width;
    internal::RecordFormat record_format;
    record_format.decode_channels = channels;
    const Image image = internal::DecodeRecordImage(ex, record_format, "");
    const PhotoPlan plan = o.photo->Plan(image.height, image.width, rng, boxes);
    const int64_t stride = static_cast<int64_t>(image.width) * channels;
    o.photo->Apply(plan,
                   image.pixels.data() + plan.source.y * stride +
                       plan.source.x * channels,
                   stride, channels, out, &state->scratch);
  } catch (const Error& e) {
    const std::string what = e.what();
    SLIM_FAIL(o.files[rec.file], " record ", rec.index,
              what.rfind(": ", 0) == 0 ? "" : ": ", what);
  }
}

std::optional<Batch> Pipeline::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (raised_) std::rethrow_exception(raised_);
  cv_.wait(lock, [&] {
    return ready_.count(next_id_) > 0 ||
           (reader_error_ && next_id_ >= reader_error_id_) ||
           (end_id_ >= 0 && next_id_ >= end_id_);
  });
  auto it = ready_.find(next_id_);
  if (it == ready_.end()) {
    if (reader_error_ && next_id_ >= reader_error_id_) {
      raised_ = reader_error_;
      std::rethrow_exception(raised_);
    }
    return std::nullopt;
  }
  if (it->second.error) {
    raised_ = it->second.error;
    std::rethrow_exception(raised_);
  }
  Batch batch = std::move(it->second.batch);
  ready_.erase(it);
  ++next_id_;
  position_ = batch.end_position;
  cv_.notify_all();
  return batch;
}

std::pair<int64_t, int64_t> BatchSource::AdvanceCapturedBatch() {
  SLIM_FAIL("this input cannot make batches on the device alone");
}

Batch BatchSource::CapturedBatch() {
  SLIM_FAIL("this input cannot make batches on the device alone");
}

}  // namespace slimtorch
