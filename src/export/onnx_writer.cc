#include "slimtorch/export/onnx_writer.h"

#include <climits>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "graph_plan.h"
#include "little_endian.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/proto/onnx.pb.h"
#include "slimtorch/nets/fake_quant.h"

namespace slimtorch {
namespace {

namespace pb = ::slimtorch::onnx;

constexpr int kMinOpset = 11;  // Clip's bounds are inputs from 11 on
constexpr int kMaxOpset = 21;

// The IR version of the ONNX release that introduced each opset
// (onnx/helper.py VERSION_TABLE: opset 13 came with ONNX 1.8, IR 7).
// Readers refuse a model whose IR version is older than its opset needs.
int64_t IrVersionForOpset(int opset) {
  static const int64_t kIr[] = {6, 7, 7, 7, 8, 8, 8, 8, 9, 9, 10};
  return kIr[opset - kMinOpset];
}

void AddIntAttr(pb::NodeProto* node, const char* name, int64_t value) {
  pb::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INT);
  a->set_i(value);
}

void AddIntsAttr(pb::NodeProto* node, const char* name,
                 const std::vector<int64_t>& values) {
  pb::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void AddFloatAttr(pb::NodeProto* node, const char* name, double value) {
  pb::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(value));
}

void SetShape(pb::ValueInfoProto* info, const std::vector<int64_t>& shape,
              int64_t batch_size) {
  pb::TypeProto::Tensor* type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(pb::TensorProto::FLOAT);
  pb::TensorShapeProto* s = type->mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    pb::TensorShapeProto::Dimension* d = s->add_dim();
    if (i > 0) {
      d->set_dim_value(shape[i]);
    } else if (batch_size > 0) {
      d->set_dim_value(batch_size);
    } else {
      d->set_dim_param("batch");
    }
  }
}

// Builds the ModelProto in phases: check the graph, find the live nodes and
// the batch norms to fold, name the values, then emit the input, every live
// node in execution order, and the outputs.
class OnnxBuilder {
 public:
  OnnxBuilder(const InferenceGraph& graph, const OnnxOptions& options)
      : g_(graph), o_(options), graph_(model_.mutable_graph()) {}

  pb::ModelProto Build();

 private:
  void CheckOptions() const;
  void NameValues();
  void AddInput();
  void AddNode(int index);
  bool AddVideoNode(int index);  // the video nets' ops
  void AddOutputs();

  void AddConv(const GraphNode& n, const GraphNode* bn);
  // The Conv node of conv `n` (`bn`, when set, folded in: FoldBatchNorm),
  // its weights and biases as initializers; `w` gets the weights written.
  pb::NodeProto* NewConv(const GraphNode& n, const GraphNode* bn,
                         torch::Tensor* w);
  void AddBatchNorm(const GraphNode& n);
  void AddRelu6(const GraphNode& n);
  void AddConcat(const GraphNode& n);
  void AddSqueeze(const GraphNode& n);
  void AddPool(const GraphNode& n, const char* op_type);
  void AddLrn(const GraphNode& n);
  void AddFullyConnected(const GraphNode& n);
  void AddFlatten(const GraphNode& n);
  void AddMean(const GraphNode& n);
  // Video nets.
  void AddConv3d(const GraphNode& n, const GraphNode* bn);
  void AddPool3d(const GraphNode& n, const char* op_type);
  bool AddMobileNetV3Node(const GraphNode& n);  // false: another op
  // 8-bit nets: QuantizeLinear + DequantizeLinear pairs (QDQ form).
  struct Grid {  // a pair's scale and zero point initializers
    std::string scale, zero_point;
    int64_t axis = -1;  // per channel: the channel axis
  };
  Grid NewGrid(const std::string& name, const nets::Nudged& nudged,
               int64_t axis, pb::TensorProto::DataType type);
  // x → QuantizeLinear → DequantizeLinear → out, nodes named `base`/...
  void AddQdq(const std::string& base, const std::string& x, const Grid& g,
              const std::string& out);
  void AddFakeQuant(const GraphNode& n);
  // The weights input of conv / fully connected `n` with weights `w`: a
  // float initializer, or with weights_quant the integers TensorFlow's fake
  // quantization rounds them to, dequantized.
  std::string WeightsInput(const GraphNode& n, const torch::Tensor& w);
  // For an op that keeps its input's 8-bit grid (a max pool, a reshape):
  // the value it writes (its output, or one that KeepGrid then quantizes
  // again to its output with the input's grid).
  std::string KeptGridOut(const GraphNode& n);
  void KeepGrid(const GraphNode& n, const std::string& out);

