#pragma once
// TensorBoard event files (events.out.tfevents.<secs>.<host>): TFRecord-framed
// Event protos, starting with file_version "brain.Event:2", then scalar
// and histogram summaries. Readable by TensorBoard and
// tf.compat.v1.train.summary_iterator.
//
// Unlike checkpoints, event files are logs that TensorBoard reads while they
// grow: records are appended and flushed, never renamed into place.

#include <cstdint>
#include <cstdio>
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
// Errors (cannot create, write or flush) throw slimtorch::Error naming the
// file; the destructor flushes and closes without throwing.
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
  // Buffered: visible to readers after Flush() or destruction.
  void AddScalar(const std::string& tag, float value, int64_t step);
  // Appends Event{wall_time, step, summary{value{tag, histo}}}.
  void AddHistogram(const std::string& tag, const Histogram& histogram,
                    int64_t step);
  void Flush();
  const std::string& path() const { return path_; }

 private:
  void WriteEvent(const std::string& serialized);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace slimtorch
