#include "slimtorch/preprocessing/cifarnet_preprocessing.h"

#include <cmath>
#include <utility>

#include "cifar_counter_kernel.h"
#include "preprocessing_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"

#ifdef SLIMTORCH_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#endif

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

// The training chain after the crop: `cropped` float [N, C, H, W] (dense
// NCHW, padded, cropped and flipped), brightness, contrast and
// standardization per image.
torch::Tensor FinishCifarDistortion(const torch::Tensor& cropped,
                                    const torch::Tensor& brightness_delta,
                                    const torch::Tensor& contrast_factor,
                                    const PreprocessingOptions& options) {
  const int64_t n = cropped.size(0);
  // NHWC view of NCHW memory; the elementwise ops keep that layout.
  torch::Tensor x = cropped.permute({0, 2, 3, 1});
  // rgb_to_grayscale is per pixel and maps 0 to 0, so applying it after the
  // pad and crop (as here, on fewer pixels) equals TF's order.
  if (options.use_grayscale) x = image_ops::RgbToGrayscale(x);
  x = image_ops::AdjustBrightness_(x, brightness_delta.view({n, 1, 1, 1}));
  x = image_ops::AdjustContrast_(x, contrast_factor.view({n, 1, 1, 1}));
  x = image_ops::PerImageStandardization_(x);
  return x.permute({0, 3, 1, 2}).contiguous();
}

// Pad, crop and flip: float [N, C, out_h, out_w] (dense NCHW) of the
// images' values.
torch::Tensor CifarCrop(const torch::Tensor& images,
                        const torch::Tensor& crop_y,
                        const torch::Tensor& crop_x, const torch::Tensor& flip,
                        int64_t padding, const PreprocessingOptions& options) {
  const int64_t n = images.size(0);
  const int64_t c = images.size(3);
  const int64_t hp = images.size(1) + 2 * padding;
  const int64_t wp = images.size(2) + 2 * padding;
  const int64_t out_h = options.output_height;
  const int64_t out_w = options.output_width;
  // Pad, crop and flip as one gather from the flat padded batch, straight
  // into NCHW order: out[i][ch][y][x] = padded[i][rows_i[y]][cols_i[x]][ch],
  //   rows_i[y] = (i * hp + crop_y_i + y) * wp * c
  //   cols_i[x] = (crop_x_i + (flip_i ? out_w - 1 - x : x)) * c
  const auto index_options = crop_y.options();
  torch::Tensor ys = torch::arange(out_h, index_options).view({1, out_h});
  torch::Tensor xs = torch::arange(out_w, index_options).view({1, out_w});
  torch::Tensor rows = (torch::arange(n, index_options).view({n, 1}) * hp +
                        crop_y.view({n, 1}) + ys) *
                       (wp * c);
  torch::Tensor mirrored =
      torch::where(flip.view({n, 1}).ne(0), (out_w - 1) - xs, xs);
  torch::Tensor cols = (crop_x.view({n, 1}) + mirrored) * c;
  torch::Tensor index = rows.view({n, 1, out_h, 1}) +
                        cols.view({n, 1, 1, out_w}) +
                        torch::arange(c, index_options).view({1, c, 1, 1});
  torch::Tensor padded =
      padding > 0 ? torch::constant_pad_nd(
                        images, {0, 0, padding, padding, padding, padding})
                  : images.contiguous();
  return padded.reshape(-1)
      .index_select(0, index.view(-1))
      .view({n, c, out_h, out_w})
      .to(torch::kFloat32);
}

