#pragma once
// What both writers of an InferenceGraph (ONNX, GraphDef) work out before
// writing: the graph's consistency, which nodes feed an output, and which
// batch norms fold into the convolution before them. Private to export/.

#include <vector>

#include "slimtorch/export/inference_graph.h"

namespace slimtorch {

struct GraphPlan {
  std::vector<int> producer;                // per value: node index or -1
  std::vector<std::vector<int>> consumers;  // per value: node indices
  std::vector<bool> live;                   // per node: feeds an output
  std::vector<int> fold;     // per conv node: the batch norm folded into it
  std::vector<bool> folded;  // per batch norm node: folded away
};

// Checks that every input of a node is the graph input or an earlier node's
// output, that each value is produced once and that the input and both
// outputs exist (errors start with `what`, e.g. "ONNX export"); then plans
// live nodes and, with fold_batch_norm, the folds.
GraphPlan PlanGraph(const InferenceGraph& graph, bool fold_batch_norm,
                    const char* what);

// Throws (`what` first, as above) unless node `n` has its op's number of
// inputs: 2 for Add and Mul, at least 1 for Concat, else 1.
void CheckInputCount(const char* what, const GraphNode& n);

// Throws (`what` first, as above) unless the input `shape` of node `n` has
// `rank` dimensions.
void ExpectRank(const char* what, const GraphNode& n,
                const std::vector<int64_t>& shape, size_t rank);

// A convolution node's weights checked against its NCHW input `shape`:
// [out, in / group, kh, kw].
struct ConvShape {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t group = 1;
};
ConvShape CheckConvWeights(const char* what, const GraphNode& n,
                           const std::vector<int64_t>& shape);

}  // namespace slimtorch
