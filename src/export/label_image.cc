#include "slimtorch/export/label_image.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <random>
#include <sstream>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/strings.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/proto/onnx.pb.h"
#include "slimtorch/preprocessing/image_ops.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {
namespace {

bool IsImageName(const std::string& name) {
  const std::string n = Lower(name);
  for (const char* ext : {".jpg", ".jpeg", ".png", ".bmp", ".gif"}) {
    if (EndsWith(n, ext)) return true;
  }
  return false;
}

}  // namespace

OnnxSignature ReadOnnxSignature(const std::string& path) {
  onnx::ModelProto model;
  SLIM_CHECK(model.ParseFromString(ReadFileToString(path)) &&
                 model.has_graph() && model.graph().input_size() > 0 &&
                 model.graph().output_size() > 0,
             path,
             " is not an ONNX model (expected a ModelProto with a "
             "graph, inputs and outputs)");
  OnnxSignature s;
  const onnx::ValueInfoProto& in = model.graph().input(0);
  s.input = in.name();
  for (const auto& d : in.type().tensor_type().shape().dim()) {
    s.input_dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
  for (const auto& out : model.graph().output())
    s.outputs.push_back(out.name());
  for (const auto& node : model.graph().node()) {
    if (node.op_type() == "QuantizeLinear" ||
        node.op_type() == "DequantizeLinear") {
      s.quantized = true;
    }
  }
  return s;
}

std::vector<std::string> ListImageFiles(const std::string& spec) {
  SLIM_CHECK(!spec.empty(),
             "--image is empty (expected an image file, "
             "several separated by commas, or a folder)");
  std::vector<std::string> files;
  std::stringstream parts(spec);
  for (std::string part; std::getline(parts, part, ',');) {
    part = Trim(part);
    if (part.empty()) continue;
    std::error_code ec;
    if (std::filesystem::is_directory(part, ec)) {
      std::vector<std::string> found;
      for (const auto& e : std::filesystem::directory_iterator(part, ec)) {
        if (e.is_regular_file() && IsImageName(e.path().filename().string())) {
          found.push_back(e.path().string());
        }
      }
      SLIM_CHECK(!found.empty(), "--image folder ", part,
                 " holds no .jpg, .jpeg, .png, .bmp or .gif file");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      SLIM_CHECK(PathExists(part), "--image: no such file or folder: ", part);
      files.push_back(part);
    }
  }
  SLIM_CHECK(!files.empty(), "--image=", spec, " names no image");
  return files;
}

std::vector<std::string> ReadClassNames(const std::string& path) {
  std::istringstream lines(ReadFileToString(path));
  std::vector<std::string> plain;
  std::vector<std::pair<int64_t, std::string>> numbered;
  int line_no = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    plain.push_back(line);
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    const std::string id = line.substr(0, colon);
    if (!std::all_of(id.begin(), id.end(),
                     [](char c) { return std::isdigit(c) != 0; })) {
      continue;
    }
    numbered.emplace_back(std::stoll(id), line.substr(colon + 1));
  }
  // TF-Slim's labels.txt: every non-empty line is "<id>:<name>".
  size_t non_empty = 0;
  for (const std::string& l : plain) non_empty += !Trim(l).empty();
  if (!numbered.empty() && numbered.size() == non_empty) {
    int64_t top = 0;
    for (const auto& n : numbered) top = std::max(top, n.first);
    std::vector<std::string> names(static_cast<size_t>(top + 1));
    for (const auto& n : numbered) names[n.first] = n.second;
    return names;
  }
  while (!plain.empty() && Trim(plain.back()).empty()) plain.pop_back();
  SLIM_CHECK(!plain.empty(), path, ": the labels file is empty");
  return plain;
}

torch::Tensor LoadModelInput(const std::string& path,
                             const ImageInputOptions& o) {
  SLIM_CHECK(o.height > 0 && o.width > 0, "the model input size is not known (",
             o.height, "x", o.width,
             "): give --input_height and --input_width");
  SLIM_CHECK(o.channels == 1 || o.channels == 3, "the model takes ", o.channels,
             "-channel images; label_image reads 1 or 3");
  const bool gray_model = o.channels == 1;
  const Image decoded = DecodeImage(
      ReadFileToString(path), gray_model && !o.use_grayscale ? 1 : 3, path);
  const torch::Tensor image =
      torch::from_blob(const_cast<uint8_t*>(decoded.pixels.data()),
                       {decoded.height, decoded.width, decoded.channels},
                       torch::kUInt8)
          .clone();
  torch::Tensor chw;
  if (o.preprocessing_name.empty()) {
    torch::Tensor x = image;
    if (o.use_grayscale) x = image_ops::RgbToGrayscale(x);
    const torch::Tensor resized = image_ops::ResizeBilinearLegacy(
        x.unsqueeze(0), o.height, o.width);  // [1, h, w, c] float
    return ((resized - o.input_mean) / o.input_std).contiguous();
  }
  PreprocessingOptions p;
  p.output_height = o.height;
  p.output_width = o.width;
  p.is_training = false;
  p.use_grayscale = o.use_grayscale;
  std::mt19937_64 rng(0);  // eval preprocessing draws nothing
  chw = GetPreprocessing(o.preprocessing_name, p)(image, rng);
  SLIM_CHECK(chw.size(0) == o.channels, path, ": the preprocessing gives ",
             chw.size(0), " channels, the model takes ", o.channels);
  return chw.permute({1, 2, 0}).unsqueeze(0).contiguous();
}

std::vector<std::pair<int64_t, float>> TopK(const torch::Tensor& scores,
                                            int64_t k) {
  const torch::Tensor flat = scores.reshape({-1}).to(torch::kFloat);
  k = std::min<int64_t>(k, flat.numel());
  const auto [values, indices] = flat.topk(k);
  std::vector<std::pair<int64_t, float>> out;
  for (int64_t i = 0; i < k; ++i) {
    out.emplace_back(indices[i].item<int64_t>(), values[i].item<float>());
  }
  return out;
}

}  // namespace slimtorch
