#include "slimtorch/export/graphdef_writer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "graph_plan.h"
#include "little_endian.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/proto/tf_graph.pb.h"

namespace slimtorch {
namespace {

namespace pb = ::slimtorch::tfgraph;

pb::AttrValue& Attr(pb::NodeDef* node, const char* name) {
  return (*node->mutable_attr())[name];
}
void SetType(pb::NodeDef* node, const char* name, pb::DataType type) {
  Attr(node, name).set_type(type);
}
void SetInt(pb::NodeDef* node, const char* name, int64_t value) {
  Attr(node, name).set_i(value);
}
void SetFloat(pb::NodeDef* node, const char* name, double value) {
  Attr(node, name).set_f(static_cast<float>(value));
}
void SetBool(pb::NodeDef* node, const char* name, bool value) {
  Attr(node, name).set_b(value);
}
void SetString(pb::NodeDef* node, const char* name, const std::string& value) {
  Attr(node, name).set_s(value);
}
void SetInts(pb::NodeDef* node, const char* name,
             const std::vector<int64_t>& values) {
  pb::AttrValue::ListValue* list = Attr(node, name).mutable_list();
  for (int64_t v : values) list->add_i(v);
}

void SetShape(pb::TensorShapeProto* shape, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) shape->add_dim()->set_size(d);
}

// A layer's padding in TensorFlow's terms: "VALID" (no pads), "SAME" (the
// pads TensorFlow's SAME gives for this input) or "EXPLICIT" with
// explicit_paddings in NHWC order, [0, 0, top, bottom, left, right, 0, 0].
struct Padding {
  std::string mode;
  std::vector<int64_t> explicit_paddings;
};

// TensorFlow's SAME pads for `in` cells, `kernel` wide, stride `stride`:
// total = max((⌈in/stride⌉ − 1)·stride + kernel − in, 0), before = total/2.
std::pair<int64_t, int64_t> SamePads(int64_t in, int64_t kernel,
                                     int64_t stride) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + kernel - in, 0);
  return {total / 2, total - total / 2};
}

// `in_nchw`: the layer's input shape.
Padding PaddingOf(const GraphNode& n, const std::vector<int64_t>& in_nchw,
                  int64_t kernel_h, int64_t kernel_w) {
  const std::array<int64_t, 4>& p = n.pads;  // top, left, bottom, right
  if (p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0) return {"VALID", {}};
  const auto h = SamePads(in_nchw[2], kernel_h, n.stride);
  const auto w = SamePads(in_nchw[3], kernel_w, n.stride);
  if (p[0] == h.first && p[2] == h.second && p[1] == w.first &&
      p[3] == w.second) {
    return {"SAME", {}};
  }
  return {"EXPLICIT", {0, 0, p[0], p[2], p[1], p[3], 0, 0}};
}

std::string PadsString(const std::array<int64_t, 4>& p) {
  return StrCat("{top ", p[0], ", left ", p[1], ", bottom ", p[2], ", right ",
                p[3], "}");
}

// Builds the GraphDef in phases: check the graph, find the live nodes and
// the batch norms to fold, then emit the input, every live node in
// execution order, and the named outputs.
class GraphDefBuilder {
 public:
  GraphDefBuilder(const InferenceGraph& graph, const GraphDefOptions& options)
      : g_(graph), o_(options) {}

  pb::GraphDef Build();

 private:
  void AddInput();
  void AddNode(int index);
  bool AddVideoNode(int index);  // the video nets' ops
  void AddOutputs();

  void AddConv(const GraphNode& n, const GraphNode* bn);
  void AddBatchNorm(const GraphNode& n);
  void AddPool(const GraphNode& n, const char* op);
  void AddLrn(const GraphNode& n);
  void AddFullyConnected(const GraphNode& n);
  void AddConcat(const GraphNode& n);
  void AddFlatten(const GraphNode& n);
  void AddMean(const GraphNode& n);
  void AddSqueeze(const GraphNode& n);
  // Video nets.
  void AddConv3d(const GraphNode& n, const GraphNode* bn);
  void AddPool3d(const GraphNode& n, const char* op);
  void AddWithConstant(const GraphNode& n, const char* op);
  bool AddMobileNetV3Node(const GraphNode& n);  // false: another op
  // 8-bit nets.
  void AddFakeQuant(const GraphNode& n);
  // `weights` (a Const of TensorFlow's layout `shape`, the output channels
  // last, or the depthwise [kh, kw, in, multiplier]) as conv / fully
  // connected `n` uses them: fake-quantized when it has weights_quant.
  std::string QuantizedWeights(const GraphNode& n, const std::string& weights,
                               const std::vector<int64_t>& shape);
  std::string Reshape(const std::string& name, const std::string& x,
                      const std::vector<int64_t>& shape);

