#pragma once
// TensorBoard event files (events.out.tfevents.<secs>.<host>): TFRecord-framed
// Event protos, starting with file_version "brain.Event:2", then scalar
// summaries. Readable by TensorBoard and tf.compat.v1.train.summary_iterator.
//
// Unlike checkpoints, event files are logs that TensorBoard reads while they
// grow: records are appended and flushed, never renamed into place.

#include <cstdint>
#include <cstdio>
#include <string>

namespace slimtorch {

class EventWriter {
 public:
  // Creates `logdir` if needed and opens a new event file in it.
  // `suffix` is appended to the file name (e.g. ".eval").
  explicit EventWriter(const std::string& logdir,
                       const std::string& suffix = "");
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void AddScalar(const std::string& tag, float value, int64_t step);
  void Flush();
  const std::string& path() const { return path_; }

 private:
  void WriteEvent(const std::string& serialized);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace slimtorch
