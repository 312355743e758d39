#pragma once
// label_image (TensorFlow's examples/label_image, for slimtorch's exported
// models): images → the model's input → top-k classes with their names.
// Runs an exported ONNX model through OpenCV's DNN module
// (opencv_model.h, when built with OpenCV); decoding is slimtorch's
// TF-exact codec, preprocessing either TensorFlow label_image's
// (bilinear resize, (x - mean) / std) or a net's eval preprocessing.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace slimtorch {

// The input and outputs of an ONNX model, read from the file.
struct OnnxSignature {
  std::string input;                // the first graph input's name
  std::vector<int64_t> input_dims;  // -1 for a symbolic dimension
  std::vector<std::string> outputs;
  // Whether the graph has QuantizeLinear / DequantizeLinear nodes: an int8
  // model in QDQ form, which OpenCV 4.6's DNN module cannot import.
  bool quantized = false;
};
// Throws naming the file when it is not an ONNX model.
OnnxSignature ReadOnnxSignature(const std::string& path);

// The image files `spec` names: one file, several separated by commas, or a
// folder (its files with an image extension, sorted; not recursive).
// Throws naming what is missing or empty.
std::vector<std::string> ListImageFiles(const std::string& spec);

// Class names by index from a labels file: TF-Slim's labels.txt ("3:roses"
// lines) or TensorFlow label_image's (one name per line, the line number
// is the index). Throws naming the file and line on a malformed file.
std::vector<std::string> ReadClassNames(const std::string& path);

struct ImageInputOptions {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 3;
  // Empty: TensorFlow label_image's preprocessing, resize_bilinear to
  // height x width then (x - input_mean) / input_std. Otherwise the eval
  // preprocessing of that name (a net's or preprocessing's name), as
  // eval_image_classifier runs it.
  std::string preprocessing_name;
  double input_mean = 0;
  double input_std = 255;
  bool use_grayscale = false;
};

// One image decoded (PNG, JPEG, BMP, GIF) and preprocessed: float
// [1, height, width, channels] (NHWC, as the exported model takes it).
torch::Tensor LoadModelInput(const std::string& path,
                             const ImageInputOptions& options);

// The k largest scores of `scores` [classes] as (index, score), best first.
std::vector<std::pair<int64_t, float>> TopK(const torch::Tensor& scores,
                                            int64_t k);

}  // namespace slimtorch