  // A node named `name` as it is, with attr T = DT_FLOAT unless `typed` is
  // false.
  pb::NodeDef* NamedNode(const char* op, const std::string& name,
                         const std::vector<std::string>& inputs,
                         bool typed = true);
  // NamedNode under UniqueName(base).
  pb::NodeDef* NewNode(const char* op, const std::string& base,
                       const std::vector<std::string>& inputs,
                       bool typed = true) {
    return NamedNode(op, UniqueName(base), inputs, typed);
  }
  // The node that computes `value` for graph node `n`: named `n.name`, or
  // the logits' reserved name when that is n.name.
  pb::NodeDef* OutputNode(const char* op, const GraphNode& n, int value,
                          const std::vector<std::string>& inputs,
                          bool typed = true);
  std::string UniqueName(const std::string& base);
  std::string FloatConst(const std::string& name, const torch::Tensor& t);
  std::string IntConst(const std::string& name,
                       const std::vector<int32_t>& values,
                       const std::vector<int64_t>& shape);
  std::string In(const GraphNode& n, size_t i) const {
    return value_names_[n.inputs[i]];
  }
  const std::vector<int64_t>& ShapeOf(int value) const {
    return g_.values[value].shape;
  }
  void ExpectRank(const GraphNode& n, int value, size_t rank) const;

  const InferenceGraph& g_;
  const GraphDefOptions o_;
  pb::GraphDef graph_;
  std::string logits_name_, predictions_name_;
  std::vector<int> producer_;                // per value: node index or -1
  std::vector<std::vector<int>> consumers_;  // per value: node indices
  std::vector<bool> live_;                   // per node
  std::vector<int> fold_;     // per conv node: the batch norm folded into it
  std::vector<bool> folded_;  // per batch norm node: folded away
  std::vector<std::string> value_names_;  // per value: its node's name
  std::set<std::string> used_names_;
};

pb::GraphDef GraphDefBuilder::Build() {
  SLIM_CHECK(o_.batch_size() >= 0, "GraphDef export: batch_size ",
             o_.batch_size(), " is negative (0 = dynamic)");
  GraphPlan plan = PlanGraph(g_, o_.fold_batch_norm(), "GraphDef export");
  producer_ = std::move(plan.producer);
  consumers_ = std::move(plan.consumers);
  live_ = std::move(plan.live);
  fold_ = std::move(plan.fold);
  folded_ = std::move(plan.folded);
  const std::string prefix = g_.scope.empty() ? "" : g_.scope + "/";
  logits_name_ = prefix + "Logits";
  predictions_name_ = prefix + "Predictions/Reshape_1";
  used_names_ = {"input", logits_name_, predictions_name_};
  value_names_.assign(g_.values.size(), "");
  AddInput();
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (live_[i] && !folded_[i]) AddNode(static_cast<int>(i));
  }
  AddOutputs();
  graph_.mutable_versions()->set_producer(kGraphDefProducer);
  return std::move(graph_);
}

std::string GraphDefBuilder::UniqueName(const std::string& base) {
  std::string name = base;
  for (int k = 1; used_names_.count(name); ++k) name = StrCat(base, "_", k);
  used_names_.insert(name);
  return name;
}

pb::NodeDef* GraphDefBuilder::NamedNode(const char* op, const std::string& name,
                                        const std::vector<std::string>& inputs,
                                        bool typed) {
  pb::NodeDef* node = graph_.add_node();
  node->set_name(name);
  node->set_op(op);
  for (const std::string& in : inputs) node->add_input(in);
  if (typed) SetType(node, "T", pb::DT_FLOAT);
  return node;
}

pb::NodeDef* GraphDefBuilder::OutputNode(
    const char* op, const GraphNode& n, int value,
    const std::vector<std::string>& inputs, bool typed) {
  // The logits' name is reserved (taken by an Identity when no node of
  // that name computes them).
  const bool logits = value == g_.logits && n.name == logits_name_;
  pb::NodeDef* node =
      NamedNode(op, logits ? logits_name_ : UniqueName(n.name), inputs, typed);
  value_names_[value] = node->name();
  return node;
}

std::string GraphDefBuilder::FloatConst(const std::string& name,
                                        const torch::Tensor& t) {
  pb::NodeDef* node = NewNode("Const", name, {}, /*typed=*/false);
  SetType(node, "dtype", pb::DT_FLOAT);
  pb::TensorProto* value = Attr(node, "value").mutable_tensor();
  value->set_dtype(pb::DT_FLOAT);
  SetShape(value->mutable_tensor_shape(), t.sizes().vec());
  value->set_tensor_content(LittleEndianFloats(t));
  return node->name();
}

