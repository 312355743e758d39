#pragma once
// The independent engines of the export tests, run from C++: onnxruntime
// (scripts/golden/check_onnx.py: onnx.checker's full check, then a CPU
// session) and TensorFlow (scripts/golden/check_graphdef.py:
// tf.compat.v1.import_graph_def, then a session), both with /opt/tfenv's
// python; tests skip cleanly where it lacks them. Also the weight scrambling
// the zoo tests share.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "nets/zoo_input.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace testing_export {

using testing::TempDir;

inline constexpr char kPython[] = "/opt/tfenv/bin/python";

// Whether kPython imports `modules` ("onnx, onnxruntime"); asked once each.
inline bool HavePythonModules(const std::string& modules) {
  static std::map<std::string, bool> known;
  auto it = known.find(modules);
  if (it == known.end()) {
    const bool have =
        PathExists(kPython) && std::system(StrCat(kPython, " -c 'import ",
                                                  modules, "' >/dev/null 2>&1")
                                               .c_str()) == 0;
    it = known.emplace(modules, have).first;
  }
  return it->second;
}

inline bool HaveOnnxRuntime() { return HavePythonModules("onnx, onnxruntime"); }
inline bool HaveTensorFlow() { return HavePythonModules("tensorflow"); }

#define SKIP_WITHOUT_ONNXRUNTIME()                     \
  if (!::slimtorch::testing_export::HaveOnnxRuntime()) \
  GTEST_SKIP() << "no onnx + onnxruntime in "          \
               << ::slimtorch::testing_export::kPython \
               << " (the model's structure was checked)"

#define SKIP_WITHOUT_TENSORFLOW()                                             \
  if (!::slimtorch::testing_export::HaveTensorFlow())                         \
  GTEST_SKIP() << "no tensorflow in " << ::slimtorch::testing_export::kPython \
               << " (the GraphDef's structure was checked)"

// Runs scripts/golden/<script> MODEL INPUT.raw SHAPE OUT.txt <extra> on NCHW
// `images` (fed as NHWC float32 little-endian; NCDHW clips as NDHWC); fills `outputs` from the
// script's "<name> <d0xd1...> <values...>" lines.
inline void RunGoldenScript(const std::string& script, const std::string& model,
                            const torch::Tensor& images, const TempDir& dir,
                            const std::string& extra,
                            std::map<std::string, torch::Tensor>* outputs) {
  // (a video net's NCDHW clips are fed NDHWC)
  const torch::Tensor nhwc =
      (images.dim() == 5 ? images.permute({0, 2, 3, 4, 1})
                         : images.permute({0, 2, 3, 1}))
          .contiguous()
          .to(torch::kFloat);
  std::string raw(static_cast<size_t>(nhwc.numel()) * 4, '\0');
  for (int64_t i = 0; i < nhwc.numel(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, nhwc.data_ptr<float>() + i, 4);
    for (int b = 0; b < 4; ++b) raw[4 * i + b] = char((bits >> (8 * b)) & 255);
  }
  WriteFileAtomically(dir.Join("input.raw"), raw);
  std::string shape;
  for (int64_t d : nhwc.sizes()) {
    shape += (shape.empty() ? "" : "x") + std::to_string(d);
  }
  const std::string cmd =
      StrCat(kPython, " ", SLIMTORCH_TEST_DATA_DIR, "/../scripts/golden/",
             script, " ", model, " ", dir.Join("input.raw"), " ", shape, " ",
             dir.Join("out.txt"), extra, " 2>", dir.Join("err.txt"));
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << ReadFileToString(dir.Join("err.txt"));
  std::istringstream lines(ReadFileToString(dir.Join("out.txt")));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name, dims;
    fields >> name >> dims;
    std::vector<int64_t> sizes;
    std::istringstream ds(dims);
    for (std::string d; std::getline(ds, d, 'x');) {
      sizes.push_back(std::stoll(d));
    }
    std::vector<float> values;
    for (float v; fields >> v;) values.push_back(v);
    (*outputs)[name] = torch::tensor(values).reshape(sizes);
  }
}

// The ONNX model in onnxruntime, after onnx.checker's full check.
inline void RunOnnxRuntime(const std::string& model,
                           const torch::Tensor& images, const TempDir& dir,
                           std::map<std::string, torch::Tensor>* outputs) {
  RunGoldenScript("check_onnx.py", model, images, dir, "", outputs);
}

// The frozen GraphDef (binary, or text with `text`) in TensorFlow.
inline void RunTensorFlow(const std::string& path, const torch::Tensor& images,
                          const TempDir& dir,
                          std::map<std::string, torch::Tensor>* outputs,
                          bool text = false) {
  RunGoldenScript("check_graphdef.py", path, images, dir, text ? " --text" : "",
                  outputs);
}

// Random batch-norm statistics, scales and biases (weights are already
// random), so that every layer of an exported net matters.
inline void ScrambleStatistics(Net& net, uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (NamedTensor& v : net.ModelVariables()) {
    if (EndsWith(v.name, "moving_variance") || EndsWith(v.name, "gamma")) {
      v.tensor.uniform_(0.5, 1.5);
    } else if (EndsWith(v.name, "moving_mean") || EndsWith(v.name, "beta") ||
               EndsWith(v.name, "biases")) {
      v.tensor.uniform_(-0.2, 0.2);
    }
  }
}

// The export of `net`'s output `name` ("Logits", "Predictions",
// "Predictions/Reshape_1"): under the net's scope, at the top for the nets
// without one (NASNet, PNASNet).
inline std::string OutputName(const Net& net, const std::string& name) {
  return net.scope().empty() ? name : net.scope() + "/" + name;
}

// The image size the zoo's export tests run net `name` at: the zoo tests'
// (tests/nets/zoo_input.h: the default, small clips for the video nets),
// but 96 for the heavy NASNet-A / PNASNet-5 Large (every cell and
// reduction path still runs; their 88M parameters at 331 would take most
// of a CI minute).
inline int64_t ZooExportSize(const std::string& name, const Net& net) {
  if (name == "nasnet_large" || name == "pnasnet_large") return 96;
  return testing::ZooTestSize(net);
}

// The net `name` as the zoo's export tests build it (11 classes, the video
// nets' test frames, at ZooExportSize).
inline std::shared_ptr<Net> ZooExportNet(const std::string& name) {
  const NetOptions options =
      testing::ZooTestOptions(NetOptions().num_classes(11));
  auto probe = CreateNet(name, options);
  const int64_t size = ZooExportSize(name, *probe);
  if (size == probe->default_image_size() || probe->num_frames() > 0) {
    return probe;
  }
  return CreateNet(name, NetOptions(options).image_size(size));
}

}  // namespace testing_export
}  // namespace slimtorch
