#include "captured_step.h"

#include <ATen/autocast_mode.h>
#include <glog/logging.h>
#ifdef SLIMTORCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <cstring>
#include <string>

#include "slimtorch/core/error.h"

namespace slimtorch {

CapturedStep::CapturedStep(const NamedTensors& trainable, DeviceUpdate& update,
                           torch::Device device)
    : trainable_(trainable), update_(update), device_(device) {}

CapturedStep::~CapturedStep() = default;

bool CapturedStep::Due(bool summarize) {
  if (failed_ || summarize) return false;
  if (captured_) return true;
  if (eager_left_ > 0) {
    --eager_left_;
    return false;
  }
  return true;
}

bool CapturedStep::Capture(BatchSource* source, const Batch* batch,
                           const Body& body, double learning_rate,
                           int64_t step_after) {
  source_ = source;
  if (batch != nullptr) {
    images_ = batch->images.detach().clone();
    labels_ = batch->labels.detach().clone();
  }
  readout_ = torch::zeros(
      {5}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  if (!CaptureBody(body, learning_rate, step_after)) {
    failed_ = true;
    return false;
  }
  captured_ = true;
  return true;
}

bool CapturedStep::CaptureBody(const Body& body, double learning_rate,
                               int64_t step_after) {
#ifdef SLIMTORCH_WITH_CUDA
  // The body's batch: the source's, made inside the graph, or the static
  // copies each replay refills.
  const auto run_body = [&] {
    if (source_ == nullptr) return body(images_, labels_);
    Batch batch = source_->CapturedBatch();
    body(batch.images, batch.labels);
  };
  torch::cuda::synchronize();
  // Captured on a side stream, as PyTorch's torch.cuda.graph does; input
  // threads of the pipeline may keep using CUDA meanwhile (thread-local
  // capture mode). Casts are not cached by autocast while capturing (the
  // cache would be freed under the graph).
  const bool cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  graph_ = std::make_unique<at::cuda::CUDAGraph>();
  std::string error;
  {
    c10::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromPool());
    for (auto& v : trainable_) v.tensor.mutable_grad() = torch::Tensor();
    update_.SetStep(learning_rate, step_after);
    try {
      graph_->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        run_body();
      } catch (const std::exception& e) {
        error = e.what();
      }
      graph_->capture_end();
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    }
  }
  at::autocast::set_autocast_cache_enabled(cache);
  if (!error.empty()) {
    (void)cudaGetLastError();
    graph_.reset();
    for (auto& v : trainable_) v.tensor.mutable_grad() = torch::Tensor();
    LOG(WARNING) << "--cuda_graph: the training step could not be captured "
                    "as a CUDA graph; training goes on eagerly: "
                 << error.substr(0, 600);
    return false;
  }
  torch::cuda::synchronize();
  return true;
#else
  (void)body;
  (void)learning_rate;
  (void)step_after;
  LOG(WARNING) << "--cuda_graph: this build has no CUDA; training eagerly";
  return false;
#endif
}

void CapturedStep::Replay(const Batch* batch, double learning_rate,
                          int64_t step_after) {
  if (batch != nullptr) {
    SLIM_CHECK(batch->images.sizes() == images_.sizes() &&
                   batch->labels.sizes() == labels_.sizes(),
               "--cuda_graph: a batch of images ", batch->images.sizes(),
               " where the captured step takes ", images_.sizes());
    images_.copy_(batch->images, /*non_blocking=*/true);
    labels_.copy_(batch->labels, /*non_blocking=*/true);
  }
#ifdef SLIMTORCH_WITH_CUDA
  update_.SetStep(learning_rate, step_after);
  graph_->replay();
#else
  (void)learning_rate;
  (void)step_after;
#endif
}

std::array<double, 5> CapturedStep::Read() const {
  const torch::Tensor r = readout_.to(torch::kCPU);
  std::array<double, 5> v;
  std::memcpy(v.data(), r.data_ptr<double>(), sizeof(v));
  return v;
}

}  // namespace slimtorch
