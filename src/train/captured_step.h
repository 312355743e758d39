#pragma once
// --cuda_graph's step strategy (private to the trainer): after a few eager
// steps the trainer's step body is captured once as a CUDA graph and
// replayed every step. The body itself is the trainer's, the same one its
// eager steps run (Trainer::StepBody); this holds the graph, its static
// inputs and its readout.

#include <torch/torch.h>
#ifdef SLIMTORCH_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#endif

#include <array>
#include <cstdint>
#include <functional>
#include <memory>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/data/pipeline.h"
#include "slimtorch/train/device_update.h"

namespace slimtorch {

// Eager steps before a --cuda_graph capture: cuDNN's autotuner, cuBLAS's
// handles and the allocator settle on them.
inline constexpr int kGraphWarmupSteps = 3;

class CapturedStep {
 public:
  // The step body on a batch's images and labels (no host reads).
  using Body = std::function<void(const torch::Tensor& images,
                                  const torch::Tensor& labels)>;

  // `trainable`: the variables whose gradients the body makes; `update`:
  // the device's update the body applies (its learning rate is set here,
  // outside the graph). Neither is owned.
  CapturedStep(const NamedTensors& trainable, DeviceUpdate& update,
               torch::Device device);
  ~CapturedStep();

  // Whether this step is to be a graph replay (else eager: the warm-up
  // steps before the capture, summary steps, and all steps after a failed
  // capture). Counts the warm-up steps down.
  bool Due(bool summarize);
  bool captured() const { return captured_; }

  // Captures `body` on a side stream, on the batch `source` makes inside
  // the graph or on static copies of `batch` (the other null), with the
  // step's learning rate and the global step after it. False (and a
  // warning; eager steps from then on) when the step cannot be captured.
  bool Capture(BatchSource* source, const Batch* batch, const Body& body,
               double learning_rate, int64_t step_after);
  // One replay on `batch` copied into the static inputs (null: the source
  // makes the batch inside the graph).
  void Replay(const Batch* batch, double learning_rate, int64_t step_after);

  // float64 [5], written by each replay (DeviceUpdate::RecordLosses): the
  // last step's total loss, cross entropy and regularization, and the first
  // non-finite loss with its step (0: none yet).
  torch::Tensor& readout() { return readout_; }
  // The readout, in one copy to the host.
  std::array<double, 5> Read() const;

 private:
  bool CaptureBody(const Body& body, double learning_rate, int64_t step_after);

  const NamedTensors& trainable_;
  DeviceUpdate& update_;
  torch::Device device_;
#ifdef SLIMTORCH_WITH_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
#endif
  // The input when it makes its batches on the device (captured with the
  // step), else null and the static buffers each batch is copied into.
  BatchSource* source_ = nullptr;
  torch::Tensor images_;
  torch::Tensor labels_;
  torch::Tensor readout_;
  bool captured_ = false;
  bool failed_ = false;  // capture failed: eager steps from then on
  int64_t eager_left_ = kGraphWarmupSteps;
};

}  // namespace slimtorch