std::string GraphDefBuilder::IntConst(const std::string& name,
                                      const std::vector<int32_t>& values,
                                      const std::vector<int64_t>& shape) {
  pb::NodeDef* node = NewNode("Const", name, {}, /*typed=*/false);
  SetType(node, "dtype", pb::DT_INT32);
  pb::TensorProto* value = Attr(node, "value").mutable_tensor();
  value->set_dtype(pb::DT_INT32);
  SetShape(value->mutable_tensor_shape(), shape);
  value->set_tensor_content(LittleEndianInts(values));
  return node->name();
}

void GraphDefBuilder::ExpectRank(const GraphNode& n, int value,
                                 size_t rank) const {
  ::slimtorch::ExpectRank("GraphDef export", n, ShapeOf(value), rank);
}

// NHWC images (a video net's NDHWC clips: [N, T, H, W, C]), as TF-Slim's
// placeholder.
void GraphDefBuilder::AddInput() {
  const std::vector<int64_t>& in = ShapeOf(g_.input);
  const int64_t batch = o_.batch_size() > 0 ? o_.batch_size() : -1;
  pb::NodeDef* node = NamedNode("Placeholder", "input", {}, /*typed=*/false);
  SetType(node, "dtype", pb::DT_FLOAT);
  std::vector<int64_t> shape(in.begin() + 2, in.end());
  shape.insert(shape.begin(), batch);
  shape.push_back(in[1]);
  SetShape(Attr(node, "shape").mutable_shape(), shape);
  value_names_[g_.input] = "input";
}

// The outputs under the names TF-Slim users pass to label_image:
// Identity nodes unless the logits' own node already has the name.
void GraphDefBuilder::AddOutputs() {
  if (value_names_[g_.logits] != logits_name_) {
    NamedNode("Identity", logits_name_, {value_names_[g_.logits]});
  }
  NamedNode("Identity", predictions_name_, {value_names_[g_.predictions]});
}

void GraphDefBuilder::AddNode(int index) {
  const GraphNode& n = g_.nodes[index];
  CheckInputCount("GraphDef export", n);
  if (AddVideoNode(index) || AddMobileNetV3Node(n)) return;
  switch (n.op) {
    case GraphOp::kConv:
      AddConv(n, fold_[index] >= 0 ? &g_.nodes[fold_[index]] : nullptr);
      return;
    case GraphOp::kBatchNorm:
      AddBatchNorm(n);
      return;
    case GraphOp::kRelu:
      OutputNode("Relu", n, n.output, {In(n, 0)});
      return;
    case GraphOp::kRelu6:
      OutputNode("Relu6", n, n.output, {In(n, 0)});
      return;
    case GraphOp::kMaxPool:
      AddPool(n, "MaxPool");
      return;
    case GraphOp::kAvgPool:
      AddPool(n, "AvgPool");
      return;
    case GraphOp::kLrn:
      AddLrn(n);
      return;
    case GraphOp::kFullyConnected:
      AddFullyConnected(n);
      return;
    case GraphOp::kConcat:
      AddConcat(n);
      return;
    case GraphOp::kAdd:
      OutputNode("AddV2", n, n.output, {In(n, 0), In(n, 1)});
      return;
    case GraphOp::kScale:
      AddWithConstant(n, "Mul");
      return;
    case GraphOp::kFlatten:
      AddFlatten(n);
      return;
    case GraphOp::kMean:
      AddMean(n);
      return;
    case GraphOp::kSqueeze:
      AddSqueeze(n);
      return;
    case GraphOp::kSoftmax:
      OutputNode("Softmax", n, n.output, {In(n, 0)});
      return;
    case GraphOp::kFakeQuant:
      AddFakeQuant(n);
      return;
    default:  // the ops AddVideoNode and AddMobileNetV3Node write
      break;
  }
  SLIM_FAIL("GraphDef export: node '", n.name, "' has an unknown op ",
            static_cast<int>(n.op));
}

// The video nets' ops (I3D, S3D-G); false for any other op.
bool GraphDefBuilder::AddVideoNode(int index) {
  const GraphNode& n = g_.nodes[index];
  switch (n.op) {
    case GraphOp::kConv3d:
      AddConv3d(n, fold_[index] >= 0 ? &g_.nodes[fold_[index]] : nullptr);
      return true;
    case GraphOp::kMaxPool3d:
      AddPool3d(n, "MaxPool3D");
      return true;
    case GraphOp::kAvgPool3d:
      AddPool3d(n, "AvgPool3D");
      return true;
    case GraphOp::kSigmoid:
      OutputNode("Sigmoid", n, n.output, {In(n, 0)});
      return true;
    default:
      return false;
  }
}

