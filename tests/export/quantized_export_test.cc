// Quantized (8-bit) inference graphs: RunGraph computes TensorFlow's fake
// quantization (nets/fake_quant.h) of activations and weights; the ONNX
// writer's QDQ form (QuantizeLinear / DequantizeLinear on TensorFlow's
// grids, weights as TensorFlow's integers) and the GraphDef writer's
// FakeQuantWithMinMaxVars nodes, parsed back. The graphs are recorded float
// nets quantized by the test (export/quantized_graph.h). With
// SLIMTORCH_QUANTIZED_ENGINE_TESTS=1 (the CTest test
// export_quantized_engines, label "tensorflow"), onnxruntime and TensorFlow
// run them against RunGraph.
#include <gtest/gtest.h>
#include <torch/torch.h>

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
#include "export/quantized_graph.h"
#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/export/export.h"
#include "slimtorch/export/graphdef_writer.h"
#include "slimtorch/export/inference_graph.h"
#include "slimtorch/export/onnx_writer.h"
#include "slimtorch/io/proto/onnx.pb.h"
#include "slimtorch/io/proto/tf_graph.pb.h"
#include "slimtorch/nets/fake_quant.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace {

namespace opb = ::slimtorch::onnx;
namespace tpb = ::slimtorch::tfgraph;
using testing::TempDir;
using testing_export::CountOps;
using testing_export::GraphMaker;
using testing_export::QuantizeGraph;
using testing_io::ErrorMessage;

nets::QuantRange Range(float min, float max, bool narrow = false) {
  nets::QuantRange q;
  q.min = torch::tensor(min);
  q.max = torch::tensor(max);
  q.narrow_range = narrow;
  return q;
}

// lenet (1 channel, 28x28, 10 classes) or another small net, recorded for
// a batch of `batch` and quantized with ranges from `images`.
struct QuantizedNet {
  InferenceGraph graph;
  torch::Tensor images;
};

QuantizedNet MakeQuantizedNet(const std::string& name, int64_t size,
                              bool per_channel, int64_t batch = 2) {
  torch::manual_seed(11);
  const int64_t channels = name == "lenet" ? 1 : 3;
  auto net = CreateNet(name, NetOptions()
                                 .num_classes(10)
                                 .input_channels(channels)
                                 .image_size(size));
  testing_export::ScrambleStatistics(*net, 5);
  net->module().eval();
  const InferenceGraph g = RecordInferenceGraph(*net, size, batch);
  QuantizedNet q;
  q.images = torch::rand({batch, channels, size, size}) * 2 - 1;
  q.graph = QuantizeGraph(g, q.images, per_channel);
  return q;
}

// ------------------------------------------------------------ RunGraph

