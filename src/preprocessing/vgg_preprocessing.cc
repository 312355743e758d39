#include "slimtorch/preprocessing/vgg_preprocessing.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "preprocessing_util.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using preprocessing_util::CheckGrayOrRgbBatch;
using preprocessing_util::ToNchw;

// The crop must fit in the smallest resize; TF-Slim would fail at run time.
void CheckVggOutputSize(const PreprocessingOptions& o) {
  SLIM_CHECK(o.output_height <= kVggResizeSideMin &&
                 o.output_width <= kVggResizeSideMin,
             "vgg preprocessing: output size ", o.output_height, "x",
             o.output_width, " (--train_image_size / --eval_image_size) is ",
             "larger than ", kVggResizeSideMin, ", the smaller side images ",
             "are resized to (", kVggResizeSideMin, "..", kVggResizeSideMax,
             " in training, ", kVggResizeSideMin, " in evaluation); use an ",
             "image size of at most ", kVggResizeSideMin);
}

// The out_h x out_w window at (y, x) of an image resized to (rh, rw).
image_ops::CropBox CropWindow(int64_t rh, int64_t rw, int64_t y, int64_t x,
                              const PreprocessingOptions& o) {
  SLIM_CHECK(
      y >= 0 && x >= 0 && y + o.output_height <= rh && x + o.output_width <= rw,
      "vgg preprocessing: crop ", o.output_height, "x", o.output_width, " at (",
      y, ", ", x, ") does not fit in the image resized to ", rh, "x", rw);
  image_ops::CropBox box;
  box.y = y;
  box.x = x;
  box.height = o.output_height;
  box.width = o.output_width;
  return box;
}

// [rgb_to_grayscale] → subtract the channel means → contiguous NCHW.
//   images: float [N, h, w, C], C = 1 or 3.
torch::Tensor GrayscaleAndSubtractMeans(torch::Tensor images,
                                        const PreprocessingOptions& o) {
  if (o.use_grayscale) images = image_ops::RgbToGrayscale(images);
  if (images.size(3) == 1) return ToNchw(images.sub(kVggGrayMean));
  torch::Tensor means =
      torch::tensor({kVggRgbMeans[0], kVggRgbMeans[1], kVggRgbMeans[2]})
          .to(images.device());
  return ToNchw(images.sub(means));
}

preprocessing_util::DistortionPreprocessing<VggDistortion> Vgg() {
  preprocessing_util::DistortionPreprocessing<VggDistortion> p;
  p.what = "vgg preprocessing";
  p.check = CheckVggOutputSize;
  p.draw = [](std::mt19937_64& rng, int64_t h, int64_t w,
              const PreprocessingOptions& o) {
    return DrawVggDistortion(rng, h, w, o.output_height, o.output_width);
  };
  p.train = ApplyVggDistortion;
  p.eval = ApplyVggEval;
  // --auto_augment: on the resized, cropped and flipped values (0..255).
  p.crop = CropVggDistortion;
  p.finish = FinishVggDistortion;
  p.pixel_scale = 1.0;
  return p;
}

SLIM_STATIC_REGISTRATION([] {
  // The nets that take it register their names as its other names
  // (NetFacts::preprocessing).
  preprocessing_util::RegisterDistortionPreprocessing(Vgg(), {"vgg"});
});

}  // namespace

std::pair<int64_t, int64_t> VggResizedSize(int64_t height, int64_t width,
                                           int64_t smallest_side) {
  SLIM_CHECK(height > 0 && width > 0 && smallest_side > 0,
             "aspect-preserving resize of a ", height, "x", width,
             " image to smaller side ", smallest_side,
             ": sizes must be positive");
  const float h = static_cast<float>(height);
  const float w = static_cast<float>(width);
  const float side = static_cast<float>(smallest_side);
  const float scale = h > w ? side / w : side / h;
  return {static_cast<int64_t>(std::rint(h * scale)),
          static_cast<int64_t>(std::rint(w * scale))};
}

torch::Tensor AspectPreservingResize(const torch::Tensor& images,
                                     int64_t smallest_side) {
  SLIM_CHECK(images.dim() == 3 || images.dim() == 4, "AspectPreservingResize",
             " expects [H, W, C] or [N, H, W, C], got ", images.sizes());
  auto size = VggResizedSize(images.size(-3), images.size(-2), smallest_side);
  return image_ops::ResizeBilinearLegacy(images, size.first, size.second);
}

VggDistortion DrawVggDistortion(std::mt19937_64& rng, int64_t height,
                                int64_t width, int64_t out_h, int64_t out_w) {
  using preprocessing_util::UniformInclusive;
  VggDistortion d;
  d.resize_side =
      kVggResizeSideMin +
      UniformInclusive(rng(), kVggResizeSideMax - kVggResizeSideMin);
  auto size = VggResizedSize(height, width, d.resize_side);
  SLIM_CHECK(size.first >= out_h && size.second >= out_w,
             "vgg preprocessing: a ", height, "x", width, " image resized to ",
             size.first, "x", size.second, " (smaller side ", d.resize_side,
             ") is smaller than the ", out_h, "x", out_w, " crop");
  d.crop_y = UniformInclusive(rng(), size.first - out_h);
  d.crop_x = UniformInclusive(rng(), size.second - out_w);
  d.flip = preprocessing_util::Coin(rng());
  return d;
}

torch::Tensor ApplyVggDistortion(const torch::Tensor& images,
                                 const std::vector<VggDistortion>& distortions,
                                 const PreprocessingOptions& options) {
  return FinishVggDistortion(CropVggDistortion(images, distortions, options),
                             distortions, options);
}

torch::Tensor CropVggDistortion(const torch::Tensor& images,
                                const std::vector<VggDistortion>& distortions,
                                const PreprocessingOptions& options) {
  CheckGrayOrRgbBatch(images, "ApplyVggDistortion");
  const int64_t n = images.size(0);
  SLIM_CHECK(static_cast<int64_t>(distortions.size()) == n,
             "ApplyVggDistortion: ", distortions.size(), " distortions for ", n,
             " images");
  // Resize and crop image by image (the resize sides differ).
  std::vector<torch::Tensor> crops;
  crops.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const VggDistortion& d = distortions[i];
    auto size = VggResizedSize(images.size(1), images.size(2), d.resize_side);
    torch::Tensor x = image_ops::ResizeBilinearLegacyWindow(
        images[i], size.first, size.second,
        CropWindow(size.first, size.second, d.crop_y, d.crop_x, options));
    crops.push_back(d.flip ? x.flip({1}) : x);
  }
  return torch::stack(crops).permute({0, 3, 1, 2});
}

torch::Tensor FinishVggDistortion(const torch::Tensor& cropped,
                                  const std::vector<VggDistortion>&,
                                  const PreprocessingOptions& options) {
  return GrayscaleAndSubtractMeans(cropped.permute({0, 2, 3, 1}), options);
}

torch::Tensor ApplyVggEval(const torch::Tensor& images,
                           const PreprocessingOptions& options) {
  CheckGrayOrRgbBatch(images, "ApplyVggEval");
  auto size = VggResizedSize(images.size(1), images.size(2), kVggResizeSideMin);
  const image_ops::CropBox window = CropWindow(
      size.first, size.second, (size.first - options.output_height) / 2,
      (size.second - options.output_width) / 2, options);
  return GrayscaleAndSubtractMeans(image_ops::ResizeBilinearLegacyWindow(
                                       images, size.first, size.second, window),
                                   options);
}

}  // namespace slimtorch
