// The ONNX writer (src/export/onnx_writer.cc) on small hand-built graphs: the
// model parsed back with our generated classes (ops, attributes, initializers,
// a folded batch norm against a hand computation), and, where /opt/tfenv has
// onnx and onnxruntime, checked by onnx.checker (full_check) and run by
// onnxruntime on the CPU (scripts/golden/check_onnx.py) against the same
// graph computed with plain LibTorch ops.
#include "slimtorch/export/onnx_writer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

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
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/export/inference_graph.h"
#include "slimtorch/io/proto/onnx.pb.h"
#include "test_util.h"

namespace slimtorch {
namespace {

namespace pb = ::slimtorch::onnx;
using testing::TempDir;
using testing_export::RunOnnxRuntime;
using testing_io::ErrorMessage;

using testing_export::Case;
using testing_export::FlattenNhwc;
using testing_export::GraphMaker;
using testing_export::PadNchw;

// ------------------------------------------------------------ model parsing

pb::ModelProto Parse(const std::string& bytes) {
  pb::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(bytes));
  return model;
}

std::vector<std::string> OpTypes(const pb::ModelProto& m) {
  std::vector<std::string> ops;
  for (const pb::NodeProto& n : m.graph().node()) ops.push_back(n.op_type());
  return ops;
}

// The k-th node of `op_type`.
const pb::NodeProto& NodeOf(const pb::ModelProto& m, const std::string& op_type,
                            int k = 0) {
  for (const pb::NodeProto& n : m.graph().node()) {
    if (n.op_type() == op_type && k-- == 0) return n;
  }
  ADD_FAILURE() << "no " << op_type << " node";
  static const pb::NodeProto kNone;
  return kNone;
}

const pb::AttributeProto& Attr(const pb::NodeProto& n,
                               const std::string& name) {
  for (const pb::AttributeProto& a : n.attribute()) {
    if (a.name() == name) return a;
  }
  ADD_FAILURE() << n.name() << " has no attribute " << name;
  static const pb::AttributeProto kNone;
  return kNone;
}

std::vector<int64_t> Ints(const pb::NodeProto& n, const std::string& name) {
  const pb::AttributeProto& a = Attr(n, name);
  EXPECT_EQ(a.type(), pb::AttributeProto::INTS) << name;
  return {a.ints().begin(), a.ints().end()};
}

int64_t Int(const pb::NodeProto& n, const std::string& name) {
  const pb::AttributeProto& a = Attr(n, name);
  EXPECT_EQ(a.type(), pb::AttributeProto::INT) << name;
  return a.i();
}

float Float(const pb::NodeProto& n, const std::string& name) {
  const pb::AttributeProto& a = Attr(n, name);
  EXPECT_EQ(a.type(), pb::AttributeProto::FLOAT) << name;
  return a.f();
}

std::vector<std::string> Inputs(const pb::NodeProto& n) {
  return {n.input().begin(), n.input().end()};
}

// An initializer's value, decoded from little-endian float32 raw_data.
torch::Tensor Initializer(const pb::ModelProto& m, const std::string& name) {
  for (const pb::TensorProto& t : m.graph().initializer()) {
    if (t.name() != name) continue;
    EXPECT_EQ(t.data_type(), pb::TensorProto::FLOAT) << name;
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    torch::Tensor out = torch::empty(dims, torch::kFloat);
    EXPECT_EQ(t.raw_data().size(), static_cast<size_t>(out.numel()) * 4);
    const auto* raw =
        reinterpret_cast<const unsigned char*>(t.raw_data().data());
    for (int64_t i = 0; i < out.numel(); ++i) {
      uint32_t bits = 0;
      for (int b = 0; b < 4; ++b) bits |= uint32_t{raw[4 * i + b]} << (8 * b);
      std::memcpy(out.data_ptr<float>() + i, &bits, 4);
    }
    return out;
  }
  ADD_FAILURE() << "no initializer " << name;
  return torch::Tensor();
}

// A graph input's or output's dims, a dynamic one as its dim_param.
std::vector<std::string> Dims(const pb::ValueInfoProto& v) {
  EXPECT_EQ(v.type().tensor_type().elem_type(), pb::TensorProto::FLOAT);
  std::vector<std::string> dims;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    dims.push_back(d.has_dim_param() ? d.dim_param()
                                     : std::to_string(d.dim_value()));
  }
  return dims;
}