  pb::NodeProto* NewNode(const char* op_type, const std::string& name,
                         const std::vector<std::string>& inputs,
                         const std::string& output);
  std::string AddInitializer(const std::string& name, const torch::Tensor& t);
  // Integer values `t` as an initializer of `type` (UINT8, INT8, INT32).
  std::string AddIntInitializer(const std::string& name, const torch::Tensor& t,
                                pb::TensorProto::DataType type);
  std::string Scalar(double value);
  std::string UniqueValueName(const std::string& base);
  std::string In(const GraphNode& n, size_t i) const {
    return value_names_[n.inputs[i]];
  }
  std::string Out(const GraphNode& n) const { return value_names_[n.output]; }
  const std::vector<int64_t>& ShapeOf(int value) const {
    return g_.values[value].shape;
  }
  void ExpectRank(const GraphNode& n, int value, size_t rank) const;

  const InferenceGraph& g_;
  const OnnxOptions o_;
  pb::ModelProto model_;
  pb::GraphProto* graph_;
  std::vector<int> producer_;                // per value: node index or -1
  std::vector<std::vector<int>> consumers_;  // per value: node indices
  std::vector<bool> live_;                   // per node
  std::vector<int> fold_;     // per conv node: the batch norm folded into it
  std::vector<bool> folded_;  // per batch norm node: folded away
  std::vector<std::string> value_names_;
  std::set<std::string> used_names_;  // values and initializers
  std::set<std::string> used_node_names_;
  std::map<uint32_t, std::string> scalars_;  // float bits → initializer
  bool quantized_ = false;     // the graph has fake-quant nodes or weights
  std::map<int, Grid> grids_;  // per value on an 8-bit grid: its grid
};

bool IsQuantized(const InferenceGraph& g) {
  for (const GraphNode& n : g.nodes) {
    if (n.op == GraphOp::kFakeQuant || n.weights_quant.defined()) return true;
  }
  return false;
}

pb::ModelProto OnnxBuilder::Build() {
  CheckOptions();
  GraphPlan plan = PlanGraph(g_, o_.fold_batch_norm(), "ONNX export");
  producer_ = std::move(plan.producer);
  consumers_ = std::move(plan.consumers);
  live_ = std::move(plan.live);
  fold_ = std::move(plan.fold);
  folded_ = std::move(plan.folded);
  quantized_ = IsQuantized(g_);
  NameValues();
  model_.set_ir_version(IrVersionForOpset(o_.opset()));
  pb::OperatorSetIdProto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(o_.opset());
  model_.set_producer_name(o_.producer());
  graph_->set_name(g_.scope.empty() ? "slimtorch" : g_.scope);
  AddInput();
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (live_[i] && !folded_[i]) AddNode(static_cast<int>(i));
  }
  AddOutputs();
  return std::move(model_);
}

void OnnxBuilder::CheckOptions() const {
  SLIM_CHECK(o_.opset() >= kMinOpset && o_.opset() <= kMaxOpset,
             "ONNX export: opset ", o_.opset(), " is not supported (expected ",
             kMinOpset, " to ", kMaxOpset, ")");
  SLIM_CHECK(o_.batch_size() >= 0, "ONNX export: batch_size ", o_.batch_size(),
             " is negative (0 = dynamic)");
}

std::string OnnxBuilder::UniqueValueName(const std::string& base) {
  std::string name = base;
  for (int k = 1; used_names_.count(name); ++k) {
    name = StrCat(base, "_", k);
  }
  used_names_.insert(name);
  return name;
}

// Values take their producing node's name; the input and outputs take the
// names a TF-Slim user looks for.
void OnnxBuilder::NameValues() {
  const std::string prefix = g_.scope.empty() ? "" : g_.scope + "/";
  value_names_.assign(g_.values.size(), "");
  used_names_ = {"input"};
  value_names_[g_.logits] = UniqueValueName(prefix + "Logits");
  value_names_[g_.predictions] = UniqueValueName(prefix + "Predictions");
  value_names_[g_.input] = UniqueValueName("input_nchw");
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    const int v = g_.nodes[i].output;
    if (live_[i] && value_names_[v].empty()) {
      value_names_[v] = UniqueValueName(g_.nodes[i].name);
    }
  }
}

pb::NodeProto* OnnxBuilder::NewNode(const char* op_type,
                                    const std::string& name,
                                    const std::vector<std::string>& inputs,
                                    const std::string& output) {
  pb::NodeProto* node = graph_->add_node();
  node->set_op_type(op_type);
  std::string unique = name;
  for (int k = 1; used_node_names_.count(unique); ++k) {
    unique = StrCat(name, "_", k);
  }
  used_node_names_.insert(unique);
  node->set_name(unique);
  for (const std::string& in : inputs) node->add_input(in);
  node->add_output(output);
  return node;
}

