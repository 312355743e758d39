#pragma once
// Running an exported ONNX model in onnxruntime from a test: through
// scripts/golden/check_onnx.py (onnx.checker with full_check, then an
// onnxruntime CPU session) with /opt/tfenv's python, where it has onnx and
// onnxruntime; tests skip cleanly where it has not.

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
#include "test_util.h"

namespace slimtorch {
namespace testing_onnx {

using testing::TempDir;

inline constexpr char kPython[] = "/opt/tfenv/bin/python";

inline bool HaveOnnxRuntime() {
  static const bool have =
      PathExists(kPython) &&
      std::system(
          StrCat(kPython, " -c 'import onnx, onnxruntime' >/dev/null ", "2>&1")
              .c_str()) == 0;
  return have;
}

#define SKIP_WITHOUT_ONNXRUNTIME()                   \
  if (!::slimtorch::testing_onnx::HaveOnnxRuntime()) \
  GTEST_SKIP() << "no onnx + onnxruntime in "        \
               << ::slimtorch::testing_onnx::kPython \
               << " (the model's structure was checked)"

// Runs the model through scripts/golden/check_onnx.py on NCHW `images` (fed
// as NHWC); fills `outputs` by output name.
inline void RunOnnxRuntime(const std::string& model,
                           const torch::Tensor& images, const TempDir& dir,
                           std::map<std::string, torch::Tensor>* outputs) {
  const torch::Tensor nhwc = images.permute({0, 2, 3, 1}).contiguous();
  std::string raw(static_cast<size_t>(nhwc.numel()) * 4, '\0');
  for (int64_t i = 0; i < nhwc.numel(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, nhwc.data_ptr<float>() + i, 4);
    for (int b = 0; b < 4; ++b) raw[4 * i + b] = char((bits >> (8 * b)) & 255);
  }
  WriteFileAtomically(dir.Join("input.raw"), raw);
  std::string shape;
  for (int64_t d : nhwc.sizes())
    shape += (shape.empty() ? "" : "x") + std::to_string(d);
  const std::string cmd = StrCat(
      kPython, " ", SLIMTORCH_TEST_DATA_DIR,
      "/../scripts/golden/check_onnx.py ", model, " ", dir.Join("input.raw"),
      " ", shape, " ", dir.Join("out.txt"), " 2>", dir.Join("err.txt"));
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
    for (std::string d; std::getline(ds, d, 'x');)
      sizes.push_back(std::stoll(d));
    std::vector<float> values;
    for (float v; fields >> v;) values.push_back(v);
    (*outputs)[name] = torch::tensor(values).reshape(sizes);
  }
}

}  // namespace testing_onnx
}  // namespace slimtorch
