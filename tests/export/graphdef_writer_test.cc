// The GraphDef writer (src/export/graphdef_writer.cc) on small hand-built
// graphs: the GraphDef parsed back with our generated classes (ops, names,
// attributes, Const values in TensorFlow's layouts, a folded batch norm
// against a hand computation) and, where /opt/tfenv has TensorFlow, imported
// by tf.compat.v1.import_graph_def and run (scripts/golden/check_graphdef.py)
// against the same graph computed with plain LibTorch ops; then every net of
// the zoo, exported and run by TensorFlow against LibTorch's logits.
#include "slimtorch/export/graphdef_writer.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "export/graph_maker.h"
#include "export/python_engines.h"
#include "io/io_test_util.h"
#include "nets/zoo_input.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/export/export.h"
#include "slimtorch/export/inference_graph.h"
#include "slimtorch/io/proto/tf_graph.pb.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace {

namespace pb = ::slimtorch::tfgraph;
using testing::TempDir;
using testing_export::Case;
using testing_export::FlattenNhwc;
using testing_export::GraphMaker;
using testing_export::PadNchw;
using testing_export::RunTensorFlow;
using testing_export::ScrambleStatistics;
using testing_export::OutputName;
using testing_export::ZooExportNet;
using testing_export::ZooExportSize;
using testing_io::ErrorMessage;

// ------------------------------------------------------------ GraphDef parsing

pb::GraphDef Parse(const std::string& bytes) {
  pb::GraphDef def;
  EXPECT_TRUE(def.ParseFromString(bytes));
  return def;
}

std::vector<std::string> Ops(const pb::GraphDef& def) {
  std::vector<std::string> ops;
  for (const pb::NodeDef& n : def.node()) ops.push_back(n.op());
  return ops;
}

// The non-Const ops, in order.
std::vector<std::string> ComputeOps(const pb::GraphDef& def) {
  std::vector<std::string> ops;
  for (const pb::NodeDef& n : def.node()) {
    if (n.op() != "Const") ops.push_back(n.op());
  }
  return ops;
}

const pb::NodeDef& Node(const pb::GraphDef& def, const std::string& name) {
  for (const pb::NodeDef& n : def.node()) {
    if (n.name() == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  static const pb::NodeDef kNone;
  return kNone;
}

// The k-th node of `op`.
const pb::NodeDef& NodeOf(const pb::GraphDef& def, const std::string& op,
                          int k = 0) {
  for (const pb::NodeDef& n : def.node()) {
    if (n.op() == op && k-- == 0) return n;
  }
  ADD_FAILURE() << "no " << op << " node";
  static const pb::NodeDef kNone;
  return kNone;
}

const pb::AttrValue& Attr(const pb::NodeDef& n, const std::string& name) {
  auto it = n.attr().find(name);
  if (it != n.attr().end()) return it->second;
  ADD_FAILURE() << n.name() << " has no attribute " << name;
  static const pb::AttrValue kNone;
  return kNone;
}

std::vector<int64_t> Ints(const pb::NodeDef& n, const std::string& name) {
  const pb::AttrValue& a = Attr(n, name);
  EXPECT_TRUE(a.has_list()) << name;
  return {a.list().i().begin(), a.list().i().end()};
}

std::string Str(const pb::NodeDef& n, const std::string& name) {
  const pb::AttrValue& a = Attr(n, name);
  EXPECT_EQ(a.value_case(), pb::AttrValue::kS) << name;
  return a.s();
}

std::vector<std::string> Inputs(const pb::NodeDef& n) {
  return {n.input().begin(), n.input().end()};
}

std::vector<int64_t> Dims(const pb::TensorShapeProto& shape) {
  std::vector<int64_t> dims;
  for (const auto& d : shape.dim()) dims.push_back(d.size());
  return dims;
}

// A Const node's value, decoded from little-endian tensor_content (float32
// or int32, as a tensor of that dtype).
torch::Tensor ConstValue(const pb::GraphDef& def, const std::string& name) {
  const pb::NodeDef& n = Node(def, name);
  EXPECT_EQ(n.op(), "Const") << name;
  const pb::TensorProto& t = Attr(n, "value").tensor();
  EXPECT_EQ(Attr(n, "dtype").type(), t.dtype()) << name;
  EXPECT_TRUE(t.dtype() == pb::DT_FLOAT || t.dtype() == pb::DT_INT32) << name;
  torch::Tensor out =
      torch::empty(Dims(t.tensor_shape()),
                   t.dtype() == pb::DT_FLOAT ? torch::kFloat : torch::kInt);
  EXPECT_EQ(t.tensor_content().size(), static_cast<size_t>(out.numel()) * 4)
      << name;
  if (t.tensor_content().size() != static_cast<size_t>(out.numel()) * 4) {
    return out;
  }
  const auto* raw =
      reinterpret_cast<const unsigned char*>(t.tensor_content().data());
  for (int64_t i = 0; i < out.numel(); ++i) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) bits |= uint32_t{raw[4 * i + b]} << (8 * b);
    std::memcpy(static_cast<char*>(out.data_ptr()) + 4 * i, &bits, 4);
  }
  return out;
}

// The Const feeding input `i` of `node`.
torch::Tensor InputConst(const pb::GraphDef& def, const pb::NodeDef& node,
                         int i) {
  return ConstValue(def, node.input(i));
}

// ------------------------------------------------------------ TensorFlow

