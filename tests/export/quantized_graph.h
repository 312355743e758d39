#pragma once
// Quantized inference graphs for the export tests, made from a recorded
// float graph without the layers' own quantizer, the way contrib.quantize's
// eval rewrite shapes a net: batch norms folded into the convolution before
// them, every conv / fully connected layer's weights fake-quantized (narrow
// range, 8 bits, per tensor or per output channel) from their own min and
// max (0 included), and a fake quantization (8 bits, per tensor) of each
// activation, each conv / fully connected output that no activation
// follows, and each residual add, with ranges from a float pass over sample
// images.

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "export/graph_plan.h"
#include "slimtorch/export/inference_graph.h"

namespace slimtorch {
namespace testing_export {

// [min(t), max(t)], 0 included: per tensor, or [C] per slice of axis 0.
inline nets::QuantRange RangeOf(const torch::Tensor& t, bool per_channel,
                                bool narrow) {
  nets::QuantRange q;
  const torch::Tensor flat = per_channel ? t.reshape({t.size(0), -1})
                                         : t.reshape({1, -1});
  q.min = std::get<0>(flat.min(1)).clamp_max(0).to(torch::kFloat);
  q.max = std::get<0>(flat.max(1)).clamp_min(0).to(torch::kFloat);
  if (!per_channel) {
    q.min = q.min.reshape({});
    q.max = q.max.reshape({});
  }
  q.narrow_range = narrow;
  q.axis = per_channel ? 0 : -1;
  return q;
}

inline bool HasWeights(GraphOp op) {
  return op == GraphOp::kConv || op == GraphOp::kFullyConnected ||
         op == GraphOp::kConv3d;
}

inline bool IsActivation(GraphOp op) {
  return op == GraphOp::kRelu || op == GraphOp::kRelu6;
}

// Batch norms folded into the conv before them (graph_plan's folds), the
// convs writing the batch norms' outputs.
inline InferenceGraph FoldBatchNorms(const InferenceGraph& g) {
  const GraphPlan plan = PlanGraph(g, true, "quantizing the test graph");
  InferenceGraph out = g;
  out.nodes.clear();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (plan.folded[i]) continue;
    GraphNode n = g.nodes[i];
    if (plan.fold[i] >= 0) {
      const GraphNode& bn = g.nodes[plan.fold[i]];
      torch::Tensor w = n.weights, b = n.bias;
      FoldBatchNorm("quantizing the test graph", n, bn, &w, &b);
      n.weights = w;
      n.bias = b;
      n.output = bn.output;
    }
    out.nodes.push_back(n);
  }
  return out;
}

// The quantized graph of float graph `g` (see the top), activation ranges
// from RunGraph over `images`.
inline InferenceGraph QuantizeGraph(const InferenceGraph& g,
                                    const torch::Tensor& images,
                                    bool per_channel_weights) {
  InferenceGraph folded = FoldBatchNorms(g);
  for (GraphNode& n : folded.nodes) {
    if (HasWeights(n.op)) {
      n.weights_quant = RangeOf(n.weights, per_channel_weights, true);
    }
  }
  const std::vector<torch::Tensor> values = RunGraph(folded, images);
  std::map<int, std::vector<int>> consumers;
  for (size_t i = 0; i < folded.nodes.size(); ++i) {
    for (int v : folded.nodes[i].inputs) consumers[v].push_back(i);
  }
  auto quantized_after = [&](const GraphNode& n) {
    if (IsActivation(n.op)) return true;
    if (!HasWeights(n.op) && n.op != GraphOp::kAdd) return false;
    const std::vector<int>& readers = consumers[n.output];
    return !(readers.size() == 1 &&
             IsActivation(folded.nodes[readers[0]].op));
  };
  InferenceGraph out = folded;
  out.nodes.clear();
  std::map<int, int> remap;  // value → its fake-quantized value
  auto mapped = [&](int v) {
    auto it = remap.find(v);
    return it == remap.end() ? v : it->second;
  };
  for (GraphNode n : folded.nodes) {
    for (int& v : n.inputs) v = mapped(v);
    out.nodes.push_back(n);
    if (!quantized_after(n)) continue;
    GraphNode fq;
    fq.op = GraphOp::kFakeQuant;
    fq.name = n.name + "/act_quant";
    fq.inputs = {n.output};
    fq.quant = RangeOf(values[n.output], false, false);
    fq.output = static_cast<int>(out.values.size());
    out.values.push_back({out.values[n.output].shape, ""});
    remap[n.output] = fq.output;
    out.nodes.push_back(fq);
  }
  out.logits = mapped(folded.logits);
  return out;
}

// The number of nodes of `g` of kind `op`.
inline int CountOps(const InferenceGraph& g, GraphOp op) {
  return static_cast<int>(std::count_if(
      g.nodes.begin(), g.nodes.end(),
      [&](const GraphNode& n) { return n.op == op; }));
}

}  // namespace testing_export
}  // namespace slimtorch
