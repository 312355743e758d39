// label_image's onnxruntime engine (src/export/onnxruntime_model.cc): which
// library it loads and the clear errors of a missing library, a library that
// is not onnxruntime's and a model onnxruntime refuses; where onnxruntime
// loads ($SLIMTORCH_ONNXRUNTIME_LIBRARY, else the loader's path; the ctest
// test onnxruntime_label_image, label "tensorflow", points it at
// /opt/tfenv's wheel), exported float nets give LibTorch's and OpenCV's
// probabilities and a hand-built QDQ model gives the hand-worked int8 grid.
// Without the library those tests skip.
#include "slimtorch/export/onnxruntime_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "export/python_engines.h"
#include "io/io_test_util.h"
#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/export/export.h"
#include "slimtorch/export/label_image.h"
#include "slimtorch/export/onnx_writer.h"
#include "slimtorch/io/proto/onnx.pb.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"
#ifdef SLIMTORCH_WITH_OPENCV
#include "slimtorch/export/opencv_model.h"
#endif

namespace slimtorch {
namespace {

using testing::TempDir;
namespace pb = ::slimtorch::onnx;

constexpr char kVariable[] = "SLIMTORCH_ONNXRUNTIME_LIBRARY";

// Sets (or, with null, unsets) the library variable for one scope.
class ScopedLibraryVariable {
 public:
  explicit ScopedLibraryVariable(const char* value) {
    OverrideSlimtorchVariable(kVariable, value);
  }
  ~ScopedLibraryVariable() { ClearSlimtorchVariableOverride(kVariable); }
};

// Whether onnxruntime loads the default way; the reason when not.
bool HaveOnnxRuntimeLibrary(std::string* why) {
  try {
    LoadOnnxRuntime();
    return true;
  } catch (const Error& e) {
    *why = e.what();
    return false;
  }
}

#define SKIP_WITHOUT_ONNXRUNTIME_LIBRARY()                                   \
  if (std::string why_; !HaveOnnxRuntimeLibrary(&why_))                      \
  GTEST_SKIP() << "onnxruntime's library does not load (set " << kVariable \
               << "): " << why_

TEST(OnnxRuntimeModelTest, LibraryIsTheOptionThenTheVariableThenTheDefaults) {
  {
    ScopedLibraryVariable unset(nullptr);
    EXPECT_EQ(OnnxRuntimeLibraryCandidates(""),
              (std::vector<std::string>{"libonnxruntime.so.1",
                                        "libonnxruntime.so"}));
    EXPECT_EQ(OnnxRuntimeLibraryCandidates("/x/libort.so"),
              std::vector<std::string>{"/x/libort.so"});
  }
  ScopedLibraryVariable set("/y/libonnxruntime.so.1.32.0");
  EXPECT_EQ(OnnxRuntimeLibraryCandidates(""),
            std::vector<std::string>{"/y/libonnxruntime.so.1.32.0"});
  EXPECT_EQ(OnnxRuntimeLibraryCandidates("/x/libort.so"),
            std::vector<std::string>{"/x/libort.so"});
}

// A missing library, a file that is no library, a library without
// onnxruntime's entry point: each names the file, the last says what it
// lacks, the first two say how to point at the library.
TEST(OnnxRuntimeModelTest, BadLibrariesAreNamed) {
  TempDir dir;
  const std::string gone = dir.Join("libonnxruntime.so.1.99.0");
  EXPECT_ERROR_CONTAINS(LoadOnnxRuntime(gone), gone, kVariable,
                        "--onnxruntime_library", "LD_LIBRARY_PATH");
  {
    ScopedLibraryVariable set(gone.c_str());
    EXPECT_ERROR_CONTAINS(OnnxRuntimeModel{dir.Join("m.onnx")}, gone,
                          std::string("(from ") + kVariable + ")");
  }
  const std::string text = dir.Join("libtext.so");
  WriteFileAtomically(text, "not a shared library\n");
  EXPECT_ERROR_CONTAINS(LoadOnnxRuntime(text), text, "cannot load");
  // slimtorch's own library loads but has no OrtGetApiBase.
  const std::string ours = std::string(SLIMTORCH_BINARY_DIR) + "/libslimtorch.so";
  ASSERT_TRUE(PathExists(ours)) << ours;
  EXPECT_ERROR_CONTAINS(LoadOnnxRuntime(ours), ours,
                        "is not onnxruntime's library", "OrtGetApiBase");
}

// A float scalar or uint8 scalar initializer.
void AddScalar(pb::GraphProto* g, const std::string& name, float f) {
  pb::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(pb::TensorProto::FLOAT);
  t->add_float_data(f);
}
void AddScalar(pb::GraphProto* g, const std::string& name, uint8_t u) {
  pb::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(pb::TensorProto::UINT8);
  t->add_int32_data(u);
}

void AddFloatValue(pb::ValueInfoProto* v, const std::string& name,
                   const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* tensor = v->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(pb::TensorProto::FLOAT);
  for (int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
}

// input [1, 2, 3, 1] → QuantizeLinear (scale 0.25, zero point 128, uint8)
// → DequantizeLinear → "Predictions"; `op` replaces QuantizeLinear.
void WriteQdqModel(const std::string& path,
                   const std::string& op = "QuantizeLinear") {
  pb::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  pb::GraphProto* g = m.mutable_graph();
  g->set_name("qdq");
  AddFloatValue(g->add_input(), "input", {1, 2, 3, 1});
  AddFloatValue(g->add_output(), "Predictions", {1, 2, 3, 1});
  AddScalar(g, "scale", 0.25f);
  AddScalar(g, "zero_point", uint8_t{128});
  pb::NodeProto* q = g->add_node();
  q->set_op_type(op);
  q->set_name("quant");
  for (const char* in : {"input", "scale", "zero_point"}) q->add_input(in);
  q->add_output("q");
  pb::NodeProto* dq = g->add_node();
  dq->set_op_type("DequantizeLinear");
  dq->set_name("dequant");
  for (const char* in : {"q", "scale", "zero_point"}) dq->add_input(in);
  dq->add_output("Predictions");
  WriteFileAtomically(path, m.SerializeAsString());
}

// ONNX's QuantizeLinear (x / scale rounded half to even, plus the zero
// point, saturated to [0, 255]) then DequantizeLinear, worked by hand:
// 0.125 / 0.25 = 0.5 → 0; 0.375 → 1.5 → 2 → 0.5; -0.625 → -2.5 → -2 →
// -0.5; 100 → 400 + 128 → 255 → 127 * 0.25; -100 → 0 → -128 * 0.25; 1 → 1.
TEST(OnnxRuntimeModelTest, QdqModelGivesTheInt8Grid) {
  TempDir dir;
  const std::string path = dir.Join("qdq.onnx");
  WriteQdqModel(path);
  EXPECT_TRUE(ReadOnnxSignature(path).quantized);
  SKIP_WITHOUT_ONNXRUNTIME_LIBRARY();
  OnnxRuntimeModel model(path, OnnxRuntimeOptions().intra_op_threads(1));
  const torch::Tensor x =
      torch::tensor({0.125f, 0.375f, -0.625f, 100.f, -100.f, 1.f})
          .reshape({1, 2, 3, 1});
  const torch::Tensor want =
      torch::tensor({0.f, 0.5f, -0.5f, 31.75f, -32.f, 1.f}).reshape({1, 2, 3, 1});
  const torch::Tensor got = model.Run(x, "input", "Predictions");
  EXPECT_TRUE(torch::equal(got, want)) << got;
  std::printf("[ onnxruntime ] %s (%s, C API %d)\n",
              model.info().version.c_str(), model.info().library.c_str(),
              model.info().api_version);
}

// onnxruntime's refusals name the model: an unknown operator when the
// session is made, an unknown input when it runs.
TEST(OnnxRuntimeModelTest, OnnxRuntimeErrorsNameTheModel) {
  SKIP_WITHOUT_ONNXRUNTIME_LIBRARY();
  TempDir dir;
  const std::string bad = dir.Join("unknown_op.onnx");
  WriteQdqModel(bad, "NoSuchOperator");
  EXPECT_ERROR_CONTAINS(OnnxRuntimeModel{bad}, "cannot read " + bad,
                        "NoSuchOperator");
  const std::string good = dir.Join("qdq.onnx");
  WriteQdqModel(good);
  OnnxRuntimeModel model(good);
  EXPECT_ERROR_CONTAINS(
      model.Run(torch::zeros({1, 2, 3, 1}), "image", "Predictions"),
      "could not run " + good, "image");
}

class OnnxRuntimeFloatTest : public ::testing::TestWithParam<std::string> {};

// An exported float net in onnxruntime: LibTorch's probabilities and, built
// with OpenCV, OpenCV's DNN module's, within 1e-5; no QDQ nodes.
TEST_P(OnnxRuntimeFloatTest, GivesLibTorchsAndOpenCvsProbabilities) {
  torch::manual_seed(7);
  auto net = testing_export::ZooExportNet(GetParam());
  testing_export::ScrambleStatistics(*net, 7);
  net->module().eval();
  const int64_t s = testing_export::ZooExportSize(GetParam(), *net);
  TempDir dir;
  const std::string path = dir.Join("model.onnx");
  WriteOnnxModel(path, RecordInferenceGraph(*net, s, 0));
  EXPECT_FALSE(ReadOnnxSignature(path).quantized);
  SKIP_WITHOUT_ONNXRUNTIME_LIBRARY();
  const torch::Tensor images =
      torch::rand(testing::ZooInputShape(*net, 1, s)) * 2 - 1;
  torch::Tensor want;
  {
    torch::NoGradGuard no_grad;
    want = torch::softmax(net->Forward(images).logits, -1);
  }
  const torch::Tensor nhwc = images.permute({0, 2, 3, 1}).contiguous();
  const std::string output = testing_export::OutputName(*net, "Predictions");
  OnnxRuntimeModel model(path, OnnxRuntimeOptions().intra_op_threads(2));
  const torch::Tensor got = model.Run(nhwc, "input", output);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-5);
#ifdef SLIMTORCH_WITH_OPENCV
  const torch::Tensor cv = OpenCvModel(path).Run(nhwc, "input", output);
  EXPECT_LE((got - cv).abs().max().item<double>(), 1e-5);
#endif
}

INSTANTIATE_TEST_SUITE_P(Nets, OnnxRuntimeFloatTest,
                         ::testing::Values("lenet", "cifarnet"));

}  // namespace
}  // namespace slimtorch
