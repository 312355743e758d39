#include "slimtorch/train/train_hooks.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

// ------------------------------------------------------------------ stop

StopHook::StopHook(const std::atomic<bool>* requested,
                   std::function<bool(bool)> agree)
    : requested_(requested), agree_(std::move(agree)) {}

void StopHook::BeforeStep(StepPlan* plan) {
  bool stop = requested_ != nullptr && requested_->load();
  if (agree_) stop = agree_(stop);
  if (!stop) return;
  LOG(INFO) << "Stop requested: saving at global step "
            << plan->global_step - 1;
  plan->stop = true;
}

// --------------------------------------------------------------- profile

ProfileHook::ProfileHook(StepRange steps, torch::Device device, std::string dir)
    : profiler_(steps, device, std::move(dir)) {}

void ProfileHook::BeforeStep(StepPlan* plan) {
  profiler_.Before(plan->global_step);
}

void ProfileHook::AfterStep(const StepStats& step) {
  profiler_.After(step.global_step);
}

void ProfileHook::LoopEnded(int64_t global_step) {
  profiler_.Finish(global_step);
}

// --------------------------------------------------------------- logging

ProgressHook::ProgressHook(std::FILE* out, int64_t max_steps, int64_t every_n,
                           double interval_secs)
    : out_(out),
      max_steps_(max_steps),
      every_n_(every_n),
      interval_secs_(interval_secs) {}

std::string ProgressHook::Line(int64_t step, int64_t max_steps,
                               double examples_per_sec, double steps_per_sec) {
  char line[160];
  if (max_steps <= 0) {
    std::snprintf(line, sizeof(line), "step %lld, %.1f examples/s",
                  static_cast<long long>(step), examples_per_sec);
    return line;
  }
  const double left =
      static_cast<double>(std::max<int64_t>(0, max_steps - step));
  const auto eta = static_cast<int64_t>(
      steps_per_sec > 0 ? left / steps_per_sec + 0.5 : 0.0);
  std::snprintf(
      line, sizeof(line),
      "step %lld/%lld (%.1f%%), %.1f examples/s, ETA %lld:%02lld:%02lld",
      static_cast<long long>(step), static_cast<long long>(max_steps),
      100.0 * static_cast<double>(step) / static_cast<double>(max_steps),
      examples_per_sec, static_cast<long long>(eta / 3600),
      static_cast<long long>(eta / 60 % 60), static_cast<long long>(eta % 60));
  return line;
}

void ProgressHook::AfterStep(const StepStats& s) {
  ++steps_;
  examples_ += s.examples;
  const auto now = Clock::now();
  if (s.global_step % every_n_ == 0) {
    // The step log comes next: leave it a clean line.
    if (drawn_) std::fputs("\r\033[K", out_);
    std::fflush(out_);
    drawn_ = false;
    return;
  }
  if (drawn_ && Seconds(last_draw_, now) < interval_secs_) return;
  const double secs = std::max(Seconds(start_, now), 1e-9);
  std::fprintf(
      out_, "\r\033[K%s",
      Line(s.global_step, max_steps_, static_cast<double>(examples_) / secs,
           static_cast<double>(steps_) / secs)
          .c_str());
  std::fflush(out_);
  drawn_ = true;
  last_draw_ = now;
}