// ------------------------------------------------------------ onnxruntime

// Within 1e-5 of the largest magnitude of `want`.
void ExpectClose(const torch::Tensor& got, const torch::Tensor& want,
                 const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << " missing";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double diff = (got - want).abs().max().item<double>();
  const double scale = want.abs().max().item<double>();
  std::printf("[ onnxruntime ] %s: max |diff| %.3g, largest |value| %.3g\n",
              what.c_str(), diff, scale);
  EXPECT_LE(diff, 1e-5 * scale) << what;
}

// onnx.checker and onnxruntime on `c` written with `options`: logits and
// predictions equal the LibTorch computation.
void CheckWithOnnxRuntime(const Case& c,
                          const OnnxOptions& options = OnnxOptions()) {
  TempDir dir;
  const std::string model = dir.Join("model.onnx");
  WriteOnnxModel(model, c.graph, options);
  std::map<std::string, torch::Tensor> out;
  ASSERT_NO_FATAL_FAILURE(RunOnnxRuntime(model, c.images, dir, &out));
  const std::string name =
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  ExpectClose(out["Net/Logits"], c.logits, name + " logits");
  ExpectClose(out["Net/Predictions"], torch::softmax(c.logits, -1),
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
  auto v = [](const torch::Tensor& t) { return t.view({1, -1, 1, 1}); };
  return (x - v(p.mean)) * v(p.gamma / (p.variance + p.epsilon).sqrt()) +
         v(p.beta);
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
  GraphNode& norm = gm.Add(GraphOp::kBatchNorm, "Net/Conv2d_1/BatchNorm",
                           {conv_out}, {2, 4, 4, 4});
  norm.scale = bn.gamma;
  norm.offset = bn.beta;
  norm.mean = bn.mean;
  norm.variance = bn.variance;
  norm.epsilon = bn.epsilon;
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

TEST(OnnxWriterTest, ConvSamePadsFoldedBatchNormRelu6) {
  torch::manual_seed(1);
  const torch::Tensor w = torch::randn({4, 3, 5, 3});
  const BatchNormParams bn = RandomBatchNorm(4);
  const Case c = ConvBatchNormRelu6(w, bn);
  const OnnxOptions clip = OnnxOptions().relu6_as_clip(true);
  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph, clip));
  // By default relu6 is 6 - Relu(6 - Relu(x)), which OpenCV 4.6 runs.
  const pb::ModelProto portable = Parse(OnnxModelBytes(c.graph));
  EXPECT_EQ(OpTypes(portable), (std::vector<std::string>{
                                   "Transpose", "Conv", "Relu", "Sub", "Relu",
                                   "Sub", "Transpose", "Flatten", "Softmax"}));
  EXPECT_EQ(
      Initializer(portable, NodeOf(portable, "Sub").input(0)).item<float>(),
      6.f);

  EXPECT_EQ(m.ir_version(), 7);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).domain(), "");
  EXPECT_EQ(m.opset_import(0).version(), 13);
  EXPECT_EQ(m.producer_name(), "slimtorch");
  EXPECT_EQ(OpTypes(m),
            (std::vector<std::string>{"Transpose", "Conv", "Clip", "Transpose",
                                      "Flatten", "Softmax"}));
  ASSERT_EQ(m.graph().input_size(), 1);
  EXPECT_EQ(m.graph().input(0).name(), "input");
  EXPECT_EQ(Dims(m.graph().input(0)),
            (std::vector<std::string>{"batch", "8", "8", "3"}));
  ASSERT_EQ(m.graph().output_size(), 2);
  EXPECT_EQ(m.graph().output(0).name(), "Net/Logits");
  EXPECT_EQ(m.graph().output(1).name(), "Net/Predictions");
  EXPECT_EQ(Dims(m.graph().output(1)),
            (std::vector<std::string>{"batch", "64"}));
  EXPECT_EQ(Ints(NodeOf(m, "Transpose"), "perm"),
            (std::vector<int64_t>{0, 3, 1, 2}));

  const pb::NodeProto& conv = NodeOf(m, "Conv");
  EXPECT_EQ(conv.name(), "Net/Conv2d_1");
  EXPECT_EQ(Ints(conv, "pads"), (std::vector<int64_t>{1, 0, 2, 1}));
  EXPECT_EQ(Ints(conv, "strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Ints(conv, "kernel_shape"), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(Int(conv, "group"), 1);
  ASSERT_EQ(conv.input_size(), 3);  // the folded batch norm adds a bias
  EXPECT_EQ(conv.input(0), NodeOf(m, "Transpose").output(0));
  EXPECT_EQ(Inputs(NodeOf(m, "Clip"))[0], conv.output(0));
  // w' = w·γ/√(var+ε), b' = β − mean·γ/√(var+ε), per output channel.
  const torch::Tensor folded_w = Initializer(m, conv.input(1));
  const torch::Tensor folded_b = Initializer(m, conv.input(2));
  ASSERT_EQ(folded_w.sizes(), w.sizes());
  ASSERT_EQ(folded_b.sizes(), torch::IntArrayRef({4}));
  for (int64_t o = 0; o < 4; ++o) {
    const double k = double(bn.gamma[o].item<float>()) /
                     std::sqrt(double(bn.variance[o].item<float>()) + 1e-3);
    EXPECT_FLOAT_EQ(folded_b[o].item<float>(),
                    float(double(bn.beta[o].item<float>()) -
                          double(bn.mean[o].item<float>()) * k));
    for (int64_t i = 0; i < 45; ++i) {
      EXPECT_FLOAT_EQ(folded_w[o].reshape({-1})[i].item<float>(),
                      float(double(w[o].reshape({-1})[i].item<float>()) * k));
    }
  }
  const pb::NodeProto& clip_node = NodeOf(m, "Clip");
  ASSERT_EQ(clip_node.input_size(), 3);
  EXPECT_EQ(Initializer(m, clip_node.input(1)).dim(), 0);
  EXPECT_EQ(Initializer(m, clip_node.input(1)).item<float>(), 0.f);
  EXPECT_EQ(Initializer(m, clip_node.input(2)).item<float>(), 6.f);
  EXPECT_EQ(Int(NodeOf(m, "Softmax"), "axis"), -1);

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c, clip);
  CheckWithOnnxRuntime(c);
}

