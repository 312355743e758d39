#include "slimtorch/preprocessing/inception_preprocessing.h"

#include <string>

#include "preprocessing_util.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using preprocessing_util::CheckGrayOrRgbBatch;
using preprocessing_util::ToNchw;

// tf.image.convert_image_dtype(float32): uint8 x → x * float(1/255); float
// images are taken as already in [0, 1].
torch::Tensor ToUnitFloat(const torch::Tensor& images) {
  if (images.scalar_type() != torch::kUInt8) {
    return images.to(torch::kFloat32);
  }
  return images.to(torch::kFloat32).mul_(static_cast<float>(1.0 / 255.0));
}

// (x - 0.5) * 2 → contiguous NCHW.
torch::Tensor ToSignedNchw(const torch::Tensor& images) {
  return ToNchw(images.sub(0.5f).mul_(2.0f));
}

preprocessing_util::DistortionPreprocessing<InceptionDistortion> Inception() {
  preprocessing_util::DistortionPreprocessing<InceptionDistortion> p;
  p.what = "inception preprocessing";
  p.draw = [](std::mt19937_64& rng, int64_t h, int64_t w,
              const PreprocessingOptions&) {
    return DrawInceptionDistortion(rng, h, w);
  };
  p.train = ApplyInceptionDistortion;
  p.eval = ApplyInceptionEval;
  // --auto_augment: on the resized, flipped image in [0, 1].
  p.crop = CropInceptionDistortion;
  p.finish = FinishInceptionDistortion;
  p.pixel_scale = 1.0 / 255.0;
  return p;
}

SLIM_STATIC_REGISTRATION([] {
  // The nets that take it register their names as its other names
  // (NetFacts::preprocessing).
  preprocessing_util::RegisterDistortionPreprocessing(Inception(),
                                                      {"inception"});
});

}  // namespace

InceptionDistortion DrawInceptionDistortion(std::mt19937_64& rng,
                                            int64_t height, int64_t width) {
  return DrawInceptionDistortion(rng, height, width, {});
}

InceptionDistortion DrawInceptionDistortion(
    std::mt19937_64& rng, int64_t height, int64_t width,
    const std::vector<std::array<float, 4>>& boxes) {
  using preprocessing_util::UniformFloat;
  InceptionDistortion d;
  image_ops::DistortedBoxOptions box_options;
  box_options.boxes = boxes;
  d.crop = image_ops::SampleDistortedBoundingBox(height, width, box_options,
                                                 rng);
  d.flip = preprocessing_util::Coin(rng());
  d.brightness_delta = UniformFloat(rng(), -kInceptionMaxBrightnessDelta,
                                    kInceptionMaxBrightnessDelta);
  d.saturation_factor =
      UniformFloat(rng(), kInceptionSaturationLower, kInceptionSaturationUpper);
  return d;
}

torch::Tensor ApplyInceptionDistortion(
    const torch::Tensor& images,
    const std::vector<InceptionDistortion>& distortions,
    const PreprocessingOptions& options) {
  return FinishInceptionDistortion(
      CropInceptionDistortion(images, distortions, options), distortions,
      options);
}

torch::Tensor CropInceptionDistortion(
    const torch::Tensor& images,
    const std::vector<InceptionDistortion>& distortions,
    const PreprocessingOptions& options) {
  CheckGrayOrRgbBatch(images, "ApplyInceptionDistortion");
  const int64_t n = images.size(0);
  SLIM_CHECK(static_cast<int64_t>(distortions.size()) == n,
             "ApplyInceptionDistortion: ", distortions.size(),
             " distortions for ", n, " images");
  // Crop, resize and flip image by image (the windows differ).
  std::vector<torch::Tensor> resized;
  resized.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const InceptionDistortion& d = distortions[i];
    const image_ops::CropBox& c = d.crop;
    SLIM_CHECK(
        c.y >= 0 && c.x >= 0 && c.height > 0 && c.width > 0 &&
            c.y + c.height <= images.size(1) && c.x + c.width <= images.size(2),
        "crop window ", c.height, "x", c.width, " at (", c.y, ", ", c.x,
        ") outside the ", images.size(1), "x", images.size(2), " image ", i);
    torch::Tensor crop =
        images[i].narrow(0, c.y, c.height).narrow(1, c.x, c.width);
    torch::Tensor x = image_ops::ResizeBilinearLegacy(
        ToUnitFloat(crop), options.output_height, options.output_width);
    resized.push_back(d.flip ? x.flip({1}) : x);
  }
  return torch::stack(resized).permute({0, 3, 1, 2});
}

torch::Tensor FinishInceptionDistortion(
    const torch::Tensor& cropped,
    const std::vector<InceptionDistortion>& distortions,
    const PreprocessingOptions& options) {
  const auto n = static_cast<int64_t>(distortions.size());
  torch::Tensor values = torch::empty({2, n}, torch::kFloat32);
  float* delta = values.data_ptr<float>();
  float* factor = delta + n;
  for (int64_t i = 0; i < n; ++i) {
    delta[i] = distortions[i].brightness_delta;
    factor[i] = distortions[i].saturation_factor;
  }
  values = values.to(cropped.device());
  torch::Tensor x = cropped.permute({0, 2, 3, 1});  // NHWC, as stacked
  x = image_ops::AdjustBrightness_(x, values[0].view({n, 1, 1, 1}));
  if (x.size(3) == 3) {
    x = image_ops::AdjustSaturation(x, values[1].view({n, 1, 1, 1}));
  }
  x.clamp_(0.0f, 1.0f);
  if (options.use_grayscale) x = image_ops::RgbToGrayscale(x);
  return ToSignedNchw(x);
}

torch::Tensor ApplyInceptionEval(const torch::Tensor& images,
                                 const PreprocessingOptions& options) {
  CheckGrayOrRgbBatch(images, "ApplyInceptionEval");
  // Grayscale is per pixel, so converting only the central crop equals
  // TF's convert → grayscale → crop order.
  torch::Tensor x =
      ToUnitFloat(image_ops::CentralCrop(images, kInceptionCentralFraction));
  if (options.use_grayscale) x = image_ops::RgbToGrayscale(x);
  x = image_ops::ResizeBilinearLegacy(x, options.output_height,
                                      options.output_width);
  return ToSignedNchw(x);
}

}  // namespace slimtorch