// The distortions' parameters as tensors on `device`: crop_y, crop_x,
// flip (int64 [3, N]) and brightness delta, contrast factor (float [2, N]).
// Checks each crop window against the padded image.
std::pair<torch::Tensor, torch::Tensor> CifarParameters(
    const std::vector<CifarDistortion>& distortions, int64_t hp, int64_t wp,
    const PreprocessingOptions& options, torch::Device device) {
  const auto n = static_cast<int64_t>(distortions.size());
  const int64_t out_h = options.output_height;
  const int64_t out_w = options.output_width;
  torch::Tensor ints = torch::empty({3, n}, torch::kInt64);
  torch::Tensor values = torch::empty({2, n}, torch::kFloat32);
  int64_t* crop_y = ints.data_ptr<int64_t>();
  int64_t* crop_x = crop_y + n;
  int64_t* flip = crop_x + n;
  float* delta = values.data_ptr<float>();
  float* factor = delta + n;
  for (int64_t i = 0; i < n; ++i) {
    const CifarDistortion& d = distortions[i];
    SLIM_CHECK(d.crop_y >= 0 && d.crop_x >= 0 && d.crop_y + out_h <= hp &&
                   d.crop_x + out_w <= wp,
               "crop window ", out_h, "x", out_w, " at (", d.crop_y, ", ",
               d.crop_x, ") outside the ", hp, "x", wp, " padded image ", i);
    crop_y[i] = d.crop_y;
    crop_x[i] = d.crop_x;
    flip[i] = d.flip ? 1 : 0;
    delta[i] = d.brightness_delta;
    factor[i] = d.contrast_factor;
  }
  return {ints.to(device), values.to(device)};
}

// The counter draws and the crop of ApplyCifarDistortionCounter by one CUDA
// kernel (cifar_counter_kernel.h): float [N, C, out_h, out_w] with the
// brightness deltas and contrast factors [N]; nothing (undefined tensors)
// where it does not apply (not a GPU, not uint8 NHWC dense, no kernels in
// this build, or KernelSwitchOn(KernelSwitch::kFusedKernels) off).
struct CounterCrop {
  torch::Tensor cropped, delta, factor;
};

CounterCrop CounterCropCuda(const torch::Tensor& images,
                            const torch::Tensor& positions, uint64_t seed,
                            int64_t padding, std::pair<int64_t, int64_t> max,
                            const PreprocessingOptions& o) {
#ifdef SLIMTORCH_WITH_CUDA_KERNELS
  if (!KernelSwitchOn(KernelSwitch::kFusedKernels) || !images.is_cuda() ||
      images.scalar_type() != torch::kUInt8 || !images.is_contiguous() ||
      positions.device() != images.device() ||
      positions.scalar_type() != torch::kInt64 || !positions.is_contiguous()) {
    return {};
  }
  preprocessing_internal::CifarCounterCrop p;
  p.n = images.size(0);
  p.height = images.size(1);
  p.width = images.size(2);
  p.channels = images.size(3);
  p.padding = padding;
  p.out_h = o.output_height;
  p.out_w = o.output_width;
  p.max_y = max.first;
  p.max_x = max.second;
  preprocessing_internal::SetCifarCounterDraws(
      seed, -kCifarMaxBrightnessDelta, kCifarMaxBrightnessDelta,
      kCifarContrastLower, kCifarContrastUpper,
      std::nextafter(kCifarMaxBrightnessDelta, -kCifarMaxBrightnessDelta),
      std::nextafter(kCifarContrastUpper, kCifarContrastLower), &p);
  const auto floats = images.options().dtype(torch::kFloat32);
  CounterCrop out;
  out.cropped = torch::empty({p.n, p.channels, p.out_h, p.out_w}, floats);
  out.delta = torch::empty({p.n}, floats);
  out.factor = torch::empty({p.n}, floats);
  p.images = images.data_ptr<uint8_t>();
  p.positions = positions.data_ptr<int64_t>();
  p.out = out.cropped.data_ptr<float>();
  p.delta = out.delta.data_ptr<float>();
  p.factor = out.factor.data_ptr<float>();
  const char* error = preprocessing_internal::CifarCounterCropCuda(
      p, at::cuda::getCurrentCUDAStream(images.get_device()).stream());
  SLIM_CHECK(error == nullptr,
             "the CIFAR augmentation's draw-and-crop CUDA kernel: ", error);
  return out;
#else
  return {};
#endif
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
  // --auto_augment: on the padded, cropped and flipped values (0..255).
  p.crop = [padding](const torch::Tensor& images,
                     const std::vector<CifarDistortion>& distortions,
                     const PreprocessingOptions& o) {
    CheckBatch(images, "cifarnet preprocessing");
    const auto [ints, values] =
        CifarParameters(distortions, images.size(1) + 2 * padding,
                        images.size(2) + 2 * padding, o, images.device());
    return CifarCrop(images, ints[0], ints[1], ints[2], padding, o);
  };
  p.finish = [](torch::Tensor cropped,
                const std::vector<CifarDistortion>& distortions,
                const PreprocessingOptions& o) {
    const auto n = static_cast<int64_t>(distortions.size());
    torch::Tensor values = torch::empty({2, n}, torch::kFloat32);
    for (int64_t i = 0; i < n; ++i) {
      values[0][i] = distortions[i].brightness_delta;
      values[1][i] = distortions[i].contrast_factor;
    }
    values = values.to(cropped.device());
    return FinishCifarDistortion(cropped, values[0], values[1], o);
  };
  p.pixel_scale = 1.0;
  return p;
}

