#pragma once
// The trainer's hooks (train/trainer.h): what a step hands them
// (StepStats), what they may ask of the next step (StepPlan), the hook
// interface (TrainHook), and the trainer's own periodic work as hooks: the
// stop check, --profile_steps, the step log, the summaries and the periodic
// checkpoints (src/train/train_hooks.cc), and the training metrics.

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/io/event_writer.h"
#include "slimtorch/train/metrics.h"
#include "slimtorch/train/profile.h"

namespace slimtorch {

// What one training step did, as the hooks see it.
struct StepStats {
  // After the step.
  int64_t global_step = 0;
  // Total loss: cross entropy (+ 0.4 x the auxiliary head's) + L2 terms.
  double loss = 0.0;
  double cross_entropy = 0.0;  // the main head's
  // The L2 terms; unset when the net has none.
  std::optional<double> regularization;
  double learning_rate = 0.0;
  // Examples of the step on this replica.
  int64_t examples = 0;
  // With replicas: each one's loss (cross entropy + 0.4 x aux), by replica;
  // `loss` is then their mean + the L2 terms, as model_deploy's total_loss.
  std::vector<double> replica_losses;
  // On summary steps only (StepPlan::summarize): the net's end points of
  // the step (this replica's), for activation histograms.
  std::vector<std::pair<std::string, torch::Tensor>> end_points;
  // On steps a hook asked for them (StepPlan::keep_outputs) only: the main
  // head's logits (this replica's last micro-batch, detached, on the
  // device) and the labels its loss took (class ids [batch], or soft
  // targets [batch, classes] with --mixup_alpha / --cutmix_alpha).
  torch::Tensor logits;
  torch::Tensor labels;
  // --precision=fp16: the gradients were not finite at the loss scale, so
  // the step changed no variable (the global step still counts it).
  bool skipped = false;
  // --cuda_graph steps read the losses only on logging steps (and the
  // last); on others loss, cross_entropy and regularization are NaN / unset.
  bool losses_read = true;
};

// The step about to run, as the hooks see it before it; a hook may set
// `summarize` or `stop`, never clear them.
struct StepPlan {
  // The global step the step will reach.
  int64_t global_step = 0;
  // Keep the step's end points in its StepStats (for summaries).
  bool summarize = false;
  // Keep the step's logits and labels in its StepStats (training metrics).
  // Such a step runs eagerly under --cuda_graph, as a summary step does.
  bool keep_outputs = false;
  // Run no step: training ends here (saving its checkpoint first).
  bool stop = false;
};

// What the trainer gives every hook before the first step.
struct HookContext {
  // The run's summary event file in train_dir, which every hook writing
  // summaries shares (between steps, from the trainer's thread); null on
  // replicas other than 0, which write none.
  EventWriter* summaries = nullptr;
  int replica = 0;
};

// Work around every step, in order (the trainer's own hooks first, then
// TrainOptions::hooks).
class TrainHook {
 public:
  virtual ~TrainHook() = default;
  // Once, before the first step (and before BeforeStep).
  virtual void Begin(const HookContext& context) {}
  // Before each step. Once a hook sets plan->stop, the hooks after it are
  // not asked.
  virtual void BeforeStep(StepPlan* plan) {}
  virtual void AfterStep(const StepStats& step) {}
  // Once, when the loop ends (the last step run, or a stop), before the
  // final checkpoint; `global_step` is the last step run.
  virtual void LoopEnded(int64_t global_step) {}
  // After the final checkpoint; `last` is the last step run (global_step
  // only, when none ran).
  virtual void End(const StepStats& last) {}
};

// A stop request (SIGINT / SIGTERM: TrainOptions::stop_requested) before a
// step; `agree`, when given, makes every replica decide alike
// (GradientExchange::AgreeOnStop) and must be called by all of them before
// every step.
class StopHook : public TrainHook {
 public:
  StopHook(const std::atomic<bool>* requested, std::function<bool(bool)> agree);
  void BeforeStep(StepPlan* plan) override;

 private:
  const std::atomic<bool>* requested_;
  std::function<bool(bool)> agree_;
};

// --profile_steps: LibTorch's profiler over a range of steps (StepProfiler).
class ProfileHook : public TrainHook {
 public:
  ProfileHook(StepRange steps, torch::Device device, std::string dir);
  void BeforeStep(StepPlan* plan) override;
  void AfterStep(const StepStats& step) override;
  void LoopEnded(int64_t global_step) override;

