#pragma once
// Hand-built inference graphs for the writers' tests (ONNX, GraphDef), and
// the LibTorch pieces their expected logits are computed with.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/export/inference_graph.h"

namespace slimtorch {
namespace testing_export {

// An InferenceGraph built by hand, scope "Net".
class GraphMaker {
 public:
  explicit GraphMaker(const std::vector<int64_t>& input_shape) {
    graph_.scope = "Net";
    graph_.input = Value(input_shape);
  }
  int Value(const std::vector<int64_t>& shape) {
    graph_.values.push_back({shape, ""});
    return static_cast<int>(graph_.values.size()) - 1;
  }
  // The new node, valid until the next Add.
  GraphNode& Add(GraphOp op, const std::string& name,
                 const std::vector<int>& inputs,
                 const std::vector<int64_t>& shape) {
    GraphNode n;
    n.op = op;
    n.name = name;
    n.inputs = inputs;
    n.output = Value(shape);
    graph_.nodes.push_back(n);
    return graph_.nodes.back();
  }
  int last() const { return graph_.nodes.back().output; }
  // Makes `logits` the logits and adds their softmax as the predictions.
  InferenceGraph Finish(int logits) {
    graph_.logits = logits;
    Add(GraphOp::kSoftmax, "Net/Predictions", {logits},
        graph_.values[logits].shape);
    graph_.predictions = last();
    return graph_;
  }

 private:
  InferenceGraph graph_;
};

// A graph, images for it and its logits computed with plain LibTorch ops.
struct Case {
  InferenceGraph graph;
  torch::Tensor images;  // NCHW
  torch::Tensor logits;
};

inline torch::Tensor PadNchw(const torch::Tensor& x,
                             const std::array<int64_t, 4>& p, double value) {
  return torch::constant_pad_nd(x, {p[1], p[3], p[0], p[2]}, value);
}

inline torch::Tensor FlattenNhwc(const torch::Tensor& x) {
  return x.permute({0, 2, 3, 1}).reshape({x.size(0), -1});
}

}  // namespace testing_export
}  // namespace slimtorch