// x (op) the node's constant (factor), as a float32 Const.
void GraphDefBuilder::AddWithConstant(const GraphNode& n, const char* op) {
  const std::string y =
      FloatConst(n.name + "/y", torch::tensor(static_cast<float>(n.factor)));
  OutputNode(op, n, n.output, {In(n, 0), y});
}

// Mul (MobileNet v3's squeeze-excite gates and hard-swish, S3D-G's
// self-gating: Mul broadcasts [N, 1, 1, C] over the map) and x + 3 of
// hard-swish / hard-sigmoid.
bool GraphDefBuilder::AddMobileNetV3Node(const GraphNode& n) {
  if (n.op == GraphOp::kMul) {
    OutputNode("Mul", n, n.output, {In(n, 0), In(n, 1)});
  } else if (n.op == GraphOp::kAddConstant) {
    AddWithConstant(n, "AddV2");
  } else {
    return false;
  }
  return true;
}

// `bn`, when set, is folded in (FoldBatchNorm). A convolution with one input
// channel per group and as many groups as input channels is depthwise
// (filter [kh, kw, in, multiplier], output channel c·multiplier + m); any
// other grouping has no TensorFlow op.
void GraphDefBuilder::AddConv(const GraphNode& n, const GraphNode* bn) {
  const ConvShape shape =
      CheckConvWeights("GraphDef export", n, ShapeOf(n.inputs[0]));
  const int64_t in_channels = shape.in_channels;
  const int64_t group = shape.group;
  const int64_t out_channels = shape.out_channels;
  const bool depthwise = group > 1 && n.weights.size(1) == 1;
  SLIM_CHECK(group == 1 || (depthwise && out_channels % group == 0),
             "GraphDef export: node '", n.name, "' (Conv) is grouped (", group,
             " groups of ", n.weights.size(1), " input channels, ",
             out_channels,
             " outputs); TensorFlow runs only plain (1 group) or depthwise "
             "(1 input channel per group, a multiple of it as outputs) ones");
  SLIM_CHECK(!n.bias.defined() || n.bias.numel() == out_channels,
             "GraphDef export: node '", n.name, "' (Conv): expected ",
             out_channels, " biases, got ", n.bias.numel());
  torch::Tensor w = n.weights, b = n.bias;
  const GraphNode& last = bn != nullptr ? *bn : n;
  if (bn != nullptr) FoldBatchNorm("GraphDef export", n, *bn, &w, &b);
  const int64_t kh = w.size(2), kw = w.size(3);
  const torch::Tensor filter =
      depthwise ? w.reshape({in_channels, out_channels / in_channels, kh, kw})
                      .permute({2, 3, 0, 1})
                : w.permute({2, 3, 1, 0});
  const std::string weights = QuantizedWeights(
      n, FloatConst(n.name + "/weights", filter), filter.sizes().vec());
  const std::vector<std::string> inputs = {In(n, 0), weights};
  const char* op = depthwise ? "DepthwiseConv2dNative" : "Conv2D";
  pb::NodeDef* conv = b.defined() ? NewNode(op, n.name + "/" + op, inputs)
                                  : OutputNode(op, last, last.output, inputs);
  const Padding padding = PaddingOf(n, ShapeOf(n.inputs[0]), kh, kw);
  SetInts(conv, "strides", {1, n.stride, n.stride, 1});
  SetString(conv, "padding", padding.mode);
  if (!padding.explicit_paddings.empty()) {
    SetInts(conv, "explicit_paddings", padding.explicit_paddings);
  }
  SetString(conv, "data_format", "NHWC");
  SetInts(conv, "dilations", {1, 1, 1, 1});
  if (!b.defined()) return;
  const std::string biases = FloatConst(n.name + "/biases", b.reshape({-1}));
  SetString(OutputNode("BiasAdd", last, last.output, {conv->name(), biases}),
            "data_format", "NHWC");
}