CounterBatchPreprocessingFactory CifarCounter(int64_t padding) {
  return
      [padding](const PreprocessingOptions& o) -> CounterBatchPreprocessingFn {
        return [padding, o](const torch::Tensor& images,
                            const torch::Tensor& positions, uint64_t seed) {
          return o.is_training ? ApplyCifarDistortionCounter(images, positions,
                                                             seed, padding, o)
                               : ApplyCifarEval(images, o);
        };
      };
}

SLIM_STATIC_REGISTRATION([] {
  preprocessing_util::RegisterDistortionPreprocessing(Cifar(kCifarnetPadding),
                                                      {"cifarnet"});
  preprocessing_util::RegisterDistortionPreprocessing(Cifar(0),
                                                      {"cifarnet_tutorial"});
  GetCounterBatchPreprocessingRegistry().Register(
      "cifarnet", CifarCounter(kCifarnetPadding));
  GetCounterBatchPreprocessingRegistry().Register("cifarnet_tutorial",
                                                  CifarCounter(0));
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
  SLIM_CHECK(static_cast<int64_t>(distortions.size()) == n,
             "ApplyCifarDistortion: ", distortions.size(), " distortions for ",
             n, " images");
  // The parameters as tensors, built on the CPU and copied once.
  const auto [ints, values] =
      CifarParameters(distortions, images.size(1) + 2 * padding,
                      images.size(2) + 2 * padding, options, images.device());
  return ApplyCifarDistortionTensors(images, ints[0], ints[1], ints[2],
                                     values[0], values[1], padding, options);
}

torch::Tensor ApplyCifarDistortionTensors(
    const torch::Tensor& images, const torch::Tensor& crop_y,
    const torch::Tensor& crop_x, const torch::Tensor& flip,
    const torch::Tensor& brightness_delta, const torch::Tensor& contrast_factor,
    int64_t padding, const PreprocessingOptions& options) {
  CheckBatch(images, "ApplyCifarDistortionTensors");
  return FinishCifarDistortion(
      CifarCrop(images, crop_y, crop_x, flip, padding, options),
      brightness_delta, contrast_factor, options);
}

torch::Tensor ApplyCifarDistortionCounter(const torch::Tensor& images,
                                          const torch::Tensor& positions,
                                          uint64_t seed, int64_t padding,
                                          const PreprocessingOptions& options) {
  CheckBatch(images, "ApplyCifarDistortionCounter");
  SLIM_CHECK(positions.dim() == 1 && positions.size(0) == images.size(0),
             "ApplyCifarDistortionCounter: ", positions.sizes(),
             " positions for ", images.size(0), " images");
  const auto max =
      MaxCropOffsets(images.size(1), images.size(2), padding, options);
  const CounterCrop fused =
      CounterCropCuda(images, positions, seed, padding, max, options);
  if (fused.cropped.defined()) {
    return FinishCifarDistortion(fused.cropped, fused.delta, fused.factor,
                                 options);
  }
  const torch::Tensor h = CounterHashes(positions, seed, 5);
  torch::Tensor crop_y = CounterUniformInt(h.select(1, 0), max.first);
  torch::Tensor crop_x = CounterUniformInt(h.select(1, 1), max.second);
  torch::Tensor flip = torch::bitwise_and(h.select(1, 2), 1);
  torch::Tensor delta = CounterUniform(
      h.select(1, 3), -kCifarMaxBrightnessDelta, kCifarMaxBrightnessDelta);
  torch::Tensor factor =
      CounterUniform(h.select(1, 4), kCifarContrastLower, kCifarContrastUpper);
  return ApplyCifarDistortionTensors(images, crop_y, crop_x, flip, delta,
                                     factor, padding, options);
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