std::string OnnxBuilder::AddInitializer(const std::string& name,
                                        const torch::Tensor& t) {
  pb::TensorProto* init = graph_->add_initializer();
  init->set_name(UniqueValueName(name));
  for (int64_t d : t.sizes()) init->add_dims(d);
  init->set_data_type(pb::TensorProto::FLOAT);
  init->set_raw_data(LittleEndianFloats(t));
  return init->name();
}

std::string OnnxBuilder::AddIntInitializer(const std::string& name,
                                           const torch::Tensor& t,
                                           pb::TensorProto::DataType type) {
  pb::TensorProto* init = graph_->add_initializer();
  init->set_name(UniqueValueName(name));
  for (int64_t d : t.sizes()) init->add_dims(d);
  init->set_data_type(type);
  const torch::Tensor v =
      t.detach().to(torch::kCPU, torch::kLong).contiguous().reshape({-1});
  std::vector<int32_t> values(v.data_ptr<int64_t>(),
                              v.data_ptr<int64_t>() + v.numel());
  if (type == pb::TensorProto::INT32) {
    init->set_raw_data(LittleEndianInts(values));
  } else {  // one byte each (two's complement for INT8)
    init->set_raw_data(std::string(values.begin(), values.end()));
  }
  return init->name();
}

// A float32 scalar initializer, shared by every node that uses the value.
std::string OnnxBuilder::Scalar(double value) {
  const float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  auto it = scalars_.find(bits);
  if (it != scalars_.end()) return it->second;
  const std::string name =
      AddInitializer(StrCat("Const_", scalars_.size()), torch::tensor(f));
  scalars_[bits] = name;
  return name;
}

void OnnxBuilder::ExpectRank(const GraphNode& n, int value, size_t rank) const {
  ::slimtorch::ExpectRank("ONNX export", n, ShapeOf(value), rank);
}

// NHWC images (a video net's NDHWC clips: [N, T, H, W, C]), as TF-Slim's
// placeholder, transposed to the graph's channels-first values.
void OnnxBuilder::AddInput() {
  const std::vector<int64_t>& in = ShapeOf(g_.input);
  pb::ValueInfoProto* info = graph_->add_input();
  info->set_name("input");
  std::vector<int64_t> shape = in, perm = {0};
  shape.erase(shape.begin() + 1);
  shape.push_back(in[1]);
  for (size_t d = 1; d + 1 < in.size(); ++d) perm.push_back(d);
  perm.insert(perm.begin() + 1, static_cast<int64_t>(in.size()) - 1);
  SetShape(info, shape, o_.batch_size());
  pb::NodeProto* t = NewNode("Transpose", "input/Transpose", {"input"},
                             value_names_[g_.input]);
  AddIntsAttr(t, "perm", perm);
}

void OnnxBuilder::AddOutputs() {
  for (int v : {g_.logits, g_.predictions}) {
    pb::ValueInfoProto* info = graph_->add_output();
    info->set_name(value_names_[v]);
    SetShape(info, ShapeOf(v), o_.batch_size());
  }
}

void OnnxBuilder::AddNode(int index) {
  const GraphNode& n = g_.nodes[index];
  CheckInputCount("ONNX export", n);
  if (AddVideoNode(index) || AddMobileNetV3Node(n)) return;
  switch (n.op) {
    case GraphOp::kConv:
      AddConv(n, fold_[index] >= 0 ? &g_.nodes[fold_[index]] : nullptr);
      return;
    case GraphOp::kBatchNorm:
      AddBatchNorm(n);
      return;
    case GraphOp::kRelu:
      NewNode("Relu", n.name, {In(n, 0)}, Out(n));
      return;
    case GraphOp::kRelu6:
      AddRelu6(n);
      return;
    case GraphOp::kMaxPool:
      AddPool(n, "MaxPool");
      return;
    case GraphOp::kAvgPool:
      AddPool(n, "AveragePool");
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
      NewNode("Add", n.name, {In(n, 0), In(n, 1)}, Out(n));
      return;
    case GraphOp::kScale:
      NewNode("Mul", n.name, {In(n, 0), Scalar(n.factor)}, Out(n));
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
      AddIntAttr(NewNode("Softmax", n.name, {In(n, 0)}, Out(n)), "axis", -1);
      return;
    case GraphOp::kFakeQuant:
      AddFakeQuant(n);
      return;
    default:  // the ops AddVideoNode and AddMobileNetV3Node write
      break;
  }
  SLIM_FAIL("ONNX export: node '", n.name, "' has an unknown op ",
            static_cast<int>(n.op));
}