TEST(OnnxWriterTest, BatchNormKeptWhenFoldingIsOffOrConvOutputIsShared) {
  torch::manual_seed(2);
  const torch::Tensor w = torch::randn({4, 3, 5, 3});
  const BatchNormParams bn = RandomBatchNorm(4);
  const Case plain = ConvBatchNormRelu6(w, bn);
  const Case shared = ConvBatchNormRelu6(w, bn, /*shared=*/true);
  const pb::ModelProto off =
      Parse(OnnxModelBytes(plain.graph, OnnxOptions().fold_batch_norm(false)));
  const pb::ModelProto kept = Parse(OnnxModelBytes(shared.graph));
  for (const pb::ModelProto* m : {&off, &kept}) {
    const pb::NodeProto& norm = NodeOf(*m, "BatchNormalization");
    EXPECT_EQ(norm.name(), "Net/Conv2d_1/BatchNorm");
    EXPECT_FLOAT_EQ(Float(norm, "epsilon"), 1e-3f);
    ASSERT_EQ(norm.input_size(), 5);
    EXPECT_EQ(norm.input(0), NodeOf(*m, "Conv").output(0));
    EXPECT_TRUE(torch::equal(Initializer(*m, norm.input(1)), bn.gamma));
    EXPECT_TRUE(torch::equal(Initializer(*m, norm.input(2)), bn.beta));
    EXPECT_TRUE(torch::equal(Initializer(*m, norm.input(3)), bn.mean));
    EXPECT_TRUE(torch::equal(Initializer(*m, norm.input(4)), bn.variance));
    EXPECT_EQ(NodeOf(*m, "Conv").input_size(), 2);  // no bias
    EXPECT_TRUE(torch::equal(Initializer(*m, NodeOf(*m, "Conv").input(1)), w));
  }
  EXPECT_EQ(Inputs(NodeOf(kept, "Add"))[1], NodeOf(kept, "Conv").output(0));

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(plain, OnnxOptions().fold_batch_norm(false));
  CheckWithOnnxRuntime(shared);
}