// FusedBatchNormV3 in inference mode on 4-D values; on 2-D (and a video
// net's 5-D) ones x·k + (offset − mean·k) with k = scale/√(variance + ε),
// broadcast along the channels, their last axis in TensorFlow's order.
void GraphDefBuilder::AddBatchNorm(const GraphNode& n) {
  const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
  SLIM_CHECK(s.size() == 4 || s.size() == 2 || s.size() == 5,
             "GraphDef export: node '", n.name,
             "' (BatchNorm) expects [N, C, H, W], [N, C, T, H, W] or [N, C], "
             "got ",
             ShapeString(s));
  const std::pair<const torch::Tensor*, const char*> params[] = {
      {&n.scale, "gamma"},
      {&n.offset, "beta"},
      {&n.mean, "moving_mean"},
      {&n.variance, "moving_variance"}};
  for (const auto& p : params) {
    SLIM_CHECK(p.first->defined() && p.first->numel() == s[1],
               "GraphDef export: node '", n.name, "' (BatchNorm): expected ",
               s[1], " values for ", p.second);
  }
  if (s.size() != 4) {
    auto d = [](const torch::Tensor& t) {
      return t.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
    };
    const torch::Tensor k = d(n.scale) / (d(n.variance) + n.epsilon).sqrt();
    const torch::Tensor b = d(n.offset) - d(n.mean) * k;
    pb::NodeDef* mul =
        NewNode("Mul", n.name + "/mul",
                {In(n, 0), FloatConst(n.name + "/k", k.to(torch::kFloat))});
    OutputNode("AddV2", n, n.output,
               {mul->name(), FloatConst(n.name + "/b", b.to(torch::kFloat))});
    return;
  }
  std::vector<std::string> inputs = {In(n, 0)};
  for (const auto& p : params) {
    inputs.push_back(
        FloatConst(n.name + "/" + p.second, p.first->reshape({-1})));
  }
  pb::NodeDef* node = OutputNode("FusedBatchNormV3", n, n.output, inputs);
  SetType(node, "U", pb::DT_FLOAT);
  SetFloat(node, "epsilon", n.epsilon);
  SetFloat(node, "exponential_avg_factor", 1.0);
  SetBool(node, "is_training", false);
  SetString(node, "data_format", "NHWC");
}

// Padded cells never win a MaxPool (SAME or EXPLICIT), and TensorFlow's SAME
// AvgPool averages over the cells inside the input only, as the graph's
// AvgPool does; AvgPool has no EXPLICIT padding.
void GraphDefBuilder::AddPool(const GraphNode& n, const char* op) {
  ExpectRank(n, n.inputs[0], 4);
  const Padding padding =
      PaddingOf(n, ShapeOf(n.inputs[0]), n.kernel_h, n.kernel_w);
  if (n.op == GraphOp::kAvgPool && padding.mode == "EXPLICIT") {
    const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
    const auto h = SamePads(s[2], n.kernel_h, n.stride);
    const auto w = SamePads(s[3], n.kernel_w, n.stride);
    SLIM_FAIL("GraphDef export: node '", n.name, "' (AvgPool) has pads ",
              PadsString(n.pads), ", which are neither zero nor TensorFlow's ",
              "SAME pads ", PadsString({h.first, w.first, h.second, w.second}),
              " for its ", s[2], "x", s[3], " input (", n.kernel_h, "x",
              n.kernel_w, " window, stride ", n.stride,
              "); TensorFlow's AvgPool takes no explicit padding");
  }
  pb::NodeDef* node = OutputNode(op, n, n.output, {In(n, 0)});
  SetInts(node, "ksize", {1, n.kernel_h, n.kernel_w, 1});
  SetInts(node, "strides", {1, n.stride, n.stride, 1});
  SetString(node, "padding", padding.mode);
  if (!padding.explicit_paddings.empty()) {
    SetInts(node, "explicit_paddings", padding.explicit_paddings);
  }
  SetString(node, "data_format", "NHWC");
}

// The graph holds tf.nn.lrn's own parameters: no conversion.
void GraphDefBuilder::AddLrn(const GraphNode& n) {
  ExpectRank(n, n.inputs[0], 4);
  pb::NodeDef* node = OutputNode("LRN", n, n.output, {In(n, 0)});
  SetInt(node, "depth_radius", n.depth_radius);
  SetFloat(node, "bias", n.lrn_bias);
  SetFloat(node, "alpha", n.lrn_alpha);
  SetFloat(node, "beta", n.lrn_beta);
}

void GraphDefBuilder::AddFullyConnected(const GraphNode& n) {
  ExpectRank(n, n.inputs[0], 2);
  const int64_t in = ShapeOf(n.inputs[0])[1];
  SLIM_CHECK(
      n.weights.defined() && n.weights.dim() == 2 && n.weights.size(1) == in,
      "GraphDef export: node '", n.name,
      "' (FullyConnected) expects weights [out, ", in, "], got ",
      n.weights.defined() ? ShapeString(n.weights.sizes().vec())
                          : std::string("none"));
  SLIM_CHECK(!n.bias.defined() || n.bias.numel() == n.weights.size(0),
             "GraphDef export: node '", n.name, "' (FullyConnected): expected ",
             n.weights.size(0), " biases, got ", n.bias.numel());
  const std::vector<std::string> inputs = {
      In(n, 0),
      QuantizedWeights(n, FloatConst(n.name + "/weights", n.weights.t()),
                       {n.weights.size(1), n.weights.size(0)})};
  pb::NodeDef* matmul = n.bias.defined()
                            ? NewNode("MatMul", n.name + "/MatMul", inputs)
                            : OutputNode("MatMul", n, n.output, inputs);
  SetBool(matmul, "transpose_a", false);
  SetBool(matmul, "transpose_b", false);
  if (!n.bias.defined()) return;
  const std::string biases =
      FloatConst(n.name + "/biases", n.bias.reshape({-1}));
  SetString(OutputNode("BiasAdd", n, n.output, {matmul->name(), biases}),
            "data_format", "NHWC");
}

