#include "slimtorch/nets/layer_trace.h"

#include <algorithm>

namespace slimtorch {
namespace nets {
namespace {

// The traces attached on this thread that take ops, and those that take
// costs, each in the order they attached.
struct ActiveTraces {
  std::vector<LayerTrace*> ops, costs;
};

thread_local ActiveTraces active;

void Remove(std::vector<LayerTrace*>& traces, const LayerTrace* t) {
  traces.erase(std::remove(traces.begin(), traces.end(), t), traces.end());
}

}  // namespace

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kConv:
      return "Conv";
    case OpKind::kBatchNorm:
      return "BatchNorm";
    case OpKind::kRelu:
      return "Relu";
    case OpKind::kRelu6:
      return "Relu6";
    case OpKind::kMaxPool:
      return "MaxPool";
    case OpKind::kAvgPool:
      return "AvgPool";
    case OpKind::kLrn:
      return "LRN";
    case OpKind::kFullyConnected:
      return "FullyConnected";
    case OpKind::kConcat:
      return "Concat";
    case OpKind::kAdd:
      return "Add";
    case OpKind::kScale:
      return "Scale";
    case OpKind::kFlatten:
      return "Flatten";
    case OpKind::kMean:
      return "Mean";
    case OpKind::kSqueeze:
      return "Squeeze";
    case OpKind::kSoftmax:
      return "Softmax";
    // Video nets.
    case OpKind::kConv3d:
      return "Conv3D";
    case OpKind::kMaxPool3d:
      return "MaxPool3D";
    case OpKind::kAvgPool3d:
      return "AvgPool3D";
    case OpKind::kSigmoid:
      return "Sigmoid";
    case OpKind::kMul:
      return "Mul";
    // MobileNet v3 / EdgeTPU.
    case OpKind::kAddConstant:
      return "AddConstant";
    // 8-bit nets.
    case OpKind::kFakeQuant:
      return "FakeQuantWithMinMaxVars";
  }
  return "?";
}

LayerTrace::~LayerTrace() { Detach(); }

void LayerTrace::Op(const TracedOp&) {}

void LayerTrace::Cost(int64_t, int64_t) {}

void LayerTrace::Attach(Wants wants) {
  if (attached_) return;
  attached_ = true;
  if (wants.ops) active.ops.push_back(this);
  if (wants.costs) active.costs.push_back(this);
}

void LayerTrace::Detach() {
  if (!attached_) return;
  attached_ = false;
  Remove(active.ops, this);
  Remove(active.costs, this);
}

bool TracingOps() { return !active.ops.empty(); }

bool TracingCosts() { return !active.costs.empty(); }

// (a trace does not attach or detach another while it takes a report)
void TraceOp(const TracedOp& op) {
  for (LayerTrace* t : active.ops) t->Op(op);
}

void TraceCost(int64_t parameters, int64_t multiply_adds) {
  for (LayerTrace* t : active.costs) t->Cost(parameters, multiply_adds);
}

}  // namespace nets
}  // namespace slimtorch