 private:
  StepProfiler profiler_;
};

// "global step N: loss = L (S sec/step, E examples/sec)" every n steps.
class LoggingHook : public TrainHook {
 public:
  explicit LoggingHook(int64_t every_n);
  void AfterStep(const StepStats& s) override;

 private:
  using Clock = std::chrono::steady_clock;
  int64_t every_n_;
  Clock::time_point window_start_ = Clock::now();
  int64_t window_steps_ = 0;
};

// --progress (ours): on a terminal, one line rewritten in place at most
// every interval_secs, "step N/M (P%), E examples/s, ETA h:mm:ss" (no
// total: "step N, E examples/s"), the rates since the hook's first step.
// The line is cleared on the logging steps (every_n) before the step log is
// written, and ended when the loop ends. Installed before LoggingHook.
class ProgressHook : public TrainHook {
 public:
  ProgressHook(std::FILE* out, int64_t max_steps, int64_t every_n,
               double interval_secs = 1.0);
  void AfterStep(const StepStats& s) override;
  void LoopEnded(int64_t global_step) override;
  // The line's text.
  static std::string Line(int64_t step, int64_t max_steps,
                          double examples_per_sec, double steps_per_sec);

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  int64_t max_steps_;
  int64_t every_n_;
  double interval_secs_;
  bool drawn_ = false;
  int64_t steps_ = 0, examples_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_;
};
// Whether --progress=auto|on|off draws (auto: standard error is a
// terminal); throws naming the flag on any other value.
bool ProgressWanted(const std::string& flag);

// TF-Slim's summaries every save_summaries_secs (train_image_classifier +
// model_deploy): scalars total_loss, the losses, learning_rate, each
// replica's clone_loss; histograms of every model variable and of the end
// points' activations (of the step's first replica), with their sparsity.
// total_loss again at the end. Writes to HookContext::summaries (none
// without one).
class SummaryHook : public TrainHook {
 public:
  SummaryHook(double every_secs, NamedTensors vars);
  void Begin(const HookContext& context) override;
  // Arms the step when its summaries are due (the step then keeps its end
  // points).
  void BeforeStep(StepPlan* plan) override;
  void AfterStep(const StepStats& s) override;
  void End(const StepStats& last) override;

 private:
  using Clock = std::chrono::steady_clock;
  EventWriter* events_ = nullptr;
  double every_secs_;
  NamedTensors vars_;
  bool armed_ = false;
  Clock::time_point last_ = Clock::now();
};

// --summarize_train_metrics (ours): on each summary step (one that an
// earlier hook, SummaryHook, armed), the metrics of that step's batch as
// scalars "train/<name>" at its global step: this replica's last
// micro-batch, soft targets (mixup, cutmix) counted as their argmax.
// Writes to HookContext::summaries (nothing without one).
class MetricHook : public TrainHook {
 public:
  // The metrics of `factories` that apply to a net of `num_classes`.
  MetricHook(const std::vector<MetricFactory>& factories, int64_t num_classes);
  void Begin(const HookContext& context) override;
  // On a summary step: asks for its outputs (StepPlan::keep_outputs).
  void BeforeStep(StepPlan* plan) override;
  void AfterStep(const StepStats& s) override;

 private:
  std::vector<std::unique_ptr<Metric>> metrics_;
  EventWriter* events_ = nullptr;
  bool armed_ = false;
};

// Every every_secs (0: never), returns this process's idle memory to the
// system: the caching CPU allocator's blocks not reused since the previous
// return and the C heap's free pages (core/cpu_allocator.h), so that a run
// of hours or days keeps a flat RSS (docs/soak.md). Costs nothing on the
// steps between.
class MemoryTrimHook : public TrainHook {
 public:
  explicit MemoryTrimHook(double every_secs);
  void AfterStep(const StepStats&) override;

 private:
  using Clock = std::chrono::steady_clock;
  double every_secs_;
  Clock::time_point last_ = Clock::now();
};

// A checkpoint every save_interval_secs (the final one is the trainer's).
class SaveHook : public TrainHook {
 public:
  SaveHook(double every_secs, std::function<void()> save);
  void AfterStep(const StepStats&) override;

 private:
  using Clock = std::chrono::steady_clock;
  double every_secs_;
  std::function<void()> save_;
  Clock::time_point last_ = Clock::now();
};

}  // namespace slimtorch