// Within `tolerance` of the largest magnitude of `want`.
void ExpectClose(const torch::Tensor& got, const torch::Tensor& want,
                 const std::string& what, double tolerance = 1e-5) {
  ASSERT_TRUE(got.defined()) << what << " missing";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double diff = (got - want).abs().max().item<double>();
  const double scale = want.abs().max().item<double>();
  std::printf("[ tensorflow  ] %s: max |diff| %.3g, largest |value| %.3g\n",
              what.c_str(), diff, scale);
  EXPECT_LE(diff, tolerance * scale) << what;
}

// TensorFlow imports and runs `c` written with `options`: logits and
// predictions equal the LibTorch computation.
void CheckWithTensorFlow(const Case& c,
                         const GraphDefOptions& options = GraphDefOptions(),
                         bool text = false) {
  TempDir dir;
  const std::string path = dir.Join(text ? "graph.pbtxt" : "graph.pb");
  WriteGraphDef(path, c.graph, options, text);
  std::map<std::string, torch::Tensor> out;
  ASSERT_NO_FATAL_FAILURE(RunTensorFlow(path, c.images, dir, &out, text));
  const std::string name =
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  ExpectClose(out["Net/Logits"], c.logits, name + " logits");
  ExpectClose(out["Net/Predictions/Reshape_1"], torch::softmax(c.logits, -1),
              name + " predictions");
}

// ------------------------------------------------------------ cases

struct BatchNormParams {
  torch::Tensor gamma, beta, mean, variance;
  double epsilon = 1e-3;
};

BatchNormParams RandomBatchNorm(int64_t channels) {
  return {torch::rand({channels}) + 0.5, torch::randn({channels}),
          torch::randn({channels}), torch::rand({channels}) + 0.1, 1e-3};
}

torch::Tensor ApplyBatchNorm(const torch::Tensor& x, const BatchNormParams& p) {
  const std::vector<int64_t> view = x.dim() == 4
                                        ? std::vector<int64_t>{1, -1, 1, 1}
                                        : std::vector<int64_t>{1, -1};
  auto v = [&](const torch::Tensor& t) { return t.view(view); };
  return (x - v(p.mean)) * v(p.gamma / (p.variance + p.epsilon).sqrt()) +
         v(p.beta);
}

void SetBatchNorm(GraphNode& norm, const BatchNormParams& bn) {
  norm.scale = bn.gamma;
  norm.offset = bn.beta;
  norm.mean = bn.mean;
  norm.variance = bn.variance;
  norm.epsilon = bn.epsilon;
}

// images [2, 3, 8, 8] → conv 5x3 / 2, TF SAME pads {top 1, left 0, bottom 2,
// right 1}, no bias → batch norm → relu6 → flatten. With `shared`, the conv's
// output also feeds an Add, so that the batch norm cannot fold.
Case ConvBatchNormRelu6(const torch::Tensor& weights, const BatchNormParams& bn,
                        bool shared = false) {
  GraphMaker gm({2, 3, 8, 8});
  const std::array<int64_t, 4> pads = {1, 0, 2, 1};
  GraphNode& conv = gm.Add(GraphOp::kConv, "Net/Conv2d_1", {0}, {2, 4, 4, 4});
  conv.weights = weights;
  conv.kernel_h = 5;
  conv.kernel_w = 3;
  conv.stride = 2;
  conv.pads = pads;
  const int conv_out = gm.last();
  SetBatchNorm(gm.Add(GraphOp::kBatchNorm, "Net/Conv2d_1/BatchNorm", {conv_out},
                      {2, 4, 4, 4}),
               bn);
  gm.Add(GraphOp::kRelu6, "Net/Conv2d_1/Relu6", {gm.last()}, {2, 4, 4, 4});
  int last = gm.last();
  if (shared) {
    gm.Add(GraphOp::kAdd, "Net/Add", {last, conv_out}, {2, 4, 4, 4});
    last = gm.last();
  }
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {last}, {2, 64});
  Case c{gm.Finish(gm.last()), torch::randn({2, 3, 8, 8}) * 2, {}};
  const torch::Tensor y =
      torch::conv2d(PadNchw(c.images, pads, 0), weights, {}, 2);
  torch::Tensor z = torch::clamp(ApplyBatchNorm(y, bn), 0, 6);
  if (shared) z = z + y;
  c.logits = FlattenNhwc(z);
  return c;
}

// ------------------------------------------------------------ tests

