#include "slimtorch/export/inference_graph.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/fake_quant.h"

namespace slimtorch {
namespace {

thread_local GraphRecorder* active_recorder = nullptr;

// NCHW x padded with `value` by pads {top, left, bottom, right}.
torch::Tensor PadNchw(const torch::Tensor& x, const std::array<int64_t, 4>& p,
                      double value) {
  if (p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0) return x;
  return torch::constant_pad_nd(x, {p[1], p[3], p[0], p[2]}, value);
}

// `x` fake-quantized with range `q` (TensorFlow's FakeQuantWithMinMaxVars,
// or its per-channel form along q.axis), the range moved to x's device.
torch::Tensor FakeQuantOf(const torch::Tensor& x, const nets::QuantRange& q) {
  const torch::Tensor min = q.min.to(x.device(), torch::kFloat);
  const torch::Tensor max = q.max.to(x.device(), torch::kFloat);
  if (q.axis < 0) {
    return nets::FakeQuant(x, min.reshape({}), max.reshape({}), q.num_bits,
                           q.narrow_range);
  }
  return nets::FakeQuantPerChannel(x, min.reshape({-1}), max.reshape({-1}),
                                   q.axis, q.num_bits, q.narrow_range);
}

// A conv's or fully connected layer's weights as it computes with them:
// fake-quantized first in a quantized net.
torch::Tensor WeightsOf(const GraphNode& n) {
  return n.weights_quant.defined() ? FakeQuantOf(n.weights, n.weights_quant)
                                   : n.weights;
}

torch::Tensor RunConv(const GraphNode& n, const torch::Tensor& x) {
  const int64_t group = x.size(1) / n.weights.size(1);
  const std::vector<int64_t> stride = {n.stride, n.stride}, zero = {0, 0},
                             one = {1, 1};
  return torch::conv2d(PadNchw(x, n.pads, 0), WeightsOf(n), n.bias, stride,
                       zero, one, group);
}

// The window means over the cells inside x only.
torch::Tensor RunAvgPool(const GraphNode& n, const torch::Tensor& x) {
  const torch::Tensor sum =
      torch::avg_pool2d(PadNchw(x, n.pads, 0), {n.kernel_h, n.kernel_w},
                        {n.stride, n.stride}, {0, 0}, false, true, 1);
  const torch::Tensor ones = PadNchw(
      torch::ones({1, 1, x.size(2), x.size(3)}, x.options()), n.pads, 0);
  const torch::Tensor count =
      torch::avg_pool2d(ones, {n.kernel_h, n.kernel_w}, {n.stride, n.stride},
                        {0, 0}, false, true, 1);
  return sum / count;
}

torch::Tensor RunLrn(const GraphNode& n, const torch::Tensor& x) {
  const int64_t size = 2 * n.depth_radius + 1;
  const torch::Tensor sq = torch::constant_pad_nd(
      x * x, {0, 0, 0, 0, n.depth_radius, n.depth_radius});
  const torch::Tensor sum =
      torch::avg_pool3d(sq.unsqueeze(1), {size, 1, 1}, {1, 1, 1}).squeeze(1) *
      static_cast<double>(size);
  return x * (sum * n.lrn_alpha + n.lrn_bias).pow(-n.lrn_beta);
}

// ---- Video nets (I3D, S3D-G): [N, C, T, H, W] values. ----

// NCDHW x padded with `value` by the node's pads (pads_t: front, back).
torch::Tensor PadNcdhw(const GraphNode& n, const torch::Tensor& x,
                       double value) {
  const auto& p = n.pads;
  return torch::constant_pad_nd(
      x, {p[1], p[3], p[0], p[2], n.pads_t[0], n.pads_t[1]}, value);
}

torch::Tensor RunWindow3d(const GraphNode& n, const torch::Tensor& x) {
  const std::vector<int64_t> k = {n.kernel_t, n.kernel_h, n.kernel_w},
                             s = {n.stride_t, n.stride, n.stride};
  if (n.op == GraphOp::kConv3d) {
    return torch::conv3d(PadNcdhw(n, x, 0), WeightsOf(n), n.bias, s);
  }
  if (n.op == GraphOp::kMaxPool3d) {
    return torch::max_pool3d(PadNcdhw(n, x, -INFINITY), k, s);
  }
  // The window means over the cells inside x only.
  const torch::Tensor sum = torch::avg_pool3d(PadNcdhw(n, x, 0), k, s);
  const torch::Tensor count = torch::avg_pool3d(
      PadNcdhw(n, torch::ones({1, 1, x.size(2), x.size(3), x.size(4)},
                              x.options()),
               0),
      k, s);
  return sum / count;
}

// A per-channel [C] tensor shaped to broadcast over x's [N, C, ...].
torch::Tensor PerChannel(const torch::Tensor& t, const torch::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = -1;
  return t.view(shape);
}

torch::Tensor Run(const GraphNode& n, const std::vector<torch::Tensor>& in) {
  const torch::Tensor& x = in.at(0);
  switch (n.op) {
    case GraphOp::kConv:
      return RunConv(n, x);
    case GraphOp::kBatchNorm: {
      const torch::Tensor inv = (n.variance + n.epsilon).rsqrt() * n.scale;
      return x * PerChannel(inv, x) + PerChannel(n.offset - n.mean * inv, x);
    }
    case GraphOp::kRelu:
      return torch::relu(x);
    case GraphOp::kRelu6:
      return torch::clamp(x, 0, 6);
    case GraphOp::kMaxPool:
      return torch::max_pool2d(PadNchw(x, n.pads, -INFINITY),
                               {n.kernel_h, n.kernel_w}, {n.stride, n.stride});
    case GraphOp::kAvgPool:
      return RunAvgPool(n, x);
    case GraphOp::kLrn:
      return RunLrn(n, x);
    case GraphOp::kFullyConnected:
      return torch::linear(x, WeightsOf(n), n.bias);
    case GraphOp::kConcat:
      return torch::cat(in, 1);
    case GraphOp::kAdd:
      return in.at(0) + in.at(1);
    case GraphOp::kScale:
      return x * n.factor;
    case GraphOp::kFlatten:
      return x.permute({0, 2, 3, 1}).reshape({x.size(0), -1});
    case GraphOp::kMean:
      return x.dim() == 5 ? x.mean({2, 3, 4}, true) : x.mean({2, 3}, true);
    case GraphOp::kSqueeze:
      return x.reshape({x.size(0), x.size(1)});
    case GraphOp::kSoftmax:
      return torch::softmax(x, -1);
    // Video nets.
    case GraphOp::kConv3d:
    case GraphOp::kMaxPool3d:
    case GraphOp::kAvgPool3d:
      return RunWindow3d(n, x);
    case GraphOp::kSigmoid:
      return torch::sigmoid(x);
    case GraphOp::kMul:
      return in.at(0) * in.at(1);
    // MobileNet v3 / EdgeTPU (kMul above too).
    case GraphOp::kAddConstant:
      return x + n.factor;
    // 8-bit nets.
    case GraphOp::kFakeQuant:
      return FakeQuantOf(x, n.quant);
  }
  SLIM_FAIL("graph node ", n.name, ": unknown op");
}

}  // namespace

GraphRecorder::GraphRecorder(
    const torch::Tensor& input,
    std::map<const torch::nn::Module*, std::string> names)
    : names_(std::move(names)) {
  SLIM_CHECK(active_recorder == nullptr,
             "a graph is already being recorded on this thread");
  graph_.input = NewValue(input);
  active_recorder = this;
  Wants wants;
  wants.ops = true;
  Attach(wants);
}

GraphRecorder::~GraphRecorder() { active_recorder = nullptr; }

GraphRecorder* GraphRecorder::Active() { return active_recorder; }

int GraphRecorder::NewValue(const torch::Tensor& t) {
  const int id = static_cast<int>(graph_.values.size());
  graph_.values.push_back({t.sizes().vec(), ""});
  ids_[t.unsafeGetTensorImpl()] = id;
  keep_.push_back(t);
  return id;
}

int GraphRecorder::ValueOf(const torch::Tensor& t,
                           const std::string& node) const {
  auto it = ids_.find(t.unsafeGetTensorImpl());
  SLIM_CHECK(it != ids_.end(), "exporting the graph: an input of ", node,
             " comes from an op that is not recorded (every op of a net "
             "must go through nets/ layers or nets/graph_ops.h)");
  return it->second;
}

GraphNode& GraphRecorder::Add(GraphOp op, const torch::nn::Module* module,
                              const std::string& suffix,
                              const std::vector<torch::Tensor>& inputs,
                              const torch::Tensor& output) {
  std::string name;
  if (module != nullptr) {
    auto it = names_.find(module);
    SLIM_CHECK(it != names_.end(), "exporting the graph: a ", GraphOpName(op),
               " layer outside the net's modules");
    name = it->second + suffix;
  } else {
    const int k = counts_[GraphOpName(op)]++;
    name = std::string(GraphOpName(op)) + (k ? "_" + std::to_string(k) : "");
  }
  GraphNode node;
  node.op = op;
  node.name = name;
  for (const torch::Tensor& t : inputs) node.inputs.push_back(ValueOf(t, name));
  // An in-place op gives its output the input's TensorImpl: the new value
  // takes the address over.
  node.output = NewValue(output);
  graph_.nodes.push_back(std::move(node));
  return graph_.nodes.back();
}

void GraphRecorder::Op(const nets::TracedOp& op) {
  SLIM_CHECK(op.kind != GraphOp::kBatchNorm || !op.batch_statistics,
             "exporting the graph needs the net in "
             "inference mode (batch norm uses the moving statistics)");
  GraphNode& n = Add(op.kind, op.layer, op.suffix, op.inputs, op.output);
  static_cast<nets::OpAttributes&>(n) = op;
}

InferenceGraph GraphRecorder::Finish(
    const std::string& scope, const torch::Tensor& logits,
    const std::vector<std::pair<std::string, torch::Tensor>>& end_points) {
  graph_.scope = scope;
  graph_.logits = ValueOf(logits, "the logits");
  for (const auto& ep : end_points) {
    auto it = ids_.find(ep.second.unsafeGetTensorImpl());
    if (it != ids_.end() && graph_.values[it->second].end_point.empty()) {
      graph_.values[it->second].end_point = ep.first;
    }
  }
  const torch::Tensor predictions = torch::softmax(logits, -1);
  graph_.predictions =
      Add(GraphOp::kSoftmax, nullptr, "", {logits}, predictions).output;
  // No scope (NASNet, PNASNet): "Predictions", as the writers name the
  // outputs.
  graph_.nodes.back().name =
      scope.empty() ? "Predictions" : scope + "/Predictions";
  active_recorder = nullptr;
  Detach();
  return std::move(graph_);
}

std::map<const torch::nn::Module*, std::string> ModulePaths(
    const torch::nn::Module& root, const std::string& scope) {
  std::map<const torch::nn::Module*, std::string> paths;
  paths[&root] = scope;
  for (const auto& item : root.named_modules("", false)) {
    std::string path = item.key();
    std::replace(path.begin(), path.end(), '.', '/');
    paths[item.value().get()] = scope.empty() ? path : scope + "/" + path;
  }
  return paths;
}

std::vector<torch::Tensor> RunGraph(const InferenceGraph& graph,
                                    const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> values(graph.values.size());
  values.at(graph.input) = images;
  for (const GraphNode& n : graph.nodes) {
    std::vector<torch::Tensor> in;
    for (int i : n.inputs) in.push_back(values.at(i));
    values.at(n.output) = Run(n, in);
  }
  return values;
}

}  // namespace slimtorch
