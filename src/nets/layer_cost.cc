#include "slimtorch/nets/layer_cost.h"

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace nets {
namespace {

thread_local LayerCostRecorder* active_recorder = nullptr;

}  // namespace

LayerCostRecorder::LayerCostRecorder() {
  SLIM_CHECK(active_recorder == nullptr,
             "a LayerCostRecorder is already active on this thread");
  active_recorder = this;
  Wants wants;
  wants.costs = true;
  Attach(wants);
}

LayerCostRecorder::~LayerCostRecorder() { active_recorder = nullptr; }

LayerCostRecorder* LayerCostRecorder::Active() { return active_recorder; }

void LayerCostRecorder::Cost(int64_t parameters, int64_t multiply_adds) {
  pending_.parameters += parameters;
  pending_.multiply_adds += multiply_adds;
}

LayerCost LayerCostRecorder::Take() {
  LayerCost c = pending_;
  pending_ = LayerCost();
  return c;
}

}  // namespace nets
}  // namespace slimtorch