TEST(GraphDefWriterTest, ConvSamePadsFoldedBatchNormRelu6) {
  torch::manual_seed(1);
  const torch::Tensor w = torch::randn({4, 3, 5, 3});
  const BatchNormParams bn = RandomBatchNorm(4);
  const Case c = ConvBatchNormRelu6(w, bn);
  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  EXPECT_EQ(def.versions().producer(), kGraphDefProducer);
  EXPECT_EQ(Ops(def),
            (std::vector<std::string>{"Placeholder", "Const", "Conv2D", "Const",
                                      "BiasAdd", "Relu6", "Const", "Reshape",
                                      "Softmax", "Identity", "Identity"}));
  const pb::NodeDef& input = def.node(0);
  EXPECT_EQ(input.name(), "input");
  EXPECT_EQ(Attr(input, "dtype").type(), pb::DT_FLOAT);
  EXPECT_EQ(Dims(Attr(input, "shape").shape()),
            (std::vector<int64_t>{-1, 8, 8, 3}));

  const pb::NodeDef& conv = NodeOf(def, "Conv2D");
  EXPECT_EQ(conv.name(), "Net/Conv2d_1/Conv2D");
  EXPECT_EQ(Inputs(conv),
            (std::vector<std::string>{"input", "Net/Conv2d_1/weights"}));
  EXPECT_EQ(Attr(conv, "T").type(), pb::DT_FLOAT);
  EXPECT_EQ(Str(conv, "padding"), "SAME");  // {1, 0, 2, 1} is SAME here
  EXPECT_EQ(conv.attr().count("explicit_paddings"), 0u);
  EXPECT_EQ(Ints(conv, "strides"), (std::vector<int64_t>{1, 2, 2, 1}));
  EXPECT_EQ(Str(conv, "data_format"), "NHWC");
  const pb::NodeDef& bias_add = NodeOf(def, "BiasAdd");
  EXPECT_EQ(bias_add.name(), "Net/Conv2d_1/BatchNorm");
  EXPECT_EQ(
      Inputs(bias_add),
      (std::vector<std::string>{"Net/Conv2d_1/Conv2D", "Net/Conv2d_1/biases"}));
  EXPECT_EQ(Inputs(NodeOf(def, "Relu6")),
            std::vector<std::string>{"Net/Conv2d_1/BatchNorm"});
  // w' = w·γ/√(var+ε), b' = β − mean·γ/√(var+ε), per output channel, in
  // TensorFlow's [kh, kw, in, out].
  const torch::Tensor folded_w = InputConst(def, conv, 1);
  const torch::Tensor folded_b = InputConst(def, bias_add, 1);
  ASSERT_EQ(folded_w.sizes(), torch::IntArrayRef({5, 3, 3, 4}));
  ASSERT_EQ(folded_b.sizes(), torch::IntArrayRef({4}));
  for (int64_t o = 0; o < 4; ++o) {
    const double k = double(bn.gamma[o].item<float>()) /
                     std::sqrt(double(bn.variance[o].item<float>()) + 1e-3);
    EXPECT_FLOAT_EQ(folded_b[o].item<float>(),
                    float(double(bn.beta[o].item<float>()) -
                          double(bn.mean[o].item<float>()) * k));
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t y = 0; y < 5; ++y) {
        for (int64_t x = 0; x < 3; ++x) {
          EXPECT_FLOAT_EQ(folded_w[y][x][i][o].item<float>(),
                          float(double(w[o][i][y][x].item<float>()) * k));
        }
      }
    }
  }
  const pb::NodeDef& reshape = NodeOf(def, "Reshape");
  EXPECT_EQ(reshape.name(), "Net/Flatten");
  EXPECT_TRUE(torch::equal(InputConst(def, reshape, 1),
                           torch::tensor({-1, 64}, torch::kInt)));
  EXPECT_EQ(Attr(reshape, "Tshape").type(), pb::DT_INT32);
  EXPECT_EQ(NodeOf(def, "Softmax").name(), "Net/Predictions");
  EXPECT_EQ(NodeOf(def, "Identity", 0).name(), "Net/Logits");
  EXPECT_EQ(Inputs(NodeOf(def, "Identity", 0)),
            std::vector<std::string>{"Net/Flatten"});
  EXPECT_EQ(NodeOf(def, "Identity", 1).name(), "Net/Predictions/Reshape_1");
  EXPECT_EQ(Inputs(NodeOf(def, "Identity", 1)),
            std::vector<std::string>{"Net/Predictions"});

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

TEST(GraphDefWriterTest, BatchNormKeptWhenFoldingIsOffOrConvOutputIsShared) {
  torch::manual_seed(2);
  const torch::Tensor w = torch::randn({4, 3, 5, 3});
  const BatchNormParams bn = RandomBatchNorm(4);
  const Case plain = ConvBatchNormRelu6(w, bn);
  const Case shared = ConvBatchNormRelu6(w, bn, /*shared=*/true);
  const GraphDefOptions off = GraphDefOptions().fold_batch_norm(false);
  const pb::GraphDef unfolded = Parse(GraphDefBytes(plain.graph, off));
  const pb::GraphDef kept = Parse(GraphDefBytes(shared.graph));
  for (const pb::GraphDef* def : {&unfolded, &kept}) {
    const pb::NodeDef& norm = NodeOf(*def, "FusedBatchNormV3");
    EXPECT_EQ(norm.name(), "Net/Conv2d_1/BatchNorm");
    EXPECT_FLOAT_EQ(Attr(norm, "epsilon").f(), 1e-3f);
    EXPECT_FALSE(Attr(norm, "is_training").b());
    EXPECT_EQ(Attr(norm, "U").type(), pb::DT_FLOAT);
    EXPECT_EQ(Str(norm, "data_format"), "NHWC");
    EXPECT_EQ(Inputs(norm), (std::vector<std::string>{
                                "Net/Conv2d_1", "Net/Conv2d_1/BatchNorm/gamma",
                                "Net/Conv2d_1/BatchNorm/beta",
                                "Net/Conv2d_1/BatchNorm/moving_mean",
                                "Net/Conv2d_1/BatchNorm/moving_variance"}));
    EXPECT_TRUE(torch::equal(InputConst(*def, norm, 1), bn.gamma));
    EXPECT_TRUE(torch::equal(InputConst(*def, norm, 2), bn.beta));
    EXPECT_TRUE(torch::equal(InputConst(*def, norm, 3), bn.mean));
    EXPECT_TRUE(torch::equal(InputConst(*def, norm, 4), bn.variance));
    // No bias: the convolution itself takes the layer's name.
    EXPECT_EQ(NodeOf(*def, "Conv2D").name(), "Net/Conv2d_1");
    EXPECT_TRUE(torch::equal(InputConst(*def, NodeOf(*def, "Conv2D"), 1),
                             w.permute({2, 3, 1, 0})));
  }
  EXPECT_EQ(ComputeOps(kept),
            (std::vector<std::string>{
                "Placeholder", "Conv2D", "FusedBatchNormV3", "Relu6", "AddV2",
                "Reshape", "Softmax", "Identity", "Identity"}));
  EXPECT_EQ(Inputs(NodeOf(kept, "AddV2")),
            (std::vector<std::string>{"Net/Conv2d_1/Relu6", "Net/Conv2d_1"}));

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(plain, off);
  CheckWithTensorFlow(shared);
}

