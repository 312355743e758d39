#include "slimtorch/preprocessing/cifarnet_preprocessing.h"

#include <cmath>
#include <utility>

#include "preprocessing_util.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

using preprocessing_util::CheckBatch;
using preprocessing_util::ToChannelsFirstFloat;
using preprocessing_util::UniformFloat;

// The crop window of an h x w image padded by `padding`: the largest valid
// offsets. Throws if the output is larger than the padded image.
std::pair<int64_t, int64_t> MaxCropOffsets(int64_t h, int64_t w,
                                           int64_t padding,
                                           const PreprocessingOptions& o) {
  const int64_t max_y = h + 2 * padding - o.output_height;
  const int64_t max_x = w + 2 * padding - o.output_width;
  SLIM_CHECK(max_y >= 0 && max_x >= 0, "random crop to ", o.output_height, "x",
             o.output_width, " needs an image of at least that size; got ", h,
             "x", w, " padded by ", padding);
  return {max_y, max_x};
}

preprocessing_util::DistortionPreprocessing<CifarDistortion> Cifar(
    int64_t padding) {
  preprocessing_util::DistortionPreprocessing<CifarDistortion> p;
  p.what = "cifarnet preprocessing";
  p.draw = [padding](std::mt19937_64& rng, int64_t h, int64_t w,
                     const PreprocessingOptions& o) {
    auto max = MaxCropOffsets(h, w, padding, o);
    return DrawCifarDistortion(rng, max.first, max.second);
  };
  p.train = [padding](const torch::Tensor& images,
                      const std::vector<CifarDistortion>& distortions,
                      const PreprocessingOptions& o) {
    return ApplyCifarDistortion(images, distortions, padding, o);
  };
  p.eval = ApplyCifarEval;
  return p;
}

SLIM_STATIC_REGISTRATION([] {
  preprocessing_util::RegisterDistortionPreprocessing(Cifar(kCifarnetPadding),
                                                      {"cifarnet"});
  preprocessing_util::RegisterDistortionPreprocessing(Cifar(0),
                                                      {"cifarnet_tutorial"});
});

}  // namespace

CifarDistortion DrawCifarDistortion(std::mt19937_64& rng, int64_t max_crop_y,
                                    int64_t max_crop_x) {
  SLIM_CHECK(max_crop_y >= 0 && max_crop_x >= 0,
             "crop offsets need a non-negative range, got max ", max_crop_y,
             ", ", max_crop_x);
  CifarDistortion d;
  d.crop_y = preprocessing_util::UniformInclusive(rng(), max_crop_y);
  d.crop_x = preprocessing_util::UniformInclusive(rng(), max_crop_x);
  d.flip = preprocessing_util::Coin(rng());
  d.brightness_delta =
      UniformFloat(rng(), -kCifarMaxBrightnessDelta, kCifarMaxBrightnessDelta);
  d.contrast_factor =
      UniformFloat(rng(), kCifarContrastLower, kCifarContrastUpper);
  return d;
}

torch::Tensor ApplyCifarDistortion(
    const torch::Tensor& images,
    const std::vector<CifarDistortion>& distortions, int64_t padding,
    const PreprocessingOptions& options) {
  CheckBatch(images, "ApplyCifarDistortion");
  const int64_t n = images.size(0);
  const int64_t c = images.size(3);
  const int64_t hp = images.size(1) + 2 * padding;
  const int64_t wp = images.size(2) + 2 * padding;
  const int64_t out_h = options.output_height;
  const int64_t out_w = options.output_width;
  SLIM_CHECK(static_cast<int64_t>(distortions.size()) == n,
             "ApplyCifarDistortion: ", distortions.size(), " distortions for ",
             n, " images");

  // Pad, crop and flip as one gather from the flat padded batch, straight
  // into NCHW order: out[i][ch][y][x] = padded[i][rows_i[y]][cols_i[x]][ch].
  // The per-image row and column offsets are built here on the CPU.
  torch::Tensor offsets = torch::empty({n * (out_h + out_w)}, torch::kInt64);
  torch::Tensor values = torch::empty({2, n}, torch::kFloat32);
  int64_t* rows = offsets.data_ptr<int64_t>();
  int64_t* cols = rows + n * out_h;
  float* delta = values.data_ptr<float>();
  float* factor = delta + n;
  for (int64_t i = 0; i < n; ++i) {
    const CifarDistortion& d = distortions[i];
    SLIM_CHECK(d.crop_y >= 0 && d.crop_x >= 0 && d.crop_y + out_h <= hp &&
                   d.crop_x + out_w <= wp,
               "crop window ", out_h, "x", out_w, " at (", d.crop_y, ", ",
               d.crop_x, ") outside the ", hp, "x", wp, " padded image ", i);
    for (int64_t y = 0; y < out_h; ++y) {
      rows[i * out_h + y] = (i * hp + d.crop_y + y) * wp * c;
    }
    for (int64_t x = 0; x < out_w; ++x) {
      cols[i * out_w + x] = (d.crop_x + (d.flip ? out_w - 1 - x : x)) * c;
    }
    delta[i] = d.brightness_delta;
    factor[i] = d.contrast_factor;
  }
  const torch::Device device = images.device();
  offsets = offsets.to(device);
  values = values.to(device);
  torch::Tensor index =
      offsets.narrow(0, 0, n * out_h).view({n, 1, out_h, 1}) +
      offsets.narrow(0, n * out_h, n * out_w).view({n, 1, 1, out_w}) +
      torch::arange(c, offsets.options()).view({1, c, 1, 1});
  torch::Tensor padded =
      padding > 0 ? torch::constant_pad_nd(
                        images, {0, 0, padding, padding, padding, padding})
                  : images.contiguous();
  torch::Tensor cropped = padded.reshape(-1)
                              .index_select(0, index.view(-1))
                              .view({n, c, out_h, out_w})
                              .to(torch::kFloat32);
  // NHWC view of NCHW memory; the elementwise ops keep that layout.
  torch::Tensor x = cropped.permute({0, 2, 3, 1});
  // rgb_to_grayscale is per pixel and maps 0 to 0, so applying it after the
  // pad and crop (as here, on fewer pixels) equals TF's order.
  if (options.use_grayscale) x = image_ops::RgbToGrayscale(x);
  x = image_ops::AdjustBrightness_(x, values[0].view({n, 1, 1, 1}));
  x = image_ops::AdjustContrast_(x, values[1].view({n, 1, 1, 1}));
  x = image_ops::PerImageStandardization_(x);
  return x.permute({0, 3, 1, 2}).contiguous();
}

torch::Tensor ApplyCifarEval(const torch::Tensor& images,
                             const PreprocessingOptions& options) {
  CheckBatch(images, "ApplyCifarEval");
  torch::Tensor x = ToChannelsFirstFloat(images);
  if (options.use_grayscale) x = image_ops::RgbToGrayscale(x);
  x = image_ops::ResizeWithCropOrPad(x, options.output_height,
                                     options.output_width);
  x = image_ops::PerImageStandardization_(x);
  return x.permute({0, 3, 1, 2}).contiguous();
}

}  // namespace slimtorch