// images → conv (weights per output channel) → fake quant → mean →
// squeeze → fully connected (weights per tensor) → fake quant = logits.
TEST(QuantizedGraphTest, RunGraphFakeQuantizesActivationsAndWeights) {
  torch::manual_seed(1);
  GraphMaker gm({2, 3, 6, 6});
  GraphNode& conv = gm.Add(GraphOp::kConv, "Net/Conv", {0}, {2, 4, 6, 6});
  conv.weights = torch::randn({4, 3, 3, 3});
  conv.bias = torch::randn({4});
  conv.pads = {1, 1, 1, 1};
  conv.weights_quant = testing_export::RangeOf(conv.weights, true, true);
  const torch::Tensor conv_w = conv.weights, conv_b = conv.bias;
  const nets::QuantRange conv_q = conv.weights_quant;
  const int conv_out = gm.last();
  gm.Add(GraphOp::kFakeQuant, "Net/Conv/act_quant", {conv_out}, {2, 4, 6, 6})
      .quant = Range(-1.7f, 2.3f);
  const int act = gm.last();
  gm.Add(GraphOp::kMean, "Net/Mean", {act}, {2, 4, 1, 1});
  gm.Add(GraphOp::kSqueeze, "Net/Squeeze", {gm.last()}, {2, 4});
  GraphNode& fc = gm.Add(GraphOp::kFullyConnected, "Net/Fc", {gm.last()},
                         {2, 5});
  fc.weights = torch::randn({5, 4});
  fc.weights_quant = Range(-1.1f, 0.9f, true);
  const torch::Tensor fc_w = fc.weights;
  const int fc_out = gm.last();
  gm.Add(GraphOp::kFakeQuant, "Net/Fc/act_quant", {fc_out}, {2, 5}).quant =
      Range(-0.5f, 0.7f);
  const InferenceGraph g = gm.Finish(gm.last());
  const torch::Tensor x = torch::randn({2, 3, 6, 6});
  const std::vector<torch::Tensor> v = RunGraph(g, x);

  const torch::Tensor wq = nets::FakeQuantPerChannel(
      conv_w, conv_q.min, conv_q.max, 0, 8, true);
  // The fake-quantized weights differ from the float ones: the test means
  // something.
  EXPECT_GT((wq - conv_w).abs().max().item<double>(), 1e-3);
  EXPECT_TRUE(torch::equal(
      v[conv_out], torch::conv2d(x, wq, conv_b, 1, 1)));
  EXPECT_TRUE(torch::equal(
      v[act], nets::FakeQuant(v[conv_out], torch::tensor(-1.7f),
                              torch::tensor(2.3f))));
  // 8 bits: at most 256 distinct values.
  EXPECT_LE(std::get<0>(at::_unique(v[act])).numel(), 256);
  const torch::Tensor fc_in = v[act].mean({2, 3}).reshape({2, 4});
  const torch::Tensor fc_wq = nets::FakeQuant(fc_w, torch::tensor(-1.1f),
                                              torch::tensor(0.9f), 8, true);
  EXPECT_TRUE(torch::allclose(v[fc_out], torch::linear(fc_in, fc_wq), 1e-6,
                              1e-6));
  EXPECT_TRUE(torch::equal(
      v[g.logits], nets::FakeQuant(v[fc_out], torch::tensor(-0.5f),
                                   torch::tensor(0.7f))));
}

TEST(QuantizedGraphTest, TheTestQuantizerFoldsBatchNormsAndAddsRanges) {
  const QuantizedNet m = MakeQuantizedNet("mobilenet_v1_025", 32, false, 1);
  EXPECT_EQ(CountOps(m.graph, GraphOp::kBatchNorm), 0);
  // One fake quant after each of the 27 relu6, one after the logits conv
  // (no activation follows it).
  EXPECT_EQ(CountOps(m.graph, GraphOp::kConv), 28);
  EXPECT_EQ(CountOps(m.graph, GraphOp::kFakeQuant), 28);
}

// ------------------------------------------------------------ ONNX

opb::ModelProto ParseOnnx(const std::string& bytes) {
  opb::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(bytes));
  return model;
}