// A conv whose pads are not TensorFlow's SAME ones (TF-Slim's conv2d_same
// pads explicitly: {1, 1, 1, 1} for 3x3 / 2 on 8x8, where SAME pads {0, 0,
// 1, 1}), with a bias.
TEST(GraphDefWriterTest, ConvExplicitPadsWithBias) {
  torch::manual_seed(3);
  GraphMaker gm({2, 3, 8, 8});
  const torch::Tensor w = torch::randn({5, 3, 3, 3});
  const torch::Tensor b = torch::randn({5});
  GraphNode& conv = gm.Add(GraphOp::kConv, "Net/Conv2d_1", {0}, {2, 5, 4, 4});
  conv.weights = w;
  conv.bias = b;
  conv.kernel_h = conv.kernel_w = 3;
  conv.stride = 2;
  conv.pads = {1, 1, 1, 1};
  gm.Add(GraphOp::kRelu, "Net/Conv2d_1/Relu", {gm.last()}, {2, 5, 4, 4});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {2, 80});
  Case c{gm.Finish(gm.last()), torch::randn({2, 3, 8, 8}), {}};
  c.logits = FlattenNhwc(torch::relu(torch::conv2d(c.images, w, b, 2, 1)));

  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  const pb::NodeDef& node = NodeOf(def, "Conv2D");
  EXPECT_EQ(node.name(), "Net/Conv2d_1/Conv2D");
  EXPECT_EQ(Str(node, "padding"), "EXPLICIT");
  EXPECT_EQ(Ints(node, "explicit_paddings"),
            (std::vector<int64_t>{0, 0, 1, 1, 1, 1, 0, 0}));
  const pb::NodeDef& bias_add = NodeOf(def, "BiasAdd");
  EXPECT_EQ(bias_add.name(), "Net/Conv2d_1");
  EXPECT_TRUE(torch::equal(InputConst(def, bias_add, 1), b));
  EXPECT_EQ(Inputs(NodeOf(def, "Relu")),
            std::vector<std::string>{"Net/Conv2d_1"});

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

// Depthwise with multiplier 2 and a bias (SAME pads), then depthwise with
// multiplier 1 and pads that are not SAME's (EXPLICIT).
TEST(GraphDefWriterTest, DepthwiseConvSameAndExplicitPads) {
  torch::manual_seed(4);
  GraphMaker gm({2, 4, 5, 5});
  const torch::Tensor w1 = torch::randn({8, 1, 3, 3});  // multiplier 2
  const torch::Tensor b1 = torch::randn({8});
  const torch::Tensor w2 = torch::randn({8, 1, 3, 3});
  GraphNode& dw1 =
      gm.Add(GraphOp::kConv, "Net/Conv2d_1_depthwise", {0}, {2, 8, 5, 5});
  dw1.weights = w1;
  dw1.bias = b1;
  dw1.kernel_h = dw1.kernel_w = 3;
  dw1.pads = {1, 1, 1, 1};
  gm.Add(GraphOp::kRelu, "Net/Conv2d_1_depthwise/Relu", {gm.last()},
         {2, 8, 5, 5});
  GraphNode& dw2 = gm.Add(GraphOp::kConv, "Net/Conv2d_2_depthwise", {gm.last()},
                          {2, 8, 3, 3});
  dw2.weights = w2;
  dw2.kernel_h = dw2.kernel_w = 3;
  dw2.stride = 2;
  dw2.pads = {0, 1, 2, 1};
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {2, 72});
  Case c{gm.Finish(gm.last()), torch::randn({2, 4, 5, 5}), {}};
  const torch::Tensor y =
      torch::relu(torch::conv2d(PadNchw(c.images, {1, 1, 1, 1}, 0), w1, b1, 1,
                                torch::IntArrayRef({0, 0}), 1, /*groups=*/4));
  c.logits = FlattenNhwc(torch::conv2d(PadNchw(y, {0, 1, 2, 1}, 0), w2, {}, 2,
                                       torch::IntArrayRef({0, 0}), 1, 8));

  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  EXPECT_EQ(
      ComputeOps(def),
      (std::vector<std::string>{"Placeholder", "DepthwiseConv2dNative",
                                "BiasAdd", "Relu", "DepthwiseConv2dNative",
                                "Reshape", "Softmax", "Identity", "Identity"}));
  const pb::NodeDef& first = NodeOf(def, "DepthwiseConv2dNative", 0);
  EXPECT_EQ(first.name(), "Net/Conv2d_1_depthwise/DepthwiseConv2dNative");
  EXPECT_EQ(Str(first, "padding"), "SAME");
  EXPECT_EQ(Ints(first, "strides"), (std::vector<int64_t>{1, 1, 1, 1}));
  // [kh, kw, in, multiplier]: output channel c·2 + m is [.., c, m].
  const torch::Tensor filter = InputConst(def, first, 1);
  ASSERT_EQ(filter.sizes(), torch::IntArrayRef({3, 3, 4, 2}));
  for (int64_t ch = 0; ch < 4; ++ch) {
    for (int64_t m = 0; m < 2; ++m) {
      EXPECT_TRUE(
          torch::equal(filter.select(2, ch).select(2, m), w1[ch * 2 + m][0]));
    }
  }
  EXPECT_TRUE(torch::equal(InputConst(def, NodeOf(def, "BiasAdd"), 1), b1));
  const pb::NodeDef& second = NodeOf(def, "DepthwiseConv2dNative", 1);
  EXPECT_EQ(second.name(), "Net/Conv2d_2_depthwise");
  EXPECT_EQ(Str(second, "padding"), "EXPLICIT");
  EXPECT_EQ(Ints(second, "explicit_paddings"),
            (std::vector<int64_t>{0, 0, 0, 2, 1, 1, 0, 0}));
  EXPECT_EQ(InputConst(def, second, 1).sizes(),
            torch::IntArrayRef({3, 3, 8, 1}));

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

