// TF-Slim's lenet_preprocessing (training == evaluation):
//   to_float → [rgb_to_grayscale] → resize_image_with_crop_or_pad →
//   (x - 128) / 128, range [-1, 0.992].
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {
namespace {

PreprocessingFn LenetPreprocessing(const PreprocessingOptions& options) {
  return [options](const torch::Tensor& image, std::mt19937_64&) {
    torch::Tensor x = image.to(torch::kFloat32);
    if (options.use_grayscale) x = image_ops::RgbToGrayscale(x);
    x = image_ops::ResizeWithCropOrPad(x, options.output_height,
                                       options.output_width);
    return x.sub(128.0f).div_(128.0f).permute({2, 0, 1}).contiguous();
  };
}

SLIM_REGISTER_PREPROCESSING("lenet", LenetPreprocessing);

}  // namespace
}  // namespace slimtorch
