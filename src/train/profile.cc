#include "slimtorch/train/profile.h"

#include <ATen/record_function.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

namespace kineto = torch::autograd::profiler;
namespace pimpl = torch::profiler::impl;

double NowSecs() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double DurationMicros(const kineto::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<double>(e.durationNs()) / 1000.0;
#else
  return static_cast<double>(e.durationUs());
#endif
}

double StartMicros(const kineto::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<double>(e.startNs()) / 1000.0;
#else
  return static_cast<double>(e.startUs());
#endif
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// A Chrome trace of the profiler's events, for a LibTorch whose profiler
// records CPU ops without Kineto (Debian's 1.13), which cannot save one.
std::string ChromeTrace(const std::vector<kineto::KinetoEvent>& events) {
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  char num[96];
  for (const auto& e : events) {
    if (!first) out += ",\n";
    first = false;
    std::snprintf(num, sizeof(num),
                  "\"ts\": %.3f, \"dur\": %.3f, \"tid\": %llu", StartMicros(e),
                  DurationMicros(e),
                  static_cast<unsigned long long>(e.startThreadId()));
    const bool user =
        e.scope() == static_cast<uint8_t>(at::RecordScope::USER_SCOPE);
    out += std::string("{\"ph\": \"X\", \"cat\": \"") +
           (user ? "user_annotation" : "cpu_op") +
           "\", \"name\": " + JsonString(e.name()) + ", \"pid\": 0, " + num +
           "}";
  }
  return out + "\n]}\n";
}

std::set<pimpl::ActivityType> Activities(const torch::Device& device) {
  std::set<pimpl::ActivityType> a{pimpl::ActivityType::CPU};
  if (device.is_cuda()) a.insert(pimpl::ActivityType::CUDA);
  return a;
}

pimpl::ProfilerConfig Config() {
  return pimpl::ProfilerConfig(pimpl::ProfilerState::KINETO);
}

void SyncDevice(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

bool ParseStep(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::stoll(s);
  return true;
}

}  // namespace

StepRange ParseProfileSteps(const std::string& flag) {
  StepRange r;
  if (flag.empty()) return r;
  const auto comma = flag.find(',');
  const std::string a = flag.substr(0, comma);
  const std::string b = comma == std::string::npos ? a : flag.substr(comma + 1);
  SLIM_CHECK(ParseStep(a, &r.first) && ParseStep(b, &r.last) && r.first >= 1 &&
                 r.last >= r.first,
             "--profile_steps=", flag,
             ": expected a global step N or a range A,B of them "
             "(1 <= A <= B), e.g. --profile_steps=100,119");
  return r;
}

bool ProfilerAvailable() {
  static const bool available = [] {
    const std::set<pimpl::ActivityType> cpu{pimpl::ActivityType::CPU};
    // (Kineto starts no trace unprepared.)
    kineto::prepareProfiler(Config(), cpu);
    kineto::enableProfiler(Config(), cpu);
    {
      RECORD_USER_SCOPE("slimtorch_profiler_probe");
      (void)(torch::ones({2}) + 1);
    }
    const auto result = kineto::disableProfiler();
    return result != nullptr && !result->events().empty();
  }();
  return available;
}

namespace {

struct Sum {
  double micros = 0;
  int64_t count = 0;
};

// The time each of the side's events counts: a kernel's duration, a CPU
// op's self time (sorted by thread, then start, the longer first, an op's
// caller is the innermost open op that contains it).
std::vector<double> OwnMicros(const std::vector<const ProfiledEvent*>& side,
                              bool device) {
  std::vector<double> own(side.size());
  for (size_t i = 0; i < side.size(); ++i) own[i] = side[i]->micros;
  if (device) return own;
  std::vector<size_t> order(side.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ProfiledEvent& x = *side[a];
    const ProfiledEvent& y = *side[b];
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_micros != y.start_micros) {
      return x.start_micros < y.start_micros;
    }
    return x.micros > y.micros;
  });
  std::vector<size_t> open;  // indices into side, innermost last
  for (size_t i : order) {
    const ProfiledEvent& e = *side[i];
    while (!open.empty()) {
      const ProfiledEvent& top = *side[open.back()];
      if (top.thread == e.thread &&
          e.start_micros < top.start_micros + top.micros) {
        break;
      }
      open.pop_back();
    }
    if (!open.empty()) own[open.back()] -= e.micros;
    open.push_back(i);
  }
  return own;
}

// One row: time per step, share of `total`, calls per step, the name.
std::string TableRow(const std::string& name, const Sum& s, double total,
                     int64_t steps) {
  char line[512];
  std::string shown = name.size() > 110 ? name.substr(0, 107) + "..." : name;
  std::snprintf(line, sizeof(line), "%9.1f %6.1f%% %8.1f  %s\n",
                s.micros / steps, total > 0 ? 100.0 * s.micros / total : 0.0,
                static_cast<double>(s.count) / steps, shown.c_str());
  return line;
}