const opb::TensorProto* FindInitializer(const opb::ModelProto& m,
                                        const std::string& name) {
  for (const opb::TensorProto& t : m.graph().initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// An initializer's values as float (FLOAT) or integers (UINT8, INT8).
torch::Tensor InitializerValues(const opb::ModelProto& m,
                                const std::string& name) {
  const opb::TensorProto* t = FindInitializer(m, name);
  EXPECT_NE(t, nullptr) << "no initializer " << name;
  if (t == nullptr) return torch::Tensor();
  std::vector<int64_t> dims(t->dims().begin(), t->dims().end());
  const std::string& raw = t->raw_data();
  if (t->data_type() == opb::TensorProto::FLOAT) {
    torch::Tensor out = torch::empty(dims, torch::kFloat);
    EXPECT_EQ(raw.size(), static_cast<size_t>(out.numel()) * 4);
    std::memcpy(out.data_ptr<float>(), raw.data(), raw.size());  // x86: LE
    return out;
  }
  torch::Tensor out = torch::empty(dims, torch::kLong);
  EXPECT_EQ(raw.size(), static_cast<size_t>(out.numel()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    const auto byte = static_cast<unsigned char>(raw[i]);
    out.data_ptr<int64_t>()[i] =
        t->data_type() == opb::TensorProto::INT8 ? static_cast<int8_t>(byte)
                                                 : byte;
  }
  return out;
}

const opb::NodeProto* ProducerOf(const opb::ModelProto& m,
                                 const std::string& value) {
  for (const opb::NodeProto& n : m.graph().node()) {
    if (n.output(0) == value) return &n;
  }
  return nullptr;
}

int CountOnnxOps(const opb::ModelProto& m, const std::string& op) {
  int k = 0;
  for (const opb::NodeProto& n : m.graph().node()) k += n.op_type() == op;
  return k;
}

// Every weighted layer's weights: integers of `type` behind a
// DequantizeLinear whose output equals RunGraph's fake-quantized weights;
// every fake quant: a QuantizeLinear whose scale and uint8 zero point are
// the nudged range's.
void CheckQdqModel(const InferenceGraph& g, const opb::ModelProto& m,
                   opb::TensorProto::DataType type) {
  std::map<std::string, const GraphNode*> layers;
  for (const GraphNode& n : g.nodes) layers[n.name] = &n;
  int weights = 0, activations = 0;
  for (const opb::NodeProto& node : m.graph().node()) {
    if ((node.op_type() == "Conv" || node.op_type() == "Gemm") &&
        layers.count(node.name())) {
      const GraphNode& n = *layers[node.name()];
      const opb::NodeProto* dq = ProducerOf(m, node.input(1));
      ASSERT_NE(dq, nullptr);
      ASSERT_EQ(dq->op_type(), "DequantizeLinear") << n.name;
      EXPECT_EQ(FindInitializer(m, dq->input(0))->data_type(), type);
      EXPECT_EQ(FindInitializer(m, dq->input(2))->data_type(), type);
      const torch::Tensor q = InitializerValues(m, dq->input(0));
      const torch::Tensor scale = InitializerValues(m, dq->input(1));
      const torch::Tensor zp = InitializerValues(m, dq->input(2));
      const nets::QuantRange& r = n.weights_quant;
      const nets::Nudged nd = nets::NudgeRange(r.min, r.max, 8, true);
      EXPECT_TRUE(torch::equal(scale.reshape({-1}), nd.scale.reshape({-1})));
      const int64_t shift = type == opb::TensorProto::INT8 ? 128 : 0;
      EXPECT_TRUE(torch::equal(zp.reshape({-1}) + shift,
                               nd.zero_point.reshape({-1}).to(torch::kLong)));
      std::vector<int64_t> shape(q.dim(), 1);
      shape[0] = -1;
      const torch::Tensor dequantized =
          (q - zp.reshape(r.axis < 0 ? std::vector<int64_t>{} : shape))
              .to(torch::kFloat) *
          scale.reshape(r.axis < 0 ? std::vector<int64_t>{} : shape);
      const torch::Tensor want =
          r.axis < 0 ? nets::FakeQuant(n.weights, r.min, r.max, 8, true)
                     : nets::FakeQuantPerChannel(n.weights, r.min, r.max, 0,
                                                 8, true);
      // (q − zp)·scale against TensorFlow's k·scale + nudged_min: the same
      // grid point, rounded once or twice.
      EXPECT_LE((dequantized - want).abs().max().item<double>(),
                2e-7 * want.abs().max().item<double>())
          << n.name;
      ++weights;
    }
    if (node.op_type() == "QuantizeLinear") {
      const std::string base = node.name().substr(
          0, node.name().size() - std::string("/QuantizeLinear").size());
      if (!layers.count(base) || layers[base]->op != GraphOp::kFakeQuant) {
        continue;
      }
      const nets::QuantRange& r = layers[base]->quant;
      const nets::Nudged nd = nets::NudgeRange(r.min, r.max, 8, false);
      EXPECT_EQ(FindInitializer(m, node.input(2))->data_type(),
                opb::TensorProto::UINT8);
      EXPECT_EQ(InitializerValues(m, node.input(1)).item<float>(),
                nd.scale.item<float>());
      EXPECT_EQ(InitializerValues(m, node.input(2)).item<int64_t>(),
                static_cast<int64_t>(nd.zero_point.item<float>()));
      ++activations;
    }
  }
  EXPECT_EQ(weights, CountOps(g, GraphOp::kConv) +
                         CountOps(g, GraphOp::kFullyConnected));
  EXPECT_EQ(activations, CountOps(g, GraphOp::kFakeQuant));
}

TEST(QuantizedOnnxTest, LenetInQdqFormOnTensorFlowsGrids) {
  const QuantizedNet m = MakeQuantizedNet("lenet", 28, false);
  // conv1, conv2, fc3 with their relus, fc4 (the logits).
  EXPECT_EQ(CountOps(m.graph, GraphOp::kFakeQuant), 4);
  for (bool signed_weights : {false, true}) {
    SCOPED_TRACE(signed_weights ? "int8 weights" : "uint8 weights");
    const opb::ModelProto model = ParseOnnx(OnnxModelBytes(
        m.graph, OnnxOptions().signed_weights(signed_weights)));
    CheckQdqModel(m.graph, model,
                  signed_weights ? opb::TensorProto::INT8
                                 : opb::TensorProto::UINT8);
    // 4 fake quants, 2 max pools and the flatten quantized again.
    EXPECT_EQ(CountOnnxOps(model, "QuantizeLinear"), 7);
    EXPECT_EQ(CountOnnxOps(model, "DequantizeLinear"), 7 + 4);
    // A max pool's output goes through its input's grid again.
    for (const opb::NodeProto& node : model.graph().node()) {
      if (node.op_type() != "MaxPool") continue;
      const opb::NodeProto* before = ProducerOf(model, node.input(0));
      ASSERT_NE(before, nullptr);
      ASSERT_EQ(before->op_type(), "DequantizeLinear") << node.name();
      const opb::NodeProto* after = nullptr;
      for (const opb::NodeProto& k : model.graph().node()) {
        if (k.input_size() > 0 && k.input(0) == node.output(0)) after = &k;
      }
      ASSERT_NE(after, nullptr);
      EXPECT_EQ(after->op_type(), "QuantizeLinear");
      EXPECT_EQ(after->input(1), before->input(1));
      EXPECT_EQ(after->input(2), before->input(2));
    }
  }
}

TEST(QuantizedOnnxTest, PerChannelWeightsAndRelu6AsClip) {
  const QuantizedNet m = MakeQuantizedNet("mobilenet_v1_025", 32, true, 1);
  const opb::ModelProto model = ParseOnnx(OnnxModelBytes(m.graph));
  CheckQdqModel(m.graph, model, opb::TensorProto::INT8);
  EXPECT_EQ(CountOnnxOps(model, "Clip"), 27);
  EXPECT_EQ(CountOnnxOps(model, "Sub"), 0);
  for (const opb::NodeProto& node : model.graph().node()) {
    if (node.op_type() == "DequantizeLinear" &&
        FindInitializer(model, node.input(0)) != nullptr) {
      ASSERT_EQ(node.attribute_size(), 1) << node.name();
      EXPECT_EQ(node.attribute(0).name(), "axis");
      EXPECT_EQ(node.attribute(0).i(), 0);
    }
  }
  // DequantizeLinear's axis came with opset 13.
  EXPECT_NE(ErrorMessage([&] {
              OnnxModelBytes(m.graph, OnnxOptions().opset(12));
            }).find("per-channel weights need opset 13"),
            std::string::npos);
}

TEST(QuantizedOnnxTest, FloatGraphsHaveNoQuantization) {
  torch::manual_seed(3);
  auto net = CreateNet("mobilenet_v1_025",
                       NetOptions().num_classes(10).image_size(32));
  net->module().eval();
  const opb::ModelProto model =
      ParseOnnx(OnnxModelBytes(RecordInferenceGraph(*net, 32, 1)));
  EXPECT_EQ(CountOnnxOps(model, "QuantizeLinear"), 0);
  EXPECT_EQ(CountOnnxOps(model, "DequantizeLinear"), 0);
  EXPECT_EQ(CountOnnxOps(model, "Clip"), 0);  // relu6 for OpenCV
  for (const opb::TensorProto& t : model.graph().initializer()) {
    EXPECT_EQ(t.data_type(), opb::TensorProto::FLOAT) << t.name();
  }
}

TEST(QuantizedOnnxTest, BadRangesNameTheNode) {
  GraphMaker gm({1, 2, 3, 3});
  gm.Add(GraphOp::kFakeQuant, "Net/Bad/act_quant", {0}, {1, 2, 3, 3}).quant =
      Range(0.5f, 0.5f);
  gm.Add(GraphOp::kMean, "Net/Mean", {gm.last()}, {1, 2, 1, 1});
  gm.Add(GraphOp::kSqueeze, "Net/Squeeze", {gm.last()}, {1, 2});
  InferenceGraph g = gm.Finish(gm.last());
  std::string e = ErrorMessage([&] { OnnxModelBytes(g); });
  EXPECT_NE(e.find("Net/Bad/act_quant"), std::string::npos) << e;
  EXPECT_NE(e.find("collapsed"), std::string::npos) << e;
  g.nodes[0].quant = Range(-1, 1);
  g.nodes[0].quant.num_bits = 12;
  e = ErrorMessage([&] { OnnxModelBytes(g); });
  EXPECT_NE(e.find("12 bits"), std::string::npos) << e;
}

// ------------------------------------------------------------ GraphDef

tpb::GraphDef ParseGraphDef(const std::string& bytes) {
  tpb::GraphDef def;
  EXPECT_TRUE(def.ParseFromString(bytes));
  return def;
}

TEST(QuantizedGraphDefTest, FakeQuantNodesAsTensorFlowsQuantizedGraphs) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per channel" : "per tensor");
    const QuantizedNet m =
        MakeQuantizedNet("mobilenet_v1_025", 32, per_channel, 1);
    const tpb::GraphDef def = ParseGraphDef(GraphDefBytes(m.graph));
    std::map<std::string, const tpb::NodeDef*> nodes;
    for (const tpb::NodeDef& n : def.node()) nodes[n.name()] = &n;
    const std::string weights_op =
        per_channel ? "FakeQuantWithMinMaxVarsPerChannel"
                    : "FakeQuantWithMinMaxVars";
    int activations = 0, weights = 0, reshapes = 0;
    for (const tpb::NodeDef& n : def.node()) {
      if (n.op() == "Reshape" && n.name().find("/weights_quant/") !=
                                     std::string::npos) {
        ++reshapes;
      }
      if (n.op().rfind("FakeQuantWithMinMaxVars", 0) != 0) continue;
      EXPECT_EQ(n.attr().at("num_bits").i(), 8) << n.name();
      EXPECT_EQ(n.attr().count("T"), 0u) << n.name();
      ASSERT_EQ(n.input_size(), 3);
      const bool weight = n.name().find("/weights_quant/") != std::string::npos;
      EXPECT_EQ(n.attr().at("narrow_range").b(), weight) << n.name();
      if (weight) {
        EXPECT_EQ(n.op(), weights_op);
        ++weights;
      } else {
        EXPECT_EQ(n.op(), "FakeQuantWithMinMaxVars");
        EXPECT_EQ(n.name().substr(n.name().size() - 10), "/act_quant");
        ++activations;
      }
      for (int i : {1, 2}) {
        ASSERT_TRUE(nodes.count(n.input(i))) << n.input(i);
        EXPECT_EQ(nodes[n.input(i)]->op(), "Const");
      }
    }
    EXPECT_EQ(activations, CountOps(m.graph, GraphOp::kFakeQuant));
    EXPECT_EQ(weights, CountOps(m.graph, GraphOp::kConv));
    // Per channel, the 13 depthwise filters [3, 3, C, 1] go through
    // [9, C] (the per-channel op takes the last dimension) and back.
    EXPECT_EQ(reshapes, per_channel ? 2 * 13 : 0);
    // Every conv reads its fake-quantized weights.
    int convs = 0;
    for (const tpb::NodeDef& n : def.node()) {
      if (n.op() != "Conv2D" && n.op() != "DepthwiseConv2dNative") continue;
      const std::string& w = n.input(1);
      EXPECT_NE(w.find("/weights_quant/"), std::string::npos) << n.name();
      EXPECT_TRUE(nodes.count(w)) << w;
      if (nodes.count(w)) {
        EXPECT_EQ(nodes[w]->op(), n.op() == "Conv2D" || !per_channel
                                      ? weights_op
                                      : std::string("Reshape"));
      }
      ++convs;
    }
    EXPECT_EQ(convs, 28);
  }
}

// ------------------------------------------------------------ engines

bool EngineTestsOn() {
  const char* on = std::getenv("SLIMTORCH_QUANTIZED_ENGINE_TESTS");
  return on != nullptr && std::string(on) == "1";
}

struct EngineCase {
  std::string net;
  int64_t size;
  bool per_channel;
  // The logits within `steps` steps of their grid of RunGraph's (seen: a
  // value landing on the other side of a rounding boundary, by float
  // rounding, moves a step, and the layers after it carry that on); int8
  // convs and gemms in onnxruntime's optimized graph (the first conv's input
  // and the logits conv's, a mean, are float).
  double steps;
  int int8_convs, int8_gemms;
};

std::string CaseName(const ::testing::TestParamInfo<EngineCase>& info) {
  return info.param.net + "_" + std::to_string(info.param.size) +
         (info.param.per_channel ? "_per_channel" : "_per_tensor");
}

// The step of the logits' grid: the fake quant they come from (through a
// squeeze).
double LogitsStep(const InferenceGraph& g) {
  int v = g.logits;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const GraphNode& n = g.nodes[i];
    if (n.output != v) continue;
    if (n.op == GraphOp::kFakeQuant) {
      return nets::NudgeRange(n.quant.min, n.quant.max, 8, false)
          .scale.item<double>();
    }
    if (n.op != GraphOp::kSqueeze) break;
    v = n.inputs[0];
  }
  ADD_FAILURE() << "the logits come from no fake quant";
  return 0;
}