void ProgressHook::LoopEnded(int64_t) {
  if (!drawn_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

bool ProgressWanted(const std::string& flag) {
  if (flag == "on") return true;
  if (flag == "off") return false;
  SLIM_CHECK(flag == "auto", "--progress=", flag,
             " is not one of auto (on a terminal), on, off");
  return isatty(fileno(stderr)) != 0;
}

LoggingHook::LoggingHook(int64_t every_n) : every_n_(every_n) {}

void LoggingHook::AfterStep(const StepStats& s) {
  ++window_steps_;
  if (s.global_step % every_n_ != 0) return;
  const auto now = Clock::now();
  const double secs =
      Seconds(window_start_, now) / std::max<int64_t>(1, window_steps_);
  char line[160];
  std::snprintf(line, sizeof(line),
                "global step %lld: loss = %.4f (%.3f sec/step, %.1f "
                "examples/sec)",
                static_cast<long long>(s.global_step), s.loss, secs,
                s.examples / std::max(secs, 1e-9));
  LOG(INFO) << line;
  window_start_ = now;
  window_steps_ = 0;
}

// ------------------------------------------------------------- summaries

SummaryHook::SummaryHook(double every_secs, NamedTensors vars)
    : every_secs_(every_secs), vars_(std::move(vars)) {}

void SummaryHook::Begin(const HookContext& context) {
  events_ = context.summaries;
}

void SummaryHook::BeforeStep(StepPlan* plan) {
  armed_ = events_ != nullptr && Seconds(last_, Clock::now()) >= every_secs_;
  plan->summarize = plan->summarize || armed_;
}

void SummaryHook::AfterStep(const StepStats& s) {
  if (!armed_) return;
  armed_ = false;
  const int64_t step = s.global_step;
  EventWriter& events = *events_;
  events.AddScalar("total_loss", static_cast<float>(s.loss), step);
  events.AddScalar("losses/softmax_cross_entropy_loss",
                   static_cast<float>(s.cross_entropy), step);
  if (s.regularization) {
    events.AddScalar("regularization_loss",
                     static_cast<float>(*s.regularization), step);
  }
  events.AddScalar("learning_rate", static_cast<float>(s.learning_rate), step);
  // model_deploy scales each clone's loss by 1 / num_clones.
  const size_t n = s.replica_losses.size();
  for (size_t k = 0; k < n; ++k) {
    events.AddScalar(StrCat("Losses/clone_", k, "/clone_loss"),
                     static_cast<float>(s.replica_losses[k] / n), step);
  }
  for (const auto& [name, t] : s.end_points) {
    events.AddHistogram("activations/" + name, MakeHistogram(t, name), step);
    events.AddScalar("sparsity/" + name, static_cast<float>(ZeroFraction(t)),
                     step);
  }
  for (const auto& v : vars_) {
    events.AddHistogram(v.name, MakeHistogram(v.tensor, v.name), step);
  }
  events.Flush();
  last_ = Clock::now();
}

void SummaryHook::End(const StepStats& last) {
  if (events_ == nullptr) return;
  events_->AddScalar("total_loss", static_cast<float>(last.loss),
                     last.global_step);
  events_->Flush();
}

// --------------------------------------------------------------- metrics

MetricHook::MetricHook(const std::vector<MetricFactory>& factories,
                       int64_t num_classes)
    : metrics_(MakeMetrics(factories, num_classes, "train/")) {}

void MetricHook::Begin(const HookContext& context) {
  events_ = context.summaries;
}

void MetricHook::BeforeStep(StepPlan* plan) {
  armed_ = events_ != nullptr && !metrics_.empty() && plan->summarize;
  plan->keep_outputs = plan->keep_outputs || armed_;
}

void MetricHook::AfterStep(const StepStats& s) {
  if (!armed_) return;
  armed_ = false;
  SLIM_CHECK(s.logits.defined() && s.labels.defined(), "the summary step ",
             s.global_step, " kept no outputs for the training metrics");
  for (const auto& metric : metrics_) {
    metric->Reset();
    metric->Update(s.logits, s.labels);
    events_->AddScalar("train/" + metric->name(),
                       static_cast<float>(metric->Value()), s.global_step);
  }
  events_->Flush();
}

// ---------------------------------------------------------------- saving

MemoryTrimHook::MemoryTrimHook(double every_secs) : every_secs_(every_secs) {}

void MemoryTrimHook::AfterStep(const StepStats&) {
  if (every_secs_ <= 0 || Seconds(last_, Clock::now()) < every_secs_) return;
  last_ = Clock::now();
  TrimCpuAllocatorCache();
  ReleaseFreeHeapMemory();
}

SaveHook::SaveHook(double every_secs, std::function<void()> save)
    : every_secs_(every_secs), save_(std::move(save)) {}

void SaveHook::AfterStep(const StepStats&) {
  if (Seconds(last_, Clock::now()) < every_secs_) return;
  save_();
  last_ = Clock::now();
}

}  // namespace slimtorch