// The video nets' ops (I3D, S3D-G); false for any other op.
bool OnnxBuilder::AddVideoNode(int index) {
  const GraphNode& n = g_.nodes[index];
  switch (n.op) {
    case GraphOp::kConv3d:
      AddConv3d(n, fold_[index] >= 0 ? &g_.nodes[fold_[index]] : nullptr);
      return true;
    case GraphOp::kMaxPool3d:
      AddPool3d(n, "MaxPool");
      return true;
    case GraphOp::kAvgPool3d:
      AddPool3d(n, "AveragePool");
      return true;
    case GraphOp::kSigmoid:
      NewNode("Sigmoid", n.name, {In(n, 0)}, Out(n));
      return true;
    default:
      return false;
  }
}

void OnnxBuilder::AddRelu6(const GraphNode& n) {
  // A quantized net's Clip before its QuantizeLinear lets onnxruntime fuse
  // both into the op before them (OpenCV runs no QDQ models anyway).
  if (o_.relu6_as_clip() || quantized_) {
    NewNode("Clip", n.name, {In(n, 0), Scalar(0), Scalar(6)}, Out(n));
    return;
  }
  // 6 - Relu(6 - Relu(x)): OpenCV 4.6 imports Clip only in its
  // pre-opset-11 form (bounds as attributes). Off by at most an ulp
  // of 6 (4.8e-7) where the value is below 6, exact elsewhere.
  const std::string relu = UniqueValueName(n.name + "/Relu");
  const std::string room = UniqueValueName(n.name + "/Room");
  const std::string over = UniqueValueName(n.name + "/Over");
  NewNode("Relu", n.name + "/Relu", {In(n, 0)}, relu);
  NewNode("Sub", n.name + "/Room", {Scalar(6), relu}, room);
  NewNode("Relu", n.name + "/Over", {room}, over);
  NewNode("Sub", n.name, {Scalar(6), over}, Out(n));
}

// Mul (MobileNet v3's squeeze-excite gates [N, C, 1, 1] and hard-swish,
// S3D-G's self-gating; ONNX's multidirectional broadcasting) and x + 3 of
// hard-swish / hard-sigmoid.
bool OnnxBuilder::AddMobileNetV3Node(const GraphNode& n) {
  if (n.op == GraphOp::kMul) {
    NewNode("Mul", n.name, {In(n, 0), In(n, 1)}, Out(n));
  } else if (n.op == GraphOp::kAddConstant) {
    NewNode("Add", n.name, {In(n, 0), Scalar(n.factor)}, Out(n));
  } else {
    return false;
  }
  return true;
}

// The global mean: GlobalAveragePool over [N, C, H, W]; over the video
// nets' [N, C, T, H, W] an AveragePool whose window is the whole clip (the
// same mean: T, H and W are fixed in the file). OpenCV 4.6 cannot run the
// 5-D alternatives: it fails to import GlobalAveragePool (its pooling
// layer's getMemoryShapes: `addedDims <= pads_begin.size()`), and at a
// dynamic batch of 2 or more its ReduceMean returns [N, 1, C, 1, 1, 1],
// which breaks the convolution after S3D-G's gate means.
void OnnxBuilder::AddMean(const GraphNode& n) {
  const std::vector<int64_t>& in = ShapeOf(n.inputs[0]);
  if (in.size() != 5) {
    ExpectRank(n, n.inputs[0], 4);
    NewNode("GlobalAveragePool", n.name, {In(n, 0)}, Out(n));
    return;
  }
  pb::NodeProto* node = NewNode("AveragePool", n.name, {In(n, 0)}, Out(n));
  AddIntsAttr(node, "kernel_shape", {in[2], in[3], in[4]});
  AddIntsAttr(node, "pads", {0, 0, 0, 0, 0, 0});
  AddIntsAttr(node, "strides", {1, 1, 1});
}

void OnnxBuilder::AddConcat(const GraphNode& n) {
  std::vector<std::string> inputs;
  for (size_t i = 0; i < n.inputs.size(); ++i) inputs.push_back(In(n, i));
  AddIntAttr(NewNode("Concat", n.name, inputs, Out(n)), "axis", 1);
}

// Flatten rather than Squeeze: Squeeze takes its axes as an input from
// opset 13, which OpenCV 4.6's importer handles badly.
void OnnxBuilder::AddSqueeze(const GraphNode& n) {
  const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
  SLIM_CHECK((s.size() == 4 || s.size() == 5) && s[2] == 1 && s[3] == 1 &&
                 (s.size() == 4 || s[4] == 1),
             "ONNX export: node '", n.name,
             "' (Squeeze) expects [N, C, 1, 1] or [N, C, 1, 1, 1], got ",
             ShapeString(s));
  const std::string out = KeptGridOut(n);
  AddIntAttr(NewNode("Flatten", n.name, {In(n, 0)}, out), "axis", 1);
  KeepGrid(n, out);
}

