#include "slimtorch/io/event_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "slimtorch/core/error.h"
#include "slimtorch/core/fault_injection.h"
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

// Opens `path` for writing only if it does not exist yet; -1 with errno
// EEXIST when it does (or the injected fault's errno).
int OpenExclusive(const std::string& path) {
  const int fault = CheckFileFault(FileOp::kOpen, path);
  if (fault != 0) {
    errno = fault;
    return -1;
  }
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

// Writes all of `data` to `fd`; 0, or the errno of the failure (after a
// short write of *written bytes).
int WriteAll(int fd, const std::string& data, const std::string& path,
             size_t* written) {
  *written = 0;
  size_t allowed = data.size();
  const int fault = CheckFileFault(FileOp::kWrite, path, &allowed);
  while (*written < allowed) {
    const ssize_t n = ::write(fd, data.data() + *written, allowed - *written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    *written += static_cast<size_t>(n);
  }
  return fault;
}

// TensorFlow's default bucket limits (histogram.cc InitDefaultBuckets):
// -DBL_MAX, the negated limits descending, 0, then 1e-12 growing by 10%
// below 1e20, then DBL_MAX.
const std::vector<double>& DefaultBucketLimits() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}

}  // namespace

Histogram MakeHistogram(const at::Tensor& values, const std::string& tag) {
  const std::vector<double>& limits = DefaultBucketLimits();
  const torch::Tensor flat =
      values.detach().to(torch::kCPU, torch::kDouble).contiguous().view(-1);
  const double* v = flat.data_ptr<double>();
  const int64_t n = flat.numel();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = limits.back();
  h.max = -DBL_MAX;
  for (int64_t i = 0; i < n; ++i) {
    const double x = v[i];
    SLIM_CHECK(!std::isnan(x), "Nan in summary histogram for: ", tag);
    SLIM_CHECK(!std::isinf(x), "Infinity in summary histogram for: ", tag);
    const size_t b =
        std::upper_bound(limits.begin(), limits.end(), x) - limits.begin();
    counts[b] += 1.0;
    h.min = std::min(h.min, x);
    h.max = std::max(h.max, x);
    h.sum += x;
    h.sum_squares += x * x;
  }
  h.num = static_cast<double>(n);
  // EncodeToProto without zero buckets: a run of empty buckets goes into
  // the bucket after it.
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i];
    double count = counts[i];
    size_t j = i + 1;
    while (count <= 0 && j < counts.size() && counts[j] <= 0) {
      end = limits[j];
      count = counts[j];
      ++j;
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
    i = j;
  }
  return h;
}

double ZeroFraction(const at::Tensor& values) {
  if (values.numel() == 0) return 0.0;
  return values.detach().eq(0).sum().item<double>() /
         static_cast<double>(values.numel());
}

EventWriter::EventWriter(const std::string& logdir, const std::string& suffix) {
  MakeDirs(logdir);
  const double now = WallTime();
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%010lld", static_cast<long long>(now));
  const std::string stem = JoinPath(
      logdir, std::string("events.out.tfevents.") + secs + "." + Hostname());
  path_ = stem + suffix;
  fd_ = OpenExclusive(path_);
  for (int n = 1; fd_ < 0 && errno == EEXIST && n < 1000; ++n) {
    path_ = stem + "." + std::to_string(n) + suffix;
    fd_ = OpenExclusive(path_);
  }
  SLIM_CHECK(fd_ >= 0, "cannot create event file '", path_,
             "': ", std::strerror(errno));
  proto::Event event;
  event.set_wall_time(now);
  event.set_file_version(kFileVersion);
  WriteEvent(event.SerializeAsString());
  Flush();
}

EventWriter::~EventWriter() {
  try {
    Flush();
  } catch (const std::exception&) {
    // The error was (or will never be) reported by a Flush() of the owner.
  }
  ::close(fd_);
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

void EventWriter::AddHistogram(const std::string& tag,
                               const Histogram& histogram, int64_t step) {
  proto::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  proto::SummaryValue* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  proto::HistogramProto* p = v->mutable_histo();
  p->set_min(histogram.min);
  p->set_max(histogram.max);
  p->set_num(histogram.num);
  p->set_sum(histogram.sum);
  p->set_sum_squares(histogram.sum_squares);
  for (double l : histogram.bucket_limit) p->add_bucket_limit(l);
  for (double c : histogram.bucket) p->add_bucket(c);
  WriteEvent(event.SerializeAsString());
}

void EventWriter::Flush() {
  if (pending_.empty()) {
    CheckNotRemoved();
    return;
  }
  size_t written = 0;
  const int err = WriteAll(fd_, pending_, path_, &written);
  if (err != 0) {
    // Cut a partly written record off, so that readers see whole records.
    const bool cut = ::ftruncate(fd_, static_cast<off_t>(flushed_)) == 0;
    pending_.clear();
    SLIM_FAIL("error writing event file '", path_, "': ", std::strerror(err),
              cut ? StrCat("; it keeps its first ", flushed_,
                           " bytes, whole records")
                  : std::string("; it may end in a partial record"));
  }
  flushed_ += written;
  pending_.clear();
  CheckNotRemoved();
}

void EventWriter::CheckNotRemoved() const {
  struct stat st;
  SLIM_CHECK(::fstat(fd_, &st) == 0 && st.st_nlink > 0, "event file '", path_,
             "' was removed while it was being written (its directory was "
             "deleted?)");
}

void EventWriter::WriteEvent(const std::string& serialized) {
  pending_ += FrameTFRecord(serialized);
  if (pending_.size() >= kMaxPendingBytes) Flush();
}

}  // namespace slimtorch