// Channels are the last axis of NHWC values (3), NDHWC ones (4), or of
// [N, F] ones (1).
void GraphDefBuilder::AddConcat(const GraphNode& n) {
  const size_t rank = ShapeOf(n.inputs[0]).size();
  SLIM_CHECK(rank == 4 || rank == 2 || rank == 5, "GraphDef export: node '",
             n.name, "' (Concat) expects 4-D, 5-D or 2-D inputs, got shape ",
             ShapeString(ShapeOf(n.inputs[0])));
  std::vector<std::string> inputs;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    ExpectRank(n, n.inputs[i], rank);
    inputs.push_back(In(n, i));
  }
  inputs.push_back(
      IntConst(n.name + "/axis", {static_cast<int32_t>(rank) - 1},
               /*shape=*/{}));
  pb::NodeDef* node = OutputNode("ConcatV2", n, n.output, inputs);
  SetInt(node, "N", static_cast<int64_t>(n.inputs.size()));
  SetType(node, "Tidx", pb::DT_INT32);
}

// NHWC values flatten in TensorFlow's (and the graph's) NHWC order.
void GraphDefBuilder::AddFlatten(const GraphNode& n) {
  ExpectRank(n, n.inputs[0], 4);
  const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
  const int64_t features = s[1] * s[2] * s[3];
  SLIM_CHECK(features <= INT32_MAX, "GraphDef export: node '", n.name,
             "' (Flatten) has ", features, " features, over int32");
  const std::string shape =
      IntConst(n.name + "/shape", {-1, static_cast<int32_t>(features)}, {2});
  SetType(OutputNode("Reshape", n, n.output, {In(n, 0), shape}), "Tshape",
          pb::DT_INT32);
}

// Over H and W of NHWC values, over T, H and W of NDHWC ones.
void GraphDefBuilder::AddMean(const GraphNode& n) {
  const bool video = ShapeOf(n.inputs[0]).size() == 5;
  if (!video) ExpectRank(n, n.inputs[0], 4);
  const std::string axes =
      video ? IntConst(n.name + "/reduction_indices", {1, 2, 3}, {3})
            : IntConst(n.name + "/reduction_indices", {1, 2}, {2});
  pb::NodeDef* node = OutputNode("Mean", n, n.output, {In(n, 0), axes});
  SetBool(node, "keep_dims", true);
  SetType(node, "Tidx", pb::DT_INT32);
}

void GraphDefBuilder::AddSqueeze(const GraphNode& n) {
  const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
  SLIM_CHECK((s.size() == 4 || s.size() == 5) && s[2] == 1 && s[3] == 1 &&
                 (s.size() == 4 || s[4] == 1),
             "GraphDef export: node '", n.name,
             "' (Squeeze) expects [N, C, 1, 1] or [N, C, 1, 1, 1], got ",
             ShapeString(s));
  SetInts(OutputNode("Squeeze", n, n.output, {In(n, 0)}), "squeeze_dims",
          s.size() == 5 ? std::vector<int64_t>{1, 2, 3}
                        : std::vector<int64_t>{1, 2});
}

// ---- Video nets (I3D, S3D-G): NCDHW values, NDHWC in TensorFlow. ----

// A 3-D window's padding: "VALID" or "SAME" (TensorFlow's 3-D ops take no
// explicit pads); any other pads are an error.
std::string Padding3d(const GraphNode& n, const std::vector<int64_t>& in) {
  const auto& p = n.pads;
  if (n.pads_t[0] == 0 && n.pads_t[1] == 0 && p[0] == 0 && p[1] == 0 &&
      p[2] == 0 && p[3] == 0) {
    return "VALID";
  }
  const auto t = SamePads(in[2], n.kernel_t, n.stride_t);
  const auto h = SamePads(in[3], n.kernel_h, n.stride);
  const auto w = SamePads(in[4], n.kernel_w, n.stride);
  SLIM_CHECK(n.pads_t[0] == t.first && n.pads_t[1] == t.second &&
                 p[0] == h.first && p[2] == h.second && p[1] == w.first &&
                 p[3] == w.second,
             "GraphDef export: node '", n.name, "' (", GraphOpName(n.op),
             ") has pads front ", n.pads_t[0], ", back ", n.pads_t[1], ", ",
             PadsString(p),
             ", which are neither zero nor TensorFlow's SAME pads; its 3-D "
             "ops take no explicit padding");
  return "SAME";
}

