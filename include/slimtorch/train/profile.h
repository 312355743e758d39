// --profile_steps: LibTorch's profiler (Kineto) over a range of training
// steps, as Keras' TensorBoard(profile_batch=...): a Chrome / Perfetto trace
// of the CPU ops and the device kernels, and a table in the log of where
// the device time of those steps went, kernel by kernel.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace slimtorch {

// Global steps first..last, inclusive; first == 0: no profiling.
struct StepRange {
  int64_t first = 0;
  int64_t last = 0;
  bool empty() const { return first == 0; }
  int64_t size() const { return last - first + 1; }
};

// "" (none), "N" (step N alone) or "A,B" (steps A to B), 1 <= A <= B;
// anything else is an Error naming --profile_steps.
StepRange ParseProfileSteps(const std::string& flag);

// Whether this LibTorch's profiler records anything. Probes once. (Built
// without Kineto, as Debian's 1.13 is, it records the CPU ops only and
// cannot save a trace; StepProfiler then writes one itself.)
bool ProfilerAvailable();

// One profiled activity, as the table sums it.
struct ProfiledEvent {
  std::string name;
  bool on_device = false;  // a kernel, copy or fill on the GPU
  double micros = 0;
  // When it started and on which thread: CPU ops nest (an op calls others
  // on its thread), and the table counts each op's own time.
  double start_micros = 0;
  uint64_t thread = 0;
};

// The table: the events of one side (device kernels when `device`, else
// CPU ops by their self time: their duration less that of the ops they
// called) summed by name, largest first, the top `rows` and the rest in one
// line; per step (`steps` of them) and as a share of the side's total; then
// the total against `wall_secs`, the steps' wall time (for a GPU: how busy
// it was).
std::string ProfileTable(const std::vector<ProfiledEvent>& events, bool device,
                         int64_t steps, double wall_secs, int rows = 25);

// Runs the profiler over the steps of `range` (with --cuda_graph, choose
// steps after the capture at step 4: CUPTI's tracing may make a capture
// fail, which then trains on eagerly): Before(step) before each
// step, After(step) after it; the trace is written to
// `dir`/steps_<first>-<last>.pt.trace.json (atomically) and the table
// logged after the last step, or at Finish(last step run) when training
// ends inside the range.
class StepProfiler {
 public:
  StepProfiler(StepRange range, torch::Device device, std::string dir);
  ~StepProfiler();
  void Before(int64_t step);
  void After(int64_t step);
  void Finish(int64_t last_step);
  // The trace written (empty until then).
  const std::string& trace_path() const { return trace_path_; }

 private:
  void Stop(int64_t last_step);

  StepRange range_;
  torch::Device device_;
  std::string dir_;
  bool active_ = false;
  bool done_ = false;
  int64_t first_step_ = 0;
  double start_secs_ = 0;
  std::string trace_path_;
};

}  // namespace slimtorch
