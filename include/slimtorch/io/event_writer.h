#pragma once
// TensorBoard event files (events.out.tfevents.<secs>.<host>): TFRecord-framed
// Event protos, starting with file_version "brain.Event:2", then scalar
// and histogram summaries. Readable by TensorBoard and
// tf.compat.v1.train.summary_iterator.
//
// Unlike checkpoints, event files are logs that TensorBoard reads while they
// grow: records are appended and flushed, never renamed into place. A
// failed write cuts the file back to its last whole record, so that a full
// disk leaves a file TensorBoard reads to its end (docs/storage_faults.md).

#include <cstdint>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace slimtorch {

// TensorFlow's histogram of a summary (tensorflow/core/lib/histogram):
// buckets bounded by +-1e-12 * 1.1^k up to 1e20, 0 and +-DBL_MAX, runs of
// empty buckets merged into the next one, as HistogramProto holds them.
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};

// The histogram tf.summary.histogram writes for `values` (any shape, any
// floating or integer dtype, on any device; read as double). Throws naming
// `tag` on a NaN or infinite value, as TensorFlow does.
Histogram MakeHistogram(const at::Tensor& values, const std::string& tag);

// Fraction of exact zeros (tf.nn.zero_fraction).
double ZeroFraction(const at::Tensor& values);

// Writes one event file. Not thread-safe: one writer per thread, or guard it.
// Errors (cannot create, write or flush; the file removed while open) throw
// slimtorch::Error naming the file; the destructor flushes and closes
// without throwing.
class EventWriter {
 public:
  // Creates `logdir` if needed and a new event file in it named
  // "events.out.tfevents.<10-digit unix secs>.<hostname><suffix>"; `suffix`
  // is e.g. ".eval". An existing file is never overwritten: when that name is
  // taken (two writers in the same second), ".<n>" is inserted before
  // `suffix`. The file_version record is written and flushed at once.
  explicit EventWriter(const std::string& logdir,
                       const std::string& suffix = "");
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Appends Event{wall_time, step, summary{value{tag, simple_value}}}.
  // Buffered: visible to readers after Flush() or destruction (or once
  // 1 MiB is pending).
  void AddScalar(const std::string& tag, float value, int64_t step);
  // Appends Event{wall_time, step, summary{value{tag, histo}}}.
  void AddHistogram(const std::string& tag, const Histogram& histogram,
                    int64_t step);
  // Writes the pending records. On a failure the file is cut back to the
  // records of earlier flushes (whole records only) and the pending ones
  // are dropped; throws naming the file and the reason. Also throws when
  // the file was removed (unlinked) since it was opened.
  void Flush();
  const std::string& path() const { return path_; }

 private:
  static constexpr size_t kMaxPendingBytes = size_t{1} << 20;
  void WriteEvent(const std::string& serialized);
  void CheckNotRemoved() const;
  std::string path_;
  int fd_ = -1;
  std::string pending_;  // framed records not written yet
  uint64_t flushed_ = 0;  // bytes on disk, whole records
};

}  // namespace slimtorch