TEST(OnnxWriterTest, DepthwiseConvWithGroupAndBias) {
  torch::manual_seed(3);
  GraphMaker gm({2, 4, 5, 5});
  const torch::Tensor w = torch::randn({8, 1, 3, 3});  // multiplier 2
  const torch::Tensor b = torch::randn({8});
  GraphNode& conv =
      gm.Add(GraphOp::kConv, "Net/Conv2d_1_depthwise", {0}, {2, 8, 5, 5});
  conv.weights = w;
  conv.bias = b;
  conv.kernel_h = conv.kernel_w = 3;
  conv.pads = {1, 1, 1, 1};
  gm.Add(GraphOp::kRelu, "Net/Conv2d_1_depthwise/Relu", {gm.last()},
         {2, 8, 5, 5});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {2, 200});
  Case c{gm.Finish(gm.last()), torch::randn({2, 4, 5, 5}), {}};
  c.logits = FlattenNhwc(
      torch::relu(torch::conv2d(PadNchw(c.images, {1, 1, 1, 1}, 0), w, b, 1,
                                torch::IntArrayRef({0, 0}), 1, /*groups=*/4)));

  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph));
  const pb::NodeProto& node = NodeOf(m, "Conv");
  EXPECT_EQ(Int(node, "group"), 4);
  EXPECT_EQ(Ints(node, "pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(Ints(node, "strides"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(Inputs(node), (std::vector<std::string>{
                              "input_nchw", "Net/Conv2d_1_depthwise/weights",
                              "Net/Conv2d_1_depthwise/biases"}));
  EXPECT_TRUE(torch::equal(Initializer(m, node.input(1)), w));
  EXPECT_TRUE(torch::equal(Initializer(m, node.input(2)), b));
  EXPECT_EQ(NodeOf(m, "Relu").name(), "Net/Conv2d_1_depthwise/Relu");

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c);
}

TEST(OnnxWriterTest, PoolsWithAsymmetricPadsAndConcat) {
  torch::manual_seed(4);
  GraphMaker gm({2, 3, 9, 8});
  const std::array<int64_t, 4> pads = {1, 0, 1, 1};
  for (GraphOp op : {GraphOp::kMaxPool, GraphOp::kAvgPool}) {
    GraphNode& pool =
        gm.Add(op, op == GraphOp::kMaxPool ? "Net/MaxPool" : "Net/AvgPool", {0},
               {2, 3, 5, 4});
    pool.kernel_h = pool.kernel_w = 3;
    pool.stride = 2;
    pool.pads = pads;
  }
  gm.Add(GraphOp::kConcat, "Net/Concat", {1, 2}, {2, 6, 5, 4});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {2, 120});
  // Negative values everywhere: a zero pad winning a max would show.
  Case c{gm.Finish(gm.last()), -torch::rand({2, 3, 9, 8}) - 0.5, {}};
  const torch::Tensor max =
      torch::max_pool2d(PadNchw(c.images, pads, -INFINITY), {3, 3}, {2, 2});
  const torch::Tensor sum =
      torch::avg_pool2d(PadNchw(c.images, pads, 0), {3, 3}, {2, 2}) * 9;
  const torch::Tensor count =
      torch::avg_pool2d(PadNchw(torch::ones({1, 1, 9, 8}), pads, 0), {3, 3},
                        {2, 2}) *
      9;
  c.logits = FlattenNhwc(torch::cat({max, sum / count}, 1));

  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph));
  for (const char* op : {"MaxPool", "AveragePool"}) {
    const pb::NodeProto& pool = NodeOf(m, op);
    EXPECT_EQ(Ints(pool, "pads"), (std::vector<int64_t>{1, 0, 1, 1})) << op;
    EXPECT_EQ(Ints(pool, "kernel_shape"), (std::vector<int64_t>{3, 3})) << op;
    EXPECT_EQ(Ints(pool, "strides"), (std::vector<int64_t>{2, 2})) << op;
  }
  EXPECT_EQ(Int(NodeOf(m, "AveragePool"), "count_include_pad"), 0);
  const pb::NodeProto& concat = NodeOf(m, "Concat");
  EXPECT_EQ(Int(concat, "axis"), 1);
  EXPECT_EQ(Inputs(concat),
            (std::vector<std::string>{"Net/MaxPool", "Net/AvgPool"}));

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c);
}