class QuantizedExportEngineTest
    : public ::testing::TestWithParam<EngineCase> {
 protected:
  void SetUp() override {
    if (!EngineTestsOn()) {
      GTEST_SKIP() << "SLIMTORCH_QUANTIZED_ENGINE_TESTS=1 runs it (CTest: "
                      "export_quantized_engines)";
    }
  }
  // The case's net quantized, and RunGraph's logits for its images.
  void MakeNet() {
    const EngineCase& p = GetParam();
    m_ = MakeQuantizedNet(p.net, p.size, p.per_channel);
    want_ = RunGraph(m_.graph, m_.images)[m_.graph.logits];
  }
  QuantizedNet m_;
  torch::Tensor want_;
  TempDir dir_;
};

// onnxruntime runs the QDQ model with its int8 kernels and gives RunGraph's
// logits within a quantization step of them; its optimized graph holds
// QLinearConv (and QGemm for the nets with a quantized fully connected
// input).
TEST_P(QuantizedExportEngineTest, OnnxRuntime) {
  SKIP_WITHOUT_ONNXRUNTIME();
  MakeNet();
  const EngineCase& p = GetParam();
  const QuantizedNet& m = m_;
  const TempDir& dir = dir_;
  const std::string model = dir.Join("model.onnx");
  WriteOnnxModel(model, m.graph);
  std::map<std::string, torch::Tensor> out;
  ASSERT_NO_FATAL_FAILURE(testing_export::RunGoldenScript(
      "check_onnx.py", model, m.images, dir,
      " --optimized=" + dir.Join("ops.txt"), &out));
  const double step = LogitsStep(m.graph);
  const torch::Tensor got = out[m.graph.scope + "/Logits"];
  ASSERT_TRUE(got.defined());
  const torch::Tensor diff = (got - want_).abs();
  const double steps = diff.max().item<double>() / step;
  const double off = (diff > step / 2).to(torch::kFloat).mean().item<double>();
  std::istringstream ops(ReadFileToString(dir.Join("ops.txt")));
  std::map<std::string, int> counts;
  for (std::string op; std::getline(ops, op);) ++counts[op];
  std::printf(
      "[ onnxruntime ] %s: logits within %.3g steps of %.3g (%.1f%% off by a "
      "step or more); int8 ops: QLinearConv %d, QGemm %d, QLinearMatMul %d, "
      "float Conv %d\n",
      CaseName(::testing::TestParamInfo<EngineCase>(p, 0)).c_str(), steps, step, 100 * off,
      counts[":QLinearConv"] + counts["com.microsoft:QLinearConv"],
      counts["com.microsoft:QGemm"], counts[":QLinearMatMul"],
      counts[":Conv"] + counts["com.microsoft:FusedConv"] +
          counts["com.microsoft.nchwc:Conv"]);
  EXPECT_LE(steps, p.steps + 1e-3);
  EXPECT_EQ(counts[":QLinearConv"] + counts["com.microsoft:QLinearConv"],
            p.int8_convs);
  EXPECT_EQ(counts["com.microsoft:QGemm"], p.int8_gemms);
}

