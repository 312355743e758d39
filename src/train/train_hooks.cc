#include "slimtorch/train/train_hooks.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>

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

ProfileHook::ProfileHook(StepRange steps, torch::Device device,
                         std::string dir)
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

SummaryHook::SummaryHook(const std::string& dir, double every_secs,
                         NamedTensors vars)
    : events_(dir), every_secs_(every_secs), vars_(std::move(vars)) {}

void SummaryHook::BeforeStep(StepPlan* plan) {
  armed_ = Seconds(last_, Clock::now()) >= every_secs_;
  plan->summarize = plan->summarize || armed_;
}

void SummaryHook::AfterStep(const StepStats& s) {
  if (!armed_) return;
  armed_ = false;
  const int64_t step = s.global_step;
  events_.AddScalar("total_loss", static_cast<float>(s.loss), step);
  events_.AddScalar("losses/softmax_cross_entropy_loss",
                    static_cast<float>(s.cross_entropy), step);
  if (s.regularization) {
    events_.AddScalar("regularization_loss",
                      static_cast<float>(*s.regularization), step);
  }
  events_.AddScalar("learning_rate", static_cast<float>(s.learning_rate),
                    step);
  // model_deploy scales each clone's loss by 1 / num_clones.
  const size_t n = s.replica_losses.size();
  for (size_t k = 0; k < n; ++k) {
    events_.AddScalar(StrCat("Losses/clone_", k, "/clone_loss"),
                      static_cast<float>(s.replica_losses[k] / n), step);
  }
  for (const auto& [name, t] : s.end_points) {
    events_.AddHistogram("activations/" + name, MakeHistogram(t, name), step);
    events_.AddScalar("sparsity/" + name, static_cast<float>(ZeroFraction(t)),
                      step);
  }
  for (const auto& v : vars_) {
    events_.AddHistogram(v.name, MakeHistogram(v.tensor, v.name), step);
  }
  events_.Flush();
  last_ = Clock::now();
}

void SummaryHook::End(const StepStats& last) {
  events_.AddScalar("total_loss", static_cast<float>(last.loss),
                    last.global_step);
  events_.Flush();
}

// ---------------------------------------------------------------- saving

SaveHook::SaveHook(double every_secs, std::function<void()> save)
    : every_secs_(every_secs), save_(std::move(save)) {}

void SaveHook::AfterStep(const StepStats&) {
  if (Seconds(last_, Clock::now()) < every_secs_) return;
  save_();
  last_ = Clock::now();
}

}  // namespace slimtorch