TEST(OnnxWriterTest, LrnScalesAlphaByTheWindow) {
  torch::manual_seed(5);
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

  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph));
  const pb::NodeProto& node = NodeOf(m, "LRN");
  EXPECT_EQ(Int(node, "size"), 5);
  EXPECT_FLOAT_EQ(Float(node, "alpha"), 0.05f);
  EXPECT_FLOAT_EQ(Float(node, "beta"), 0.75f);
  EXPECT_FLOAT_EQ(Float(node, "bias"), 2.f);

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c);
}

TEST(OnnxWriterTest, FlattenInNhwcOrderThenFullyConnected) {
  torch::manual_seed(6);
  GraphMaker gm({2, 3, 4, 5});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {0}, {2, 60});
  const torch::Tensor w = torch::randn({10, 60});
  const torch::Tensor b = torch::randn({10});
  GraphNode& fc =
      gm.Add(GraphOp::kFullyConnected, "Net/fc", {gm.last()}, {2, 10});
  fc.weights = w;
  fc.bias = b;
  Case c{gm.Finish(gm.last()), torch::randn({2, 3, 4, 5}), {}};
  c.logits = torch::matmul(FlattenNhwc(c.images), w.t()) + b;

  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph));
  EXPECT_EQ(OpTypes(m),
            (std::vector<std::string>{"Transpose", "Transpose", "Flatten",
                                      "Gemm", "Softmax"}));
  EXPECT_EQ(Ints(NodeOf(m, "Transpose", 1), "perm"),
            (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(Int(NodeOf(m, "Flatten"), "axis"), 1);
  const pb::NodeProto& gemm = NodeOf(m, "Gemm");
  EXPECT_EQ(Int(gemm, "transB"), 1);
  EXPECT_EQ(gemm.output(0), "Net/Logits");
  ASSERT_EQ(gemm.input_size(), 3);
  EXPECT_TRUE(torch::equal(Initializer(m, gemm.input(1)), w));
  EXPECT_TRUE(torch::equal(Initializer(m, gemm.input(2)), b));

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c);
}

TEST(OnnxWriterTest, AddScaleAndConcat) {
  torch::manual_seed(7);
  GraphMaker gm({1, 3, 4, 4});
  gm.Add(GraphOp::kRelu, "Net/Relu", {0}, {1, 3, 4, 4});
  gm.Add(GraphOp::kScale, "Net/Scale", {0}, {1, 3, 4, 4}).factor = 0.5;
  gm.Add(GraphOp::kAdd, "Net/Add", {1, 2}, {1, 3, 4, 4});
  gm.Add(GraphOp::kConcat, "Net/Concat", {3, 0}, {1, 6, 4, 4});
  gm.Add(GraphOp::kFlatten, "Net/Flatten", {gm.last()}, {1, 96});
  Case c{gm.Finish(gm.last()), torch::randn({1, 3, 4, 4}), {}};
  c.logits = FlattenNhwc(
      torch::cat({torch::relu(c.images) + c.images * 0.5, c.images}, 1));

  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph));
  const pb::NodeProto& mul = NodeOf(m, "Mul");
  ASSERT_EQ(mul.input_size(), 2);
  EXPECT_EQ(mul.input(0), "input_nchw");
  EXPECT_EQ(Initializer(m, mul.input(1)).dim(), 0);
  EXPECT_EQ(Initializer(m, mul.input(1)).item<float>(), 0.5f);
  EXPECT_EQ(Inputs(NodeOf(m, "Add")),
            (std::vector<std::string>{"Net/Relu", "Net/Scale"}));
  EXPECT_EQ(Inputs(NodeOf(m, "Concat")),
            (std::vector<std::string>{"Net/Add", "input_nchw"}));

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c);
}