// The header, then a row per name, most time first: `rows` of them and
// one for all the others.
std::string TableRows(const std::map<std::string, Sum>& by_name, double total,
                      int64_t steps, int rows, bool device) {
  std::vector<std::pair<std::string, Sum>> sorted(by_name.begin(),
                                                  by_name.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& x, const auto& y) {
                     return x.second.micros > y.second.micros;
                   });
  char line[512];
  std::snprintf(line, sizeof(line), "%9s %7s %8s  %s\n", "us/step", "share",
                "calls",
                device ? "device kernel / copy / fill" : "CPU op (self time)");
  std::string out = line;
  Sum rest;
  int64_t rest_names = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (static_cast<int>(i) < rows) {
      out += TableRow(sorted[i].first, sorted[i].second, total, steps);
    } else {
      rest.micros += sorted[i].second.micros;
      rest.count += sorted[i].second.count;
      ++rest_names;
    }
  }
  if (rest_names > 0) {
    out += TableRow(StrCat("(", rest_names, " others)"), rest, total, steps);
  }
  return out;
}

// The summary line: time and calls per step against the wall time.
std::string TotalsLine(const std::map<std::string, Sum>& by_name,
                       double total, int64_t steps, double wall_secs,
                       bool device) {
  const double wall_us = wall_secs * 1e6 / steps;
  int64_t calls = 0;
  for (const auto& kv : by_name) calls += kv.second.count;
  char line[512];
  if (device) {
    std::snprintf(line, sizeof(line),
                  "%9.1f us/step in %.1f kernels a step; wall %.1f us/step, "
                  "device busy %.1f%%\n",
                  total / steps, static_cast<double>(calls) / steps, wall_us,
                  wall_us > 0 ? 100.0 * (total / steps) / wall_us : 0.0);
  } else {
    std::snprintf(line, sizeof(line),
                  "%9.1f us/step of CPU ops' own time in %.1f ops a step (all "
                  "threads); wall %.1f us/step\n",
                  total / steps, static_cast<double>(calls) / steps, wall_us);
  }
  return line;
}

}  // namespace

std::string ProfileTable(const std::vector<ProfiledEvent>& events, bool device,
                         int64_t steps, double wall_secs, int rows) {
  std::vector<const ProfiledEvent*> side;
  for (const auto& e : events) {
    if (e.on_device == device) side.push_back(&e);
  }
  const std::vector<double> own = OwnMicros(side, device);
  std::map<std::string, Sum> by_name;
  double total = 0;
  for (size_t i = 0; i < side.size(); ++i) {
    Sum& s = by_name[side[i]->name];
    s.micros += own[i];
    ++s.count;
    total += own[i];
  }
  steps = std::max<int64_t>(steps, 1);
  return TableRows(by_name, total, steps, rows, device) +
         TotalsLine(by_name, total, steps, wall_secs, device);
}

StepProfiler::StepProfiler(StepRange range, torch::Device device,
                           std::string dir)
    : range_(range), device_(device), dir_(std::move(dir)) {
  SLIM_CHECK(ProfilerAvailable(), "--profile_steps=", range_.first, ",",
             range_.last, ": this LibTorch's profiler records nothing");
}

StepProfiler::~StepProfiler() {
  if (active_) {
    try {
      kineto::disableProfiler();
    } catch (...) {
    }
  }
}

void StepProfiler::Before(int64_t step) {
  if (done_ || active_ || range_.empty()) return;
  if (step < range_.first) return;
  if (step > range_.last) {  // resumed past the range
    done_ = true;
    return;
  }
  SyncDevice(device_);
  kineto::prepareProfiler(Config(), Activities(device_));
  kineto::enableProfiler(Config(), Activities(device_));
  active_ = true;
  first_step_ = step;
  start_secs_ = NowSecs();
}

void StepProfiler::After(int64_t step) {
  if (active_ && step >= range_.last) Stop(step);
}

void StepProfiler::Finish(int64_t last_step) {
  if (active_) Stop(last_step);
}

void StepProfiler::Stop(int64_t last_step) {
  SyncDevice(device_);
  const double wall = NowSecs() - start_secs_;
  auto result = kineto::disableProfiler();
  active_ = false;
  done_ = true;
  const int64_t steps = last_step - first_step_ + 1;
  std::vector<ProfiledEvent> events;
  events.reserve(result->events().size());
  for (const auto& e : result->events()) {
    const bool device = e.deviceType() != c10::DeviceType::CPU;
    // On the device only kernels, copies and fills (Kineto's activity types
    // GPU_MEMCPY, GPU_MEMSET, CONCURRENT_KERNEL), not the annotations that
    // mirror the CPU's scopes there.
    if (device && (e.activityType() < 3 || e.activityType() > 5)) continue;
    events.push_back({e.name(), device, DurationMicros(e), StartMicros(e),
                      e.startThreadId()});
  }
  std::filesystem::create_directories(dir_);
  trace_path_ =
      StrCat(dir_, "/steps_", first_step_, "-", last_step, ".pt.trace.json");
  const std::string tmp = trace_path_ + ".tmp";
  try {
    result->save(tmp);
    std::filesystem::rename(tmp, trace_path_);
  } catch (const c10::Error&) {  // no Kineto: the CPU ops, written here
    std::filesystem::remove(tmp);
    WriteFileAtomically(trace_path_, ChromeTrace(result->events()));
  }
  LOG(INFO) << "Profiled global steps " << first_step_ << "-" << last_step
            << " (" << steps << " steps, " << wall * 1e3
            << " ms); trace (chrome://tracing, ui.perfetto.dev): "
            << trace_path_ << "\n"
            << (device_.is_cuda() ? ProfileTable(events, true, steps, wall)
                                  : std::string())
            << ProfileTable(events, false, steps, wall, 15);
}

}  // namespace slimtorch