TEST(GraphDefWriterTest, PoolsSameAndExplicitPadsAndConcat) {
  torch::manual_seed(5);
  GraphMaker gm({2, 3, 9, 8});
  const std::array<int64_t, 4> same = {1, 0, 1, 1}, other = {1, 1, 1, 1};
  for (GraphOp op : {GraphOp::kMaxPool, GraphOp::kAvgPool}) {
    GraphNode& pool =
        gm.Add(op, op == GraphOp::kMaxPool ? "Net/MaxPool" : "Net/AvgPool", {0},
               {2, 3, 5, 4});
    pool.kernel_h = pool.kernel_w = 3;
    pool.stride = 2;
    pool.pads = same;
  }
  GraphNode& explicit_pool =
      gm.Add(GraphOp::kMaxPool, "Net/MaxPool_1", {0}, {2, 3, 5, 4});
  explicit_pool.kernel_h = explicit_pool.kernel_w = 3;
  explicit_pool.stride = 2;
  explicit_pool.pads = other;
  gm.Add(GraphOp::kConcat, "Net/Concat", {1, 2, 3}, {2, 9, 5, 4});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {2, 180});
  // Negative values everywhere: a zero pad winning a max would show.
  Case c{gm.Finish(gm.last()), -torch::rand({2, 3, 9, 8}) - 0.5, {}};
  auto max = [&](const std::array<int64_t, 4>& p) {
    return torch::max_pool2d(PadNchw(c.images, p, -INFINITY), {3, 3}, {2, 2});
  };
  const torch::Tensor sum =
      torch::avg_pool2d(PadNchw(c.images, same, 0), {3, 3}, {2, 2}) * 9;
  const torch::Tensor count =
      torch::avg_pool2d(PadNchw(torch::ones({1, 1, 9, 8}), same, 0), {3, 3},
                        {2, 2}) *
      9;
  c.logits = FlattenNhwc(torch::cat({max(same), sum / count, max(other)}, 1));

  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  for (const char* op : {"MaxPool", "AvgPool"}) {
    const pb::NodeDef& pool = NodeOf(def, op);
    EXPECT_EQ(pool.name(), std::string("Net/") + op);
    EXPECT_EQ(Str(pool, "padding"), "SAME") << op;
    EXPECT_EQ(Ints(pool, "ksize"), (std::vector<int64_t>{1, 3, 3, 1})) << op;
    EXPECT_EQ(Ints(pool, "strides"), (std::vector<int64_t>{1, 2, 2, 1})) << op;
    EXPECT_EQ(Str(pool, "data_format"), "NHWC") << op;
  }
  const pb::NodeDef& explicit_node = NodeOf(def, "MaxPool", 1);
  EXPECT_EQ(Str(explicit_node, "padding"), "EXPLICIT");
  EXPECT_EQ(Ints(explicit_node, "explicit_paddings"),
            (std::vector<int64_t>{0, 0, 1, 1, 1, 1, 0, 0}));
  const pb::NodeDef& concat = NodeOf(def, "ConcatV2");
  EXPECT_EQ(Inputs(concat),
            (std::vector<std::string>{"Net/MaxPool", "Net/AvgPool",
                                      "Net/MaxPool_1", "Net/Concat/axis"}));
  EXPECT_EQ(Attr(concat, "N").i(), 3);
  EXPECT_EQ(Attr(concat, "Tidx").type(), pb::DT_INT32);
  const torch::Tensor axis = InputConst(def, concat, 3);
  EXPECT_EQ(axis.dim(), 0);
  EXPECT_EQ(axis.item<int>(), 3);

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

TEST(GraphDefWriterTest, LrnKeepsTensorFlowsParameters) {
  torch::manual_seed(6);
  GraphMaker gm({2, 7, 3, 3});
  GraphNode& lrn = gm.Add(GraphOp::kLrn, "Net/LRN", {0}, {2, 7, 3, 3});
  lrn.depth_radius = 2;
  lrn.lrn_bias = 2.0;
  lrn.lrn_alpha = 0.01;
  lrn.lrn_beta = 0.75;
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {2, 63});
  Case c{gm.Finish(gm.last()), torch::randn({2, 7, 3, 3}) * 3, {}};
  // tf.nn.lrn: x / (bias + alpha · Σ over channels c-2..c+2 of x²)^beta.
  std::vector<torch::Tensor> channels;
  for (int64_t ch = 0; ch < 7; ++ch) {
    const torch::Tensor window = c.images.slice(1, std::max<int64_t>(0, ch - 2),
                                                std::min<int64_t>(7, ch + 3));
    const torch::Tensor sq = (window * window).sum(1, true);
    channels.push_back(c.images.slice(1, ch, ch + 1) /
                       (2.0 + 0.01 * sq).pow(0.75));
  }
  c.logits = FlattenNhwc(torch::cat(channels, 1));

  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  const pb::NodeDef& node = NodeOf(def, "LRN");
  EXPECT_EQ(node.name(), "Net/LRN");
  EXPECT_EQ(Attr(node, "depth_radius").i(), 2);
  EXPECT_FLOAT_EQ(Attr(node, "alpha").f(), 0.01f);
  EXPECT_FLOAT_EQ(Attr(node, "beta").f(), 0.75f);
  EXPECT_FLOAT_EQ(Attr(node, "bias").f(), 2.f);

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

