#include "slimtorch/io/event_writer.h"

#include <fcntl.h>
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