// `bn`, when set, is folded in (FoldBatchNorm).
void GraphDefBuilder::AddConv3d(const GraphNode& n, const GraphNode* bn) {
  CheckConv3dWeights("GraphDef export", n, ShapeOf(n.inputs[0]));
  torch::Tensor w = n.weights, b = n.bias;
  const GraphNode& last = bn != nullptr ? *bn : n;
  if (bn != nullptr) FoldBatchNorm("GraphDef export", n, *bn, &w, &b);
  const torch::Tensor filter = w.permute({2, 3, 4, 1, 0});
  const std::string weights = QuantizedWeights(
      n, FloatConst(n.name + "/weights", filter), filter.sizes().vec());
  const std::vector<std::string> inputs = {In(n, 0), weights};
  pb::NodeDef* conv = b.defined()
                          ? NewNode("Conv3D", n.name + "/Conv3D", inputs)
                          : OutputNode("Conv3D", last, last.output, inputs);
  SetInts(conv, "strides", {1, n.stride_t, n.stride, n.stride, 1});
  SetString(conv, "padding", Padding3d(n, ShapeOf(n.inputs[0])));
  SetString(conv, "data_format", "NDHWC");
  SetInts(conv, "dilations", {1, 1, 1, 1, 1});
  if (!b.defined()) return;
  const std::string biases = FloatConst(n.name + "/biases", b.reshape({-1}));
  SetString(OutputNode("BiasAdd", last, last.output, {conv->name(), biases}),
            "data_format", "NHWC");
}

// TensorFlow's SAME AvgPool3D averages over the cells inside the input only,
// as the graph's does.
void GraphDefBuilder::AddPool3d(const GraphNode& n, const char* op) {
  ExpectRank(n, n.inputs[0], 5);
  pb::NodeDef* node = OutputNode(op, n, n.output, {In(n, 0)});
  SetInts(node, "ksize", {1, n.kernel_t, n.kernel_h, n.kernel_w, 1});
  SetInts(node, "strides", {1, n.stride_t, n.stride, n.stride, 1});
  SetString(node, "padding", Padding3d(n, ShapeOf(n.inputs[0])));
  SetString(node, "data_format", "NDHWC");
}

// ---- 8-bit nets: TensorFlow's fake quantization ops, as the graphs of
// contrib.quantize's eval rewrite (export_inference_graph --quantize) hold
// them. ----

// Checks range `q` of node `n` (`what`: "range", "weight range"): TensorFlow's
// 2 to 16 bits, one value or `channels` values.
void CheckRange(const GraphNode& n, const nets::QuantRange& q, const char* what,
                int64_t channels) {
  SLIM_CHECK(q.defined() && q.max.defined(), "GraphDef export: node '", n.name,
             "' (", GraphOpName(n.op), ") has no ", what);
  SLIM_CHECK(q.num_bits >= 2 && q.num_bits <= 16, "GraphDef export: node '",
             n.name, "' (", GraphOpName(n.op), "): its ", what, " has ",
             q.num_bits, " bits; TensorFlow's fake quantization takes 2 to 16");
  const int64_t want = q.axis < 0 ? 1 : channels;
  SLIM_CHECK(q.min.numel() == want && q.max.numel() == want,
             "GraphDef export: node '", n.name, "' (", GraphOpName(n.op),
             "): its ", what, " has ", q.min.numel(), " values, expected ",
             want);
}

void GraphDefBuilder::AddFakeQuant(const GraphNode& n) {
  const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
  const nets::QuantRange& q = n.quant;
  // Channels are the last axis in TensorFlow's NHWC (and of [N, F]).
  SLIM_CHECK(q.axis < 0 || q.axis == 1, "GraphDef export: node '", n.name,
             "' (FakeQuant): per-channel along axis ", q.axis,
             "; per tensor or along the channels (axis 1) are supported");
  CheckRange(n, q, "range", s.size() > 1 ? s[1] : 1);
  auto shaped = [&](const torch::Tensor& t) {
    return q.axis < 0 ? t.reshape({}) : t.reshape({-1});
  };
  const std::string min = FloatConst(n.name + "/min", shaped(q.min));
  const std::string max = FloatConst(n.name + "/max", shaped(q.max));
  pb::NodeDef* node = OutputNode(q.axis < 0 ? "FakeQuantWithMinMaxVars"
                                            : "FakeQuantWithMinMaxVarsPerChannel",
                                 n, n.output, {In(n, 0), min, max},
                                 /*typed=*/false);
  SetInt(node, "num_bits", q.num_bits);
  SetBool(node, "narrow_range", q.narrow_range);
}

