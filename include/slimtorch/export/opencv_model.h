#pragma once
// An exported ONNX model run by OpenCV's DNN module (label_image's engine).
// Part of the optional library slimtorch_opencv, built when OpenCV's core
// and dnn modules are found (SLIMTORCH_WITH_OPENCV); OpenCV's headers stay
// out of this one.

#include <torch/torch.h>

#include <memory>
#include <string>

namespace slimtorch {

class OpenCvModel {
 public:
  // Reads the model; throws naming the file with OpenCV's reason when its
  // importer refuses it.
  explicit OpenCvModel(const std::string& onnx_path);
  ~OpenCvModel();
  OpenCvModel(const OpenCvModel&) = delete;
  OpenCvModel& operator=(const OpenCvModel&) = delete;

  // Feeds float `input` (any shape the model takes, e.g. NHWC) as
  // `input_name` and returns the output `output_name` as a float tensor.
  torch::Tensor Run(const torch::Tensor& input, const std::string& input_name,
                    const std::string& output_name);

  // The OpenCV version built against ("4.6.0").
  static std::string Version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

}  // namespace slimtorch