pb::NodeProto* OnnxBuilder::NewConv(const GraphNode& n, const GraphNode* bn,
                                    torch::Tensor* w) {
  torch::Tensor b = n.bias;
  std::string output = Out(n);
  if (bn != nullptr) {
    FoldBatchNorm("ONNX export", n, *bn, w, &b);
    output = Out(*bn);
  }
  std::vector<std::string> inputs = {In(n, 0), WeightsInput(n, *w)};
  if (b.defined()) inputs.push_back(AddInitializer(n.name + "/biases", b));
  return NewNode("Conv", n.name, inputs, output);
}

// `bn`, when set, is folded in (FoldBatchNorm).
void OnnxBuilder::AddConv(const GraphNode& n, const GraphNode* bn) {
  const ConvShape shape =
      CheckConvWeights("ONNX export", n, ShapeOf(n.inputs[0]));
  const int64_t group = shape.group;
  const int64_t out_channels = shape.out_channels;
  SLIM_CHECK(out_channels % group == 0, "ONNX export: node '", n.name,
             "' (Conv): ", out_channels, " output channels are not a multiple ",
             "of the group ", group);
  SLIM_CHECK(!n.bias.defined() || n.bias.numel() == out_channels,
             "ONNX export: node '", n.name, "' (Conv): expected ", out_channels,
             " biases, got ", n.bias.numel());
  torch::Tensor w = n.weights;
  pb::NodeProto* node = NewConv(n, bn, &w);
  AddIntAttr(node, "group", group);
  AddIntsAttr(node, "kernel_shape", {w.size(2), w.size(3)});
  AddIntsAttr(node, "pads", {n.pads[0], n.pads[1], n.pads[2], n.pads[3]});
  AddIntsAttr(node, "strides", {n.stride, n.stride});
}

void OnnxBuilder::AddBatchNorm(const GraphNode& n) {
  const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
  SLIM_CHECK(s.size() >= 2, "ONNX export: node '", n.name,
             "' (BatchNorm) expects [N, C, ...], got ", ShapeString(s));
  std::vector<std::string> inputs = {In(n, 0)};
  const std::pair<const torch::Tensor*, const char*> params[] = {
      {&n.scale, "/gamma"},
      {&n.offset, "/beta"},
      {&n.mean, "/moving_mean"},
      {&n.variance, "/moving_variance"}};
  for (const auto& p : params) {
    SLIM_CHECK(p.first->defined() && p.first->numel() == s[1],
               "ONNX export: node '", n.name, "' (BatchNorm): expected ", s[1],
               " values for ", p.second + 1);
    inputs.push_back(AddInitializer(n.name + p.second, p.first->reshape({-1})));
  }
  AddFloatAttr(NewNode("BatchNormalization", n.name, inputs, Out(n)), "epsilon",
               n.epsilon);
}

// Explicit pads in ONNX's order (top, left, bottom, right = x1_begin,
// x2_begin, x1_end, x2_end). Padded cells never win a MaxPool, and
// count_include_pad = 0 averages over the cells inside the input only, as
// TensorFlow's SAME pooling does.
void OnnxBuilder::AddPool(const GraphNode& n, const char* op_type) {
  ExpectRank(n, n.inputs[0], 4);
  // A max of values on a grid is on it: quantized again, the max pool runs
  // on 8-bit values in onnxruntime. A mean is not (left float, as
  // TensorFlow's quantized graphs leave it).
  const std::string out = n.op == GraphOp::kMaxPool ? KeptGridOut(n) : Out(n);
  pb::NodeProto* node = NewNode(op_type, n.name, {In(n, 0)}, out);
  if (n.op == GraphOp::kAvgPool) AddIntAttr(node, "count_include_pad", 0);
  AddIntsAttr(node, "kernel_shape", {n.kernel_h, n.kernel_w});
  AddIntsAttr(node, "pads", {n.pads[0], n.pads[1], n.pads[2], n.pads[3]});
  AddIntsAttr(node, "strides", {n.stride, n.stride});
  if (n.op == GraphOp::kMaxPool) KeepGrid(n, out);
}

// TensorFlow sums squares over 2·depth_radius + 1 channels and scales the
// sum by alpha; ONNX's LRN divides alpha by the window size first.
void OnnxBuilder::AddLrn(const GraphNode& n) {
  ExpectRank(n, n.inputs[0], 4);
  const int64_t size = 2 * n.depth_radius + 1;
  pb::NodeProto* node = NewNode("LRN", n.name, {In(n, 0)}, Out(n));
  AddFloatAttr(node, "alpha", n.lrn_alpha * static_cast<double>(size));
  AddFloatAttr(node, "beta", n.lrn_beta);
  AddFloatAttr(node, "bias", n.lrn_bias);
  AddIntAttr(node, "size", size);
}