TEST(GraphDefWriterTest, FlattenThenFullyConnectedAndBatchNormOn2D) {
  torch::manual_seed(7);
  GraphMaker gm({2, 3, 4, 5});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {0}, {2, 60});
  const torch::Tensor w = torch::randn({10, 60});
  const torch::Tensor b = torch::randn({10});
  GraphNode& fc =
      gm.Add(GraphOp::kFullyConnected, "Net/fc", {gm.last()}, {2, 10});
  fc.weights = w;
  fc.bias = b;
  const BatchNormParams bn = RandomBatchNorm(10);
  SetBatchNorm(
      gm.Add(GraphOp::kBatchNorm, "Net/fc/BatchNorm", {gm.last()}, {2, 10}),
      bn);
  Case c{gm.Finish(gm.last()), torch::randn({2, 3, 4, 5}), {}};
  c.logits =
      ApplyBatchNorm(torch::matmul(FlattenNhwc(c.images), w.t()) + b, bn);

  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  EXPECT_EQ(ComputeOps(def),
            (std::vector<std::string>{"Placeholder", "Reshape", "MatMul",
                                      "BiasAdd", "Mul", "AddV2", "Softmax",
                                      "Identity", "Identity"}));
  EXPECT_TRUE(torch::equal(InputConst(def, NodeOf(def, "Reshape"), 1),
                           torch::tensor({-1, 60}, torch::kInt)));
  const pb::NodeDef& matmul = NodeOf(def, "MatMul");
  EXPECT_EQ(matmul.name(), "Net/fc/MatMul");
  EXPECT_EQ(Inputs(matmul),
            (std::vector<std::string>{"Net/Flatten", "Net/fc/weights"}));
  EXPECT_FALSE(Attr(matmul, "transpose_b").b());
  EXPECT_TRUE(torch::equal(InputConst(def, matmul, 1), w.t()));
  EXPECT_EQ(NodeOf(def, "BiasAdd").name(), "Net/fc");
  EXPECT_TRUE(torch::equal(InputConst(def, NodeOf(def, "BiasAdd"), 1), b));
  EXPECT_EQ(NodeOf(def, "AddV2").name(), "Net/fc/BatchNorm");
  EXPECT_EQ(Inputs(Node(def, "Net/Logits")),
            std::vector<std::string>{"Net/fc/BatchNorm"});

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

TEST(GraphDefWriterTest, AddScaleAndConcat) {
  torch::manual_seed(8);
  GraphMaker gm({1, 3, 4, 4});
  gm.Add(GraphOp::kRelu, "Net/Relu", {0}, {1, 3, 4, 4});
  gm.Add(GraphOp::kScale, "Net/Scale", {0}, {1, 3, 4, 4}).factor = 0.5;
  gm.Add(GraphOp::kAdd, "Net/Add", {1, 2}, {1, 3, 4, 4});
  gm.Add(GraphOp::kConcat, "Net/Concat", {3, 0}, {1, 6, 4, 4});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {1, 96});
  Case c{gm.Finish(gm.last()), torch::randn({1, 3, 4, 4}), {}};
  c.logits = FlattenNhwc(
      torch::cat({torch::relu(c.images) + c.images * 0.5, c.images}, 1));

  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  const pb::NodeDef& mul = NodeOf(def, "Mul");
  EXPECT_EQ(mul.name(), "Net/Scale");
  EXPECT_EQ(Inputs(mul), (std::vector<std::string>{"input", "Net/Scale/y"}));
  EXPECT_EQ(InputConst(def, mul, 1).dim(), 0);
  EXPECT_EQ(InputConst(def, mul, 1).item<float>(), 0.5f);
  EXPECT_EQ(Inputs(NodeOf(def, "AddV2")),
            (std::vector<std::string>{"Net/Relu", "Net/Scale"}));
  EXPECT_EQ(Inputs(NodeOf(def, "ConcatV2")),
            (std::vector<std::string>{"Net/Add", "input", "Net/Concat/axis"}));

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

// Mean + squeeze as logits, run by TensorFlow at a batch other than the
// recorded one (the placeholder's batch is -1). With `logits_name`, the
// squeeze is named so.
Case MeanSqueeze(int64_t run_batch,
                 const std::string& logits_name = "Net/SpatialSqueeze") {
  GraphMaker gm({2, 5, 3, 4});
  gm.Add(GraphOp::kMean, "Net/global_pool", {0}, {2, 5, 1, 1});
  gm.Add(GraphOp::kSqueeze, logits_name, {gm.last()}, {2, 5});
  Case c{gm.Finish(gm.last()), torch::randn({run_batch, 5, 3, 4}), {}};
  c.logits = c.images.mean({2, 3});
  return c;
}