// The models bench/ times: mobilenet_v1 at 224, float and quantized (per
// tensor), dynamic batch, into $SLIMTORCH_QUANTIZED_EXPORT_DIR.
TEST(QuantizedExportBench, WritesMobilenetV1Models) {
  const char* dir = std::getenv("SLIMTORCH_QUANTIZED_EXPORT_DIR");
  if (dir == nullptr) GTEST_SKIP() << "no SLIMTORCH_QUANTIZED_EXPORT_DIR";
  for (const char* name : {"mobilenet_v1", "mobilenet_v1_025"}) {
    torch::manual_seed(11);
    auto net = CreateNet(name, NetOptions().num_classes(1001));
    testing_export::ScrambleStatistics(*net, 5);
    net->module().eval();
    const InferenceGraph g = RecordInferenceGraph(*net, 224, 0);
    const torch::Tensor images = torch::rand({4, 3, 224, 224}) * 2 - 1;
    WriteOnnxModel(StrCat(dir, "/", name, "_float.onnx"), g);
    const InferenceGraph q = QuantizeGraph(g, images, false);
    WriteOnnxModel(StrCat(dir, "/", name, "_u8.onnx"), q);
    WriteOnnxModel(StrCat(dir, "/", name, "_s8.onnx"), q,
                   OnnxOptions().signed_weights(true));
  }
}