void OnnxBuilder::AddFullyConnected(const GraphNode& n) {
  ExpectRank(n, n.inputs[0], 2);
  const int64_t in = ShapeOf(n.inputs[0])[1];
  SLIM_CHECK(
      n.weights.defined() && n.weights.dim() == 2 && n.weights.size(1) == in,
      "ONNX export: node '", n.name,
      "' (FullyConnected) expects weights [out, ", in, "], got ",
      n.weights.defined() ? ShapeString(n.weights.sizes().vec())
                          : std::string("none"));
  SLIM_CHECK(!n.bias.defined() || n.bias.numel() == n.weights.size(0),
             "ONNX export: node '", n.name, "' (FullyConnected): expected ",
             n.weights.size(0), " biases, got ", n.bias.numel());
  std::vector<std::string> inputs = {In(n, 0), WeightsInput(n, n.weights)};
  if (n.bias.defined()) {
    inputs.push_back(AddInitializer(n.name + "/biases", n.bias.reshape({-1})));
  }
  AddIntAttr(NewNode("Gemm", n.name, inputs, Out(n)), "transB", 1);
}

// TensorFlow flattens NHWC activations: transpose to NHWC first so that the
// features come in the order the following weights expect.
void OnnxBuilder::AddFlatten(const GraphNode& n) {
  ExpectRank(n, n.inputs[0], 4);
  const std::string nhwc = UniqueValueName(n.name + "/NHWC");
  AddIntsAttr(NewNode("Transpose", n.name + "/Transpose", {In(n, 0)}, nhwc),
              "perm", {0, 2, 3, 1});
  const std::string out = KeptGridOut(n);
  AddIntAttr(NewNode("Flatten", n.name, {nhwc}, out), "axis", 1);
  KeepGrid(n, out);
}

// ---- Video nets (I3D, S3D-G): NCDHW values. ----

// `bn`, when set, is folded in (FoldBatchNorm). ONNX's 3-D pads: front,
// top, left, back, bottom, right.
void OnnxBuilder::AddConv3d(const GraphNode& n, const GraphNode* bn) {
  CheckConv3dWeights("ONNX export", n, ShapeOf(n.inputs[0]));
  torch::Tensor w = n.weights;
  pb::NodeProto* node = NewConv(n, bn, &w);
  AddIntAttr(node, "group", 1);
  AddIntsAttr(node, "kernel_shape", {w.size(2), w.size(3), w.size(4)});
  AddIntsAttr(node, "pads", {n.pads_t[0], n.pads[0], n.pads[1], n.pads_t[1],
                             n.pads[2], n.pads[3]});
  AddIntsAttr(node, "strides", {n.stride_t, n.stride, n.stride});
}

void OnnxBuilder::AddPool3d(const GraphNode& n, const char* op_type) {
  ExpectRank(n, n.inputs[0], 5);
  pb::NodeProto* node = NewNode(op_type, n.name, {In(n, 0)}, Out(n));
  if (n.op == GraphOp::kAvgPool3d) AddIntAttr(node, "count_include_pad", 0);
  AddIntsAttr(node, "kernel_shape", {n.kernel_t, n.kernel_h, n.kernel_w});
  AddIntsAttr(node, "pads", {n.pads_t[0], n.pads[0], n.pads[1], n.pads_t[1],
                             n.pads[2], n.pads[3]});
  AddIntsAttr(node, "strides", {n.stride_t, n.stride, n.stride});
}

// ---- 8-bit nets (QDQ form). ----

// TensorFlow's grid for range `q` of node `n` (`what`: "range" or "weight
// range"), checked: 2 to 8 bits (ONNX's 8-bit QuantizeLinear), one value per
// tensor or `channels` values, and min < max: a collapsed range has no grid
// (but weights of [0, 0], all zero, are zeros: `zero_ok`).
nets::Nudged NudgeFor(const GraphNode& n, const nets::QuantRange& q,
                      const char* what, int64_t channels, bool zero_ok) {
  SLIM_CHECK(q.defined() && q.max.defined(), "ONNX export: node '", n.name,
             "' (", GraphOpName(n.op), ") has no ", what);
  SLIM_CHECK(q.num_bits >= 2 && q.num_bits <= 8, "ONNX export: node '", n.name,
             "' (", GraphOpName(n.op), "): its ", what, " has ", q.num_bits,
             " bits; the 8-bit QuantizeLinear holds 2 to 8");
  const int64_t want = q.axis < 0 ? 1 : channels;
  SLIM_CHECK(q.min.numel() == want && q.max.numel() == want,
             "ONNX export: node '", n.name, "' (", GraphOpName(n.op), "): its ",
             what, " has ", q.min.numel(), " values, expected ", want);
  const torch::Tensor min = q.min.detach().to(torch::kCPU, torch::kFloat);
  const torch::Tensor max = q.max.detach().to(torch::kCPU, torch::kFloat);
  const torch::Tensor bad =
      zero_ok ? (min > max) | ((min == max) & (min != 0)) : (min >= max);
  if (bad.any().item<bool>()) {
    const int64_t i = bad.reshape(-1).nonzero()[0][0].item<int64_t>();
    SLIM_FAIL("ONNX export: node '", n.name, "' (", GraphOpName(n.op),
              "): its ", what, " collapsed to [", min.reshape(-1)[i].item<float>(),
              ", ", max.reshape(-1)[i].item<float>(), "]",
              q.axis < 0 ? std::string() : StrCat(" in channel ", i),
              ": min must be below max");
  }
  return nets::NudgeRange(q.axis < 0 ? min.reshape({}) : min.reshape({-1}),
                          q.axis < 0 ? max.reshape({}) : max.reshape({-1}),
                          q.num_bits, q.narrow_range);
}