TEST(GraphDefWriterTest, MeanSqueezeSoftmaxAndDynamicBatch) {
  torch::manual_seed(9);
  const Case c = MeanSqueeze(3);
  const pb::GraphDef def = Parse(GraphDefBytes(c.graph));
  EXPECT_EQ(Ops(def),
            (std::vector<std::string>{"Placeholder", "Const", "Mean", "Squeeze",
                                      "Softmax", "Identity", "Identity"}));
  EXPECT_EQ(Dims(Attr(def.node(0), "shape").shape()),
            (std::vector<int64_t>{-1, 3, 4, 5}));
  const pb::NodeDef& mean = NodeOf(def, "Mean");
  EXPECT_EQ(mean.name(), "Net/global_pool");
  EXPECT_TRUE(Attr(mean, "keep_dims").b());
  EXPECT_TRUE(torch::equal(InputConst(def, mean, 1),
                           torch::tensor({1, 2}, torch::kInt)));
  EXPECT_EQ(Ints(NodeOf(def, "Squeeze"), "squeeze_dims"),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Inputs(Node(def, "Net/Logits")),
            std::vector<std::string>{"Net/SpatialSqueeze"});

  // A logits node already named <scope>/Logits needs no Identity.
  const pb::GraphDef named =
      Parse(GraphDefBytes(MeanSqueeze(2, "Net/Logits").graph));
  EXPECT_EQ(NodeOf(named, "Squeeze").name(), "Net/Logits");
  EXPECT_EQ(ComputeOps(named),
            (std::vector<std::string>{"Placeholder", "Mean", "Squeeze",
                                      "Softmax", "Identity"}));
  EXPECT_EQ(Inputs(NodeOf(named, "Softmax")),
            std::vector<std::string>{"Net/Logits"});

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c);
}

TEST(GraphDefWriterTest, FixedBatchSize) {
  const Case c = MeanSqueeze(2);
  const pb::GraphDef def =
      Parse(GraphDefBytes(c.graph, GraphDefOptions().batch_size(2)));
  EXPECT_EQ(Dims(Attr(Node(def, "input"), "shape").shape()),
            (std::vector<int64_t>{2, 3, 4, 5}));

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c, GraphDefOptions().batch_size(2));
}

// The .pbtxt parses back to the binary GraphDef, and TensorFlow reads it.
TEST(GraphDefWriterTest, TextFormatRoundTrip) {
  torch::manual_seed(10);
  const Case c = ConvBatchNormRelu6(torch::randn({4, 3, 5, 3}),
                                    RandomBatchNorm(4), /*shared=*/true);
  const std::string text = GraphDefText(c.graph);
  pb::GraphDef from_text;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &from_text));
  const pb::GraphDef from_bytes = Parse(GraphDefBytes(c.graph));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(from_text,
                                                                 from_bytes));
  EXPECT_NE(text.find("op: \"FusedBatchNormV3\""), std::string::npos);
  EXPECT_NE(text.find("type: DT_FLOAT"), std::string::npos);
  EXPECT_NE(text.find("producer: " + std::to_string(kGraphDefProducer)),
            std::string::npos);
  TempDir dir;
  WriteGraphDef(dir.Join("graph.pbtxt"), c.graph, GraphDefOptions(),
                /*text=*/true);
  EXPECT_EQ(ReadFileToString(dir.Join("graph.pbtxt")), text);

  SKIP_WITHOUT_TENSORFLOW();
  CheckWithTensorFlow(c, GraphDefOptions(), /*text=*/true);
}

TEST(GraphDefWriterTest, DeterministicBytesAndAtomicWrite) {
  torch::manual_seed(11);
  const Case c =
      ConvBatchNormRelu6(torch::randn({4, 3, 5, 3}), RandomBatchNorm(4));
  const std::string bytes = GraphDefBytes(c.graph);
  EXPECT_EQ(GraphDefBytes(c.graph), bytes);
  TempDir dir;
  WriteGraphDef(dir.Join("graph.pb"), c.graph);
  EXPECT_EQ(ReadFileToString(dir.Join("graph.pb")), bytes);
  EXPECT_EQ(Glob(dir.Join("*")),
            std::vector<std::string>{dir.Join("graph.pb")});
  // A failing graph leaves no file behind.
  InferenceGraph broken = c.graph;
  broken.nodes[0].weights = torch::randn({4, 2, 5, 3});
  EXPECT_THROW(WriteGraphDef(dir.Join("broken.pb"), broken), Error);
  EXPECT_THROW(WriteGraphDef(dir.Join("broken.pbtxt"), broken,
                             GraphDefOptions(), /*text=*/true),
               Error);
  EXPECT_EQ(Glob(dir.Join("*")),
            std::vector<std::string>{dir.Join("graph.pb")});
}

TEST(GraphDefWriterTest, NodesFeedingNoOutputAreLeftOut) {
  GraphMaker gm({1, 2, 3, 3});
  gm.Add(GraphOp::kRelu, "Net/AuxLogits/Relu", {0}, {1, 2, 3, 3});
  gm.Add(GraphOp::kMean, "Net/global_pool", {0}, {1, 2, 1, 1});
  gm.Add(GraphOp::kSqueeze, "Net/SpatialSqueeze", {gm.last()}, {1, 2});
  const pb::GraphDef def = Parse(GraphDefBytes(gm.Finish(gm.last())));
  EXPECT_EQ(ComputeOps(def),
            (std::vector<std::string>{"Placeholder", "Mean", "Squeeze",
                                      "Softmax", "Identity", "Identity"}));
}