// TensorFlow runs the GraphDef with its own fake-quant kernels: RunGraph's
// logits within 1e-5 of the largest, give or take the steps of the float
// rounding flips above (its convolutions sum in another order).
TEST_P(QuantizedExportEngineTest, TensorFlow) {
  SKIP_WITHOUT_TENSORFLOW();
  MakeNet();
  const EngineCase& p = GetParam();
  const QuantizedNet& m = m_;
  const TempDir& dir = dir_;
  const std::string path = dir.Join("graph.pb");
  WriteGraphDef(path, m.graph);
  std::map<std::string, torch::Tensor> out;
  ASSERT_NO_FATAL_FAILURE(
      testing_export::RunTensorFlow(path, m.images, dir, &out));
  const torch::Tensor got = out[m.graph.scope + "/Logits"];
  ASSERT_TRUE(got.defined());
  const torch::Tensor& w = want_;
  const double diff = (got - w).abs().max().item<double>();
  const double scale = w.abs().max().item<double>();
  const double step = LogitsStep(m.graph);
  const double close =
      ((got - w).abs() <= 1e-5 * scale).to(torch::kFloat).mean().item<double>();
  std::printf(
      "[ tensorflow ] %s: logits within %.3g of the largest %.3g (%.3g "
      "steps; %.1f%% within 1e-5 of it)\n",
      CaseName(::testing::TestParamInfo<EngineCase>(p, 0)).c_str(),
      diff / scale, scale, diff / step, 100 * close);
  EXPECT_LE(diff, 1e-5 * scale + p.steps * step * (1 + 1e-3));
}

INSTANTIATE_TEST_SUITE_P(
    Nets, QuantizedExportEngineTest,
    ::testing::Values(EngineCase{"lenet", 28, false, 1, 1, 2},
                      EngineCase{"lenet", 28, true, 1, 1, 2},
                      EngineCase{"cifarnet", 32, false, 1, 0, 2},
                      EngineCase{"mobilenet_v1_025", 64, false, 1, 26, 0},
                      EngineCase{"mobilenet_v1_025", 64, true, 1, 26, 0},
                      EngineCase{"resnet_v1_50", 64, false, 4, 52, 0}),
    CaseName);

}  // namespace
}  // namespace slimtorch