// The integers q in [qmin, qmax] that TensorFlow's fake quantization rounds
// weights `w` to (range `q`, grid `nd`), so that (q − zero point)·scale is
// its output: TensorFlow's kernel gives an integer times the scale, which
// the division recovers exactly. A [0, 0] channel (all zeros) is its zero
// point.
torch::Tensor TfQuantized(const torch::Tensor& w, const nets::QuantRange& q,
                          const nets::Nudged& nd) {
  const torch::Tensor x = w.detach().to(torch::kCPU, torch::kFloat);
  const torch::Tensor min = q.min.detach().to(torch::kCPU, torch::kFloat);
  const torch::Tensor max = q.max.detach().to(torch::kCPU, torch::kFloat);
  const torch::Tensor y =
      q.axis < 0 ? nets::FakeQuant(x, min.reshape({}), max.reshape({}),
                                   q.num_bits, q.narrow_range)
                 : nets::FakeQuantPerChannel(x, min.reshape({-1}),
                                             max.reshape({-1}), q.axis,
                                             q.num_bits, q.narrow_range);
  std::vector<int64_t> shape(w.dim(), 1);
  if (q.axis >= 0) shape[q.axis] = -1;
  const torch::Tensor scale = nd.scale.to(torch::kCPU).reshape(shape);
  const torch::Tensor steps =
      torch::where(scale > 0, torch::round(y / scale), torch::zeros_like(y));
  return (steps + nd.zero_point.to(torch::kCPU).reshape(shape))
      .round()
      .to(torch::kLong);
}

OnnxBuilder::Grid OnnxBuilder::NewGrid(const std::string& name,
                                       const nets::Nudged& nudged,
                                       int64_t axis,
                                       pb::TensorProto::DataType type) {
  Grid g;
  g.axis = axis;
  auto shaped = [&](const torch::Tensor& t) {
    return axis < 0 ? t.reshape({}) : t.reshape({-1});
  };
  // A [0, 0] weight channel's scale, 0, as 1: its values are its zero
  // point, and a zero scale would be odd to the int8 kernels.
  const torch::Tensor scale = nudged.scale.to(torch::kCPU, torch::kFloat);
  g.scale = AddInitializer(
      name + "/scale",
      shaped(torch::where(scale > 0, scale, torch::ones_like(scale))));
  torch::Tensor zero_point =
      shaped(nudged.zero_point.to(torch::kCPU).round().to(torch::kLong));
  if (type == pb::TensorProto::INT8) zero_point = zero_point - 128;
  g.zero_point = AddIntInitializer(name + "/zero_point", zero_point, type);
  return g;
}

void OnnxBuilder::AddQdq(const std::string& base, const std::string& x,
                         const Grid& g, const std::string& out) {
  const std::string q = UniqueValueName(base + "/quantized");
  pb::NodeProto* quantize = NewNode("QuantizeLinear", base + "/QuantizeLinear",
                                    {x, g.scale, g.zero_point}, q);
  pb::NodeProto* dequantize =
      NewNode("DequantizeLinear", base + "/DequantizeLinear",
              {q, g.scale, g.zero_point}, out);
  if (g.axis >= 0) {
    AddIntAttr(quantize, "axis", g.axis);
    AddIntAttr(dequantize, "axis", g.axis);
  }
}