// Mean + squeeze as logits, run by onnxruntime at a batch other than the
// recorded one (the batch dimension is dynamic).
Case MeanSqueeze(int64_t run_batch) {
  GraphMaker gm({2, 5, 3, 4});
  gm.Add(GraphOp::kMean, "Net/global_pool", {0}, {2, 5, 1, 1});
  gm.Add(GraphOp::kSqueeze, "Net/SpatialSqueeze", {gm.last()}, {2, 5});
  Case c{gm.Finish(gm.last()), torch::randn({run_batch, 5, 3, 4}), {}};
  c.logits = c.images.mean({2, 3});
  return c;
}

TEST(OnnxWriterTest, MeanSqueezeSoftmaxAndDynamicBatch) {
  torch::manual_seed(8);
  const Case c = MeanSqueeze(3);
  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph));
  EXPECT_EQ(OpTypes(m),
            (std::vector<std::string>{"Transpose", "GlobalAveragePool",
                                      "Flatten", "Softmax"}));
  EXPECT_EQ(Int(NodeOf(m, "Flatten"), "axis"), 1);
  EXPECT_EQ(NodeOf(m, "Flatten").output(0), "Net/Logits");
  EXPECT_EQ(NodeOf(m, "Softmax").output(0), "Net/Predictions");
  EXPECT_EQ(Dims(m.graph().output(0)),
            (std::vector<std::string>{"batch", "5"}));

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c);
}

// A video net's mean over T, H, W: an AveragePool over the whole clip
// (OpenCV 4.6 cannot run a 5-D GlobalAveragePool, nor a 5-D ReduceMean at
// a dynamic batch over 1), run by onnxruntime at a batch other than the
// recorded one.
TEST(OnnxWriterTest, VideoMeanIsAnAveragePoolOverTheClip) {
  torch::manual_seed(11);
  GraphMaker gm({1, 3, 4, 5, 6});
  gm.Add(GraphOp::kMean, "Net/Logits/Mean", {0}, {1, 3, 1, 1, 1});
  gm.Add(GraphOp::kSqueeze, "Net/Logits/Squeeze", {gm.last()}, {1, 3});
  Case c{gm.Finish(gm.last()), torch::randn({2, 3, 4, 5, 6}), {}};
  c.logits = c.images.mean({2, 3, 4});

  const pb::ModelProto m = Parse(OnnxModelBytes(c.graph));
  EXPECT_EQ(OpTypes(m), (std::vector<std::string>{"Transpose", "AveragePool",
                                                  "Flatten", "Softmax"}));
  const pb::NodeProto& pool = NodeOf(m, "AveragePool");
  EXPECT_EQ(Ints(pool, "kernel_shape"), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(Ints(pool, "pads"), (std::vector<int64_t>(6, 0)));
  EXPECT_EQ(Ints(pool, "strides"), (std::vector<int64_t>{1, 1, 1}));

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c);
}

TEST(OnnxWriterTest, FixedBatchSize) {
  const Case c = MeanSqueeze(2);
  const pb::ModelProto m =
      Parse(OnnxModelBytes(c.graph, OnnxOptions().batch_size(2)));
  EXPECT_EQ(Dims(m.graph().input(0)),
            (std::vector<std::string>{"2", "3", "4", "5"}));
  EXPECT_EQ(Dims(m.graph().output(0)), (std::vector<std::string>{"2", "5"}));
  EXPECT_EQ(Dims(m.graph().output(1)), (std::vector<std::string>{"2", "5"}));

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c, OnnxOptions().batch_size(2));
}

