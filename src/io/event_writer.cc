#include "slimtorch/io/event_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/proto/event.pb.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace {

constexpr const char* kFileVersion = "brain.Event:2";

double WallTime() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
             .count() /
         1e6;
}

std::string Hostname() {
  char buf[256];
  if (::gethostname(buf, sizeof(buf)) != 0) return "localhost";
  buf[sizeof(buf) - 1] = '\0';
  return buf;
}

// Opens `path` for writing only if it does not exist yet; nullptr with errno
// EEXIST when it does.
std::FILE* OpenExclusive(const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) ::close(fd);
  return f;
}

}  // namespace

EventWriter::EventWriter(const std::string& logdir, const std::string& suffix) {
  MakeDirs(logdir);
  const double now = WallTime();
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%010lld", static_cast<long long>(now));
  const std::string stem = JoinPath(
      logdir, std::string("events.out.tfevents.") + secs + "." + Hostname());
  path_ = stem + suffix;
  file_ = OpenExclusive(path_);
  for (int n = 1; file_ == nullptr && errno == EEXIST && n < 1000; ++n) {
    path_ = stem + "." + std::to_string(n) + suffix;
    file_ = OpenExclusive(path_);
  }
  SLIM_CHECK(file_ != nullptr, "cannot create event file '", path_,
             "': ", std::strerror(errno));
  proto::Event event;
  event.set_wall_time(now);
  event.set_file_version(kFileVersion);
  WriteEvent(event.SerializeAsString());
  Flush();
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::AddScalar(const std::string& tag, float value, int64_t step) {
  proto::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  proto::SummaryValue* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  WriteEvent(event.SerializeAsString());
}

void EventWriter::Flush() {
  SLIM_CHECK(std::fflush(file_) == 0, "error flushing event file '", path_,
             "': ", std::strerror(errno));
}

void EventWriter::WriteEvent(const std::string& serialized) {
  const std::string framed = FrameTFRecord(serialized);
  SLIM_CHECK(
      std::fwrite(framed.data(), 1, framed.size(), file_) == framed.size(),
      "error writing event file '", path_, "': ", std::strerror(errno));
}

}  // namespace slimtorch