TEST(GraphDefWriterTest, WhatTensorFlowCannotRunNamesTheNode) {
  const Case c =
      ConvBatchNormRelu6(torch::randn({4, 3, 5, 3}), RandomBatchNorm(4));
  InferenceGraph g = c.graph;
  g.nodes[0].weights = torch::randn({4, 2, 5, 3});
  std::string msg = ErrorMessage([&] { GraphDefBytes(g); });
  EXPECT_NE(msg.find("'Net/Conv2d_1' (Conv)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in = 3, got [4, 2, 5, 3]"), std::string::npos) << msg;

  // A grouped convolution that is not depthwise has no TensorFlow op.
  GraphMaker grouped({1, 4, 3, 3});
  GraphNode& conv =
      grouped.Add(GraphOp::kConv, "Net/Grouped", {0}, {1, 4, 3, 3});
  conv.weights = torch::randn({4, 2, 1, 1});
  grouped.Add(GraphOp::kFlatten, "Net/Flatten", {grouped.last()}, {1, 36});
  msg = ErrorMessage([&] { GraphDefBytes(grouped.Finish(grouped.last())); });
  EXPECT_NE(msg.find("'Net/Grouped' (Conv) is grouped (2 groups"),
            std::string::npos)
      << msg;

  // AvgPool has no EXPLICIT padding.
  GraphMaker avg({1, 2, 9, 8});
  GraphNode& pool =
      avg.Add(GraphOp::kAvgPool, "Net/AvgPool", {0}, {1, 2, 5, 4});
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride = 2;
  pool.pads = {1, 1, 1, 1};
  avg.Add(GraphOp::kFlatten, "Net/Flatten", {avg.last()}, {1, 40});
  msg = ErrorMessage([&] { GraphDefBytes(avg.Finish(avg.last())); });
  EXPECT_NE(msg.find("'Net/AvgPool' (AvgPool) has pads {top 1, left 1, "
                     "bottom 1, right 1}"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("SAME pads {top 1, left 0, bottom 1, right 1} for its "
                     "9x8 input"),
            std::string::npos)
      << msg;

  g = c.graph;
  g.nodes[1].mean = torch::zeros({3});
  msg = ErrorMessage([&] { GraphDefBytes(g); });
  EXPECT_NE(msg.find("batch norm 'Net/Conv2d_1/BatchNorm'"), std::string::npos)
      << msg;
  msg = ErrorMessage(
      [&] { GraphDefBytes(g, GraphDefOptions().fold_batch_norm(false)); });
  EXPECT_NE(msg.find("expected 4 values for moving_mean"), std::string::npos)
      << msg;

  g = c.graph;
  g.nodes[1].inputs = {g.nodes[2].output};  // a value not produced yet
  msg = ErrorMessage([&] { GraphDefBytes(g); });
  EXPECT_NE(msg.find("'Net/Conv2d_1/BatchNorm' (BatchNorm) reads value"),
            std::string::npos)
      << msg;

  g = c.graph;
  g.logits = -1;
  msg = ErrorMessage([&] { GraphDefText(g); });
  EXPECT_NE(msg.find("needs both logits and predictions"), std::string::npos)
      << msg;
  msg = ErrorMessage(
      [&] { GraphDefBytes(c.graph, GraphDefOptions().batch_size(-2)); });
  EXPECT_NE(msg.find("batch_size -2 is negative"), std::string::npos) << msg;
}

// ------------------------------------------------------------ the zoo

class GraphDefZooTest : public ::testing::TestWithParam<std::string> {};

// The frozen GraphDef, imported and run by TensorFlow, gives LibTorch's
// logits within 1e-4 of the largest and its predictions within 1e-5, on a
// batch of 2 through the placeholder's dynamic batch.
TEST_P(GraphDefZooTest, TensorFlowGivesLibTorchsLogits) {
  SKIP_WITHOUT_TENSORFLOW();
  const auto start = std::chrono::steady_clock::now();
  auto net = ZooExportNet(GetParam());
  ScrambleStatistics(*net, 5);
  net->module().eval();
  const int64_t s = ZooExportSize(GetParam(), *net);
  TempDir dir;
  const std::string path = dir.Join("graph.pb");
  WriteGraphDef(path, RecordInferenceGraph(*net, s, 0));
  torch::manual_seed(9);
  const torch::Tensor images =
      torch::rand(testing::ZooInputShape(*net, 2, s)) * 2 - 1;
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = net->Forward(images).logits;
  }
  std::map<std::string, torch::Tensor> out;
  ASSERT_NO_FATAL_FAILURE(RunTensorFlow(path, images, dir, &out));
  const torch::Tensor got = out[OutputName(*net, "Logits")];
  ASSERT_TRUE(got.defined()) << "no output " << OutputName(*net, "Logits");
  ASSERT_EQ(got.sizes(), logits.sizes());
  const double scale = logits.abs().max().item<double>();
  const double diff = (got - logits).abs().max().item<double>();
  const torch::Tensor predictions =
      out[OutputName(*net, "Predictions/Reshape_1")];
  ASSERT_TRUE(predictions.defined());
  const double prediction_diff =
      (predictions - torch::softmax(logits, -1)).abs().max().item<double>();
  std::printf(
      "[ tensorflow  ] %-20s logits within %.2g of the largest, "
      "predictions within %.2g (%.1f s)\n",
      GetParam().c_str(), diff / scale, prediction_diff,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  EXPECT_LE(diff, 1e-4 * scale);
  EXPECT_LE(prediction_diff, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Zoo, GraphDefZooTest,
                         ::testing::ValuesIn(GetNetRegistry().Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace slimtorch