TEST(OnnxWriterTest, OpsetsAndTheirIrVersions) {
  torch::manual_seed(9);
  const Case c =
      ConvBatchNormRelu6(torch::randn({4, 3, 5, 3}), RandomBatchNorm(4));
  // onnx/helper.py VERSION_TABLE: the IR version each opset came with.
  const std::map<int, int64_t> ir = {{11, 6}, {13, 7}, {17, 8}, {21, 10}};
  for (const auto& [opset, ir_version] : ir) {
    const pb::ModelProto m =
        Parse(OnnxModelBytes(c.graph, OnnxOptions().opset(opset)));
    EXPECT_EQ(m.ir_version(), ir_version) << opset;
    EXPECT_EQ(m.opset_import(0).version(), opset);
  }
  for (int opset : {10, 22}) {
    EXPECT_NE(ErrorMessage([&] {
                OnnxModelBytes(c.graph, OnnxOptions().opset(opset));
              }).find("opset " + std::to_string(opset) + " is not supported"),
              std::string::npos);
  }

  SKIP_WITHOUT_ONNXRUNTIME();
  CheckWithOnnxRuntime(c, OnnxOptions().opset(11));
  CheckWithOnnxRuntime(c, OnnxOptions().opset(21));
}

TEST(OnnxWriterTest, DeterministicBytesAndAtomicWrite) {
  torch::manual_seed(10);
  const Case c =
      ConvBatchNormRelu6(torch::randn({4, 3, 5, 3}), RandomBatchNorm(4));
  const std::string bytes = OnnxModelBytes(c.graph);
  EXPECT_EQ(OnnxModelBytes(c.graph), bytes);
  TempDir dir;
  WriteOnnxModel(dir.Join("model.onnx"), c.graph);
  EXPECT_EQ(ReadFileToString(dir.Join("model.onnx")), bytes);
  EXPECT_EQ(Glob(dir.Join("*")),
            std::vector<std::string>{dir.Join("model.onnx")});
  // A failing graph leaves no file behind.
  InferenceGraph broken = c.graph;
  broken.nodes[0].weights = torch::randn({4, 2, 5, 3});
  EXPECT_THROW(WriteOnnxModel(dir.Join("broken.onnx"), broken), Error);
  EXPECT_EQ(Glob(dir.Join("*")),
            std::vector<std::string>{dir.Join("model.onnx")});
}

TEST(OnnxWriterTest, NodesFeedingNoOutputAreLeftOut) {
  GraphMaker gm({1, 2, 3, 3});
  gm.Add(GraphOp::kRelu, "Net/AuxLogits/Relu", {0}, {1, 2, 3, 3});
  gm.Add(GraphOp::kMean, "Net/global_pool", {0}, {1, 2, 1, 1});
  gm.Add(GraphOp::kSqueeze, "Net/SpatialSqueeze", {gm.last()}, {1, 2});
  const pb::ModelProto m = Parse(OnnxModelBytes(gm.Finish(gm.last())));
  EXPECT_EQ(OpTypes(m),
            (std::vector<std::string>{"Transpose", "GlobalAveragePool",
                                      "Flatten", "Softmax"}));
}

TEST(OnnxWriterTest, MalformedGraphsNameTheNode) {
  const Case c =
      ConvBatchNormRelu6(torch::randn({4, 3, 5, 3}), RandomBatchNorm(4));
  InferenceGraph g = c.graph;
  g.nodes[0].weights = torch::randn({4, 2, 5, 3});
  std::string msg = ErrorMessage([&] { OnnxModelBytes(g); });
  EXPECT_NE(msg.find("'Net/Conv2d_1' (Conv)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in = 3, got [4, 2, 5, 3]"), std::string::npos) << msg;

  g = c.graph;
  g.nodes[1].inputs = {g.nodes[2].output};  // a value not produced yet
  msg = ErrorMessage([&] { OnnxModelBytes(g); });
  EXPECT_NE(msg.find("'Net/Conv2d_1/BatchNorm' (BatchNorm) reads value"),
            std::string::npos)
      << msg;

  g = c.graph;
  g.nodes[1].mean = torch::zeros({3});
  msg = ErrorMessage([&] { OnnxModelBytes(g); });
  EXPECT_NE(msg.find("batch norm 'Net/Conv2d_1/BatchNorm'"), std::string::npos)
      << msg;
  msg = ErrorMessage(
      [&] { OnnxModelBytes(g, OnnxOptions().fold_batch_norm(false)); });
  EXPECT_NE(msg.find("expected 4 values for moving_mean"), std::string::npos)
      << msg;

  g = c.graph;
  g.logits = -1;
  msg = ErrorMessage([&] { OnnxModelBytes(g); });
  EXPECT_NE(msg.find("needs both logits and predictions"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace slimtorch