// FakeQuantWithMinMaxVars as QuantizeLinear + DequantizeLinear on uint8
// values whose scale and zero point are the nudged range's: TensorFlow's
// grid, (q − zero point)·scale. QuantizeLinear rounds ties to even where
// TensorFlow rounds them up, so a value exactly halfway between two steps
// may land one step lower. Fewer bits or a narrow range clip to the nudged
// range first (uint8 saturates at 0 and 255 only).
void OnnxBuilder::AddFakeQuant(const GraphNode& n) {
  const std::vector<int64_t>& s = ShapeOf(n.inputs[0]);
  const nets::QuantRange& q = n.quant;
  SLIM_CHECK(q.axis < static_cast<int64_t>(s.size()), "ONNX export: node '",
             n.name, "' (FakeQuant): channel axis ", q.axis, " of a ",
             s.size(), "-D value");
  const nets::Nudged nd =
      NudgeFor(n, q, "range", q.axis >= 0 ? s[q.axis] : 1, false);
  std::string x = In(n, 0);
  if (q.narrow_range || q.num_bits < 8) {
    SLIM_CHECK(q.axis < 0, "ONNX export: node '", n.name,
               "' (FakeQuant): a per-channel range of ", q.num_bits,
               " bits or narrow is not supported (8 bits, not narrow, are)");
    const std::string clipped = UniqueValueName(n.name + "/Clip");
    NewNode("Clip", n.name + "/Clip",
            {x, Scalar(nd.min.item<float>()), Scalar(nd.max.item<float>())},
            clipped);
    x = clipped;
  }
  const Grid g = NewGrid(n.name, nd, q.axis, pb::TensorProto::UINT8);
  AddQdq(n.name, x, g, Out(n));
  grids_[n.output] = g;
}

// Quantized weights are stored as TensorFlow's integers with its nudged
// zero point (uint8, or int8 shifted by 128 with signed_weights), so that
// DequantizeLinear gives exactly its fake-quantized weights; per output
// channel along axis 0 of ONNX's conv [M, C/group, kh, kw] and of Gemm's
// transposed [out, in].
std::string OnnxBuilder::WeightsInput(const GraphNode& n,
                                      const torch::Tensor& w) {
  const nets::QuantRange& q = n.weights_quant;
  if (!q.defined()) return AddInitializer(n.name + "/weights", w);
  SLIM_CHECK(q.axis == -1 || q.axis == 0, "ONNX export: node '", n.name, "' (",
             GraphOpName(n.op), "): weights quantized along axis ", q.axis,
             "; per tensor or per output channel (axis 0) are supported");
  SLIM_CHECK(q.axis < 0 || o_.opset() >= 13, "ONNX export: node '", n.name,
             "' (", GraphOpName(n.op), "): per-channel weights need opset 13 "
             "or later (DequantizeLinear's axis), got opset ", o_.opset());
  const nets::Nudged nd = NudgeFor(n, q, "weight range", w.size(0), true);
  const auto type =
      o_.signed_weights() ? pb::TensorProto::INT8 : pb::TensorProto::UINT8;
  torch::Tensor values = TfQuantized(w, q, nd);
  if (type == pb::TensorProto::INT8) values = values - 128;
  const std::string base = n.name + "/weights_quant";
  const std::string weights =
      AddIntInitializer(n.name + "/weights", values, type);
  const Grid g = NewGrid(base, nd, q.axis, type);
  const std::string out = UniqueValueName(base + "/dequantized");
  pb::NodeProto* dequantize =
      NewNode("DequantizeLinear", base + "/DequantizeLinear",
              {weights, g.scale, g.zero_point}, out);
  if (q.axis >= 0) AddIntAttr(dequantize, "axis", q.axis);
  return out;
}

std::string OnnxBuilder::KeptGridOut(const GraphNode& n) {
  auto it = grids_.find(n.inputs[0]);
  if (it == grids_.end() || it->second.axis >= 0) return Out(n);
  return UniqueValueName(n.name + "/unquantized");
}

void OnnxBuilder::KeepGrid(const GraphNode& n, const std::string& out) {
  if (out == Out(n)) return;
  const Grid g = grids_.at(n.inputs[0]);
  AddQdq(n.name, out, g, Out(n));
  grids_[n.output] = g;
}

}  // namespace

std::string OnnxModelBytes(const InferenceGraph& graph,
                           const OnnxOptions& options) {
  const pb::ModelProto model = OnnxBuilder(graph, options).Build();
  // Protobuf cannot serialize a message of 2 GiB or more.
  const size_t size = model.ByteSizeLong();
  SLIM_CHECK(size <= static_cast<size_t>(INT_MAX), "ONNX export of ",
             graph.scope, ": the model takes ", size,
             " bytes, over protobuf's 2 GiB limit");
  std::string bytes;
  SLIM_CHECK(model.SerializeToString(&bytes), "ONNX export of ", graph.scope,
             ": serializing the model failed");
  return bytes;
}

void WriteOnnxModel(const std::string& path, const InferenceGraph& graph,
                    const OnnxOptions& options) {
  WriteFileAtomically(path, OnnxModelBytes(graph, options));
}

}  // namespace slimtorch