std::string GraphDefBuilder::Reshape(const std::string& name,
                                     const std::string& x,
                                     const std::vector<int64_t>& shape) {
  std::vector<int32_t> dims(shape.begin(), shape.end());
  const std::string to = IntConst(name + "/shape", dims,
                                  {static_cast<int64_t>(shape.size())});
  pb::NodeDef* node = NewNode("Reshape", name, {x, to});
  SetType(node, "Tshape", pb::DT_INT32);
  return node->name();
}

// Per channel over the output channels: TensorFlow's per-channel op takes
// the last dimension of a 1-, 2- or 4-D value, so a depthwise filter
// [kh, kw, in, multiplier] (output channel c·multiplier + m, as its flat
// last two dimensions) or a 3-D conv's 5-D filter goes through
// [elements / out, out] and back.
std::string GraphDefBuilder::QuantizedWeights(
    const GraphNode& n, const std::string& weights,
    const std::vector<int64_t>& shape) {
  const nets::QuantRange& q = n.weights_quant;
  if (!q.defined()) return weights;
  SLIM_CHECK(q.axis == -1 || q.axis == 0, "GraphDef export: node '", n.name,
             "' (", GraphOpName(n.op), "): weights quantized along axis ",
             q.axis, "; per tensor or per output channel (axis 0) are "
             "supported");
  const int64_t out = n.weights.size(0);
  CheckRange(n, q, "weight range", out);
  const std::string base = n.name + "/weights_quant";
  auto shaped = [&](const torch::Tensor& t) {
    return q.axis < 0 ? t.reshape({}) : t.reshape({-1});
  };
  const std::string min = FloatConst(base + "/min", shaped(q.min));
  const std::string max = FloatConst(base + "/max", shaped(q.max));
  const bool reshape = q.axis >= 0 && (shape.back() != out ||
                                       (shape.size() != 2 && shape.size() != 4));
  std::string x = weights;
  if (reshape) {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    x = Reshape(base + "/Reshape", x, {elements / out, out});
  }
  pb::NodeDef* node =
      NewNode(q.axis < 0 ? "FakeQuantWithMinMaxVars"
                         : "FakeQuantWithMinMaxVarsPerChannel",
              base + (q.axis < 0 ? "/FakeQuantWithMinMaxVars"
                                 : "/FakeQuantWithMinMaxVarsPerChannel"),
              {x, min, max}, /*typed=*/false);
  SetInt(node, "num_bits", q.num_bits);
  SetBool(node, "narrow_range", q.narrow_range);
  return reshape ? Reshape(base + "/Reshape_1", node->name(), shape)
                 : node->name();
}

pb::GraphDef BuildGraphDef(const InferenceGraph& graph,
                           const GraphDefOptions& options) {
  pb::GraphDef def = GraphDefBuilder(graph, options).Build();
  // Protobuf cannot serialize a message of 2 GiB or more.
  const size_t size = def.ByteSizeLong();
  SLIM_CHECK(size <= static_cast<size_t>(INT_MAX), "GraphDef export of ",
             graph.scope, ": the graph takes ", size,
             " bytes, over protobuf's 2 GiB limit");
  return def;
}

}  // namespace

std::string GraphDefBytes(const InferenceGraph& graph,
                          const GraphDefOptions& options) {
  const pb::GraphDef def = BuildGraphDef(graph, options);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // attr maps in key order
    SLIM_CHECK(def.SerializeToCodedStream(&coded), "GraphDef export of ",
               graph.scope, ": serializing the graph failed");
  }
  return bytes;
}

std::string GraphDefText(const InferenceGraph& graph,
                         const GraphDefOptions& options) {
  const pb::GraphDef def = BuildGraphDef(graph, options);
  std::string text;
  SLIM_CHECK(google::protobuf::TextFormat::PrintToString(def, &text),
             "GraphDef export of ", graph.scope,
             ": printing the graph as text failed");
  return text;
}

void WriteGraphDef(const std::string& path, const InferenceGraph& graph,
                   const GraphDefOptions& options, bool text) {
  WriteFileAtomically(path, text ? GraphDefText(graph, options)
                                 : GraphDefBytes(graph, options));
}

}  // namespace slimtorch
