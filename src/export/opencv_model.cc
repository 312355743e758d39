#include "slimtorch/export/opencv_model.h"

#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {

struct OpenCvModel::Impl {
  cv::dnn::Net net;
};

OpenCvModel::OpenCvModel(const std::string& onnx_path)
    : impl_(std::make_unique<Impl>()), path_(onnx_path) {
  try {
    impl_->net = cv::dnn::readNetFromONNX(onnx_path);
  } catch (const cv::Exception& e) {
    SLIM_FAIL("OpenCV ", CV_VERSION, " cannot read ", onnx_path, ": ",
              e.what());
  }
  SLIM_CHECK(!impl_->net.empty(), "OpenCV read an empty net from ", onnx_path);
  impl_->net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  impl_->net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
}

OpenCvModel::~OpenCvModel() = default;

std::string OpenCvModel::Version() { return CV_VERSION; }

torch::Tensor OpenCvModel::Run(const torch::Tensor& input,
                               const std::string& input_name,
                               const std::string& output_name) {
  const torch::Tensor x = input.to(torch::kFloat).contiguous();
  std::vector<int> dims(x.sizes().begin(), x.sizes().end());
  // cv::Mat over the tensor's memory (OpenCV copies it into the net).
  const cv::Mat blob(static_cast<int>(dims.size()), dims.data(), CV_32F,
                     x.data_ptr<float>());
  cv::Mat out;
  try {
    impl_->net.setInput(blob, input_name);
    out = impl_->net.forward(output_name);
  } catch (const cv::Exception& e) {
    SLIM_FAIL("OpenCV ", CV_VERSION, " could not run ", path_, " on input ",
              x.sizes(), ": ", e.what());
  }
  SLIM_CHECK(out.type() == CV_32F && out.isContinuous(), path_,
             ": OpenCV returned a non-float output for ", output_name);
  std::vector<int64_t> shape(out.size.p, out.size.p + out.dims);
  return torch::from_blob(out.ptr<float>(), shape, torch::kFloat).clone();
}

}  // namespace slimtorch
