#pragma once
// The cost of the layers a net's forward pass calls, for model summaries
// (SummarizeNet, --model_summary): a layer trace (layer_trace.h) that sums
// the costs the layers report.

#include <cstdint>

#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {

// What one layer call costs, for model summaries: its parameters and its
// multiply-adds per example (convolutions and fully-connected layers; pools,
// batch norm and activations are not counted, as in TF-Slim's published
// figures).
struct LayerCost {
  int64_t parameters = 0;
  int64_t multiply_adds = 0;
};

// While alive, collects the cost of every Conv2d, SeparableConv2d and
// FullyConnected call on the constructing thread (one recorder per thread at
// a time). Not copyable. It leaves the layers' kernels as they are: the
// fused paths run while it records.
class LayerCostRecorder : public LayerTrace {
 public:
  LayerCostRecorder();
  ~LayerCostRecorder() override;
  // This thread's recorder, or null.
  static LayerCostRecorder* Active();
  // Adds one call (reported by the layers).
  void Cost(int64_t parameters, int64_t multiply_adds) override;
  // The calls added since the previous Take(), summed.
  LayerCost Take();

 private:
  LayerCost pending_;
};

}  // namespace nets
}  // namespace slimtorch
