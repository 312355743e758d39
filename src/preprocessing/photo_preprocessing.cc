#include "slimtorch/preprocessing/photo_preprocessing.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "photo_kernel.h"
#include "slimtorch/core/error.h"
#include "slimtorch/preprocessing/inception_preprocessing.h"
#include "slimtorch/preprocessing/vgg_preprocessing.h"

namespace slimtorch {
namespace {

// TF's legacy bilinear sampling of output index i (image_ops.cc's
// LegacyAxisWeights): source indices lower/upper and the upper's weight.
struct Sample {
  int64_t lower, upper;
  float lerp;
};

Sample LegacySample(int64_t i, float scale, int64_t in_size) {
  const float in = static_cast<float>(i) * scale;
  const float in_floor = std::floor(in);
  return {std::max<int64_t>(static_cast<int64_t>(in_floor), 0),
          std::min<int64_t>(static_cast<int64_t>(std::ceil(in)), in_size - 1),
          in - in_floor};
}

float Scale(int64_t in_size, int64_t out_size) {
  return static_cast<float>(in_size) / static_cast<float>(out_size);
}

// Sets plan.source to the rows and columns the resize reads.
void SetSourceWindow(int64_t out_h, int64_t out_w, PhotoPlan* plan) {
  const float sy = Scale(plan->in_h, plan->resized_h);
  const float sx = Scale(plan->in_w, plan->resized_w);
  const int64_t y0 = LegacySample(plan->window_y, sy, plan->in_h).lower;
  const int64_t y1 =
      LegacySample(plan->window_y + out_h - 1, sy, plan->in_h).upper;
  const int64_t x0 = LegacySample(plan->window_x, sx, plan->in_w).lower;
  const int64_t x1 =
      LegacySample(plan->window_x + out_w - 1, sx, plan->in_w).upper;
  plan->source.y = plan->base_y + y0;
  plan->source.x = plan->base_x + x0;
  plan->source.height = y1 - y0 + 1;
  plan->source.width = x1 - x0 + 1;
}

// The resize of a crop `box` of the image to the whole out_h x out_w.
PhotoPlan ResizeCropPlan(const image_ops::CropBox& box, int64_t out_h,
                         int64_t out_w) {
  PhotoPlan plan;
  plan.base_y = box.y;
  plan.base_x = box.x;
  plan.in_h = box.height;
  plan.in_w = box.width;
  plan.resized_h = out_h;
  plan.resized_w = out_w;
  SetSourceWindow(out_h, out_w, &plan);
  return plan;
}

}  // namespace

std::unique_ptr<PhotoPreprocessing> PhotoPreprocessing::Create(
    const std::string& name, const PreprocessingOptions& options) {
  GetPreprocessing(name, options);  // validates the name and the options
  if (options.use_grayscale) return nullptr;
  if (options.augmentation != nullptr) return nullptr;  // the tensor chain
  // A net's name reaches its preprocessing as that preprocessing's alias.
  const std::string& family = GetPreprocessingRegistry().Resolve(name);
  Kind kind;
  if (family == "inception") {
    kind = options.is_training ? Kind::kInceptionTrain : Kind::kInceptionEval;
  } else if (family == "vgg") {
    kind = options.is_training ? Kind::kVggTrain : Kind::kVggEval;
  } else {
    return nullptr;
  }
  return std::unique_ptr<PhotoPreprocessing>(
      new PhotoPreprocessing(kind, options));
}

PhotoPlan PhotoPreprocessing::Plan(
    int64_t height, int64_t width, std::mt19937_64& rng,
    const std::vector<std::array<float, 4>>& boxes) const {
  const int64_t out_h = options_.output_height;
  const int64_t out_w = options_.output_width;
  switch (kind_) {
    case Kind::kInceptionTrain: {
      const InceptionDistortion d =
          DrawInceptionDistortion(rng, height, width, boxes);
      PhotoPlan plan = ResizeCropPlan(d.crop, out_h, out_w);
      plan.flip = d.flip;
      plan.brightness_delta = d.brightness_delta;
      plan.saturation_factor = d.saturation_factor;
      return plan;
    }
    case Kind::kInceptionEval:
      return ResizeCropPlan(image_ops::CentralCropBox(
                                height, width, kInceptionCentralFraction),
                            out_h, out_w);
    case Kind::kVggTrain:
    case Kind::kVggEval: {
      PhotoPlan plan;
      plan.in_h = height;
      plan.in_w = width;
      if (kind_ == Kind::kVggTrain) {
        const VggDistortion d =
            DrawVggDistortion(rng, height, width, out_h, out_w);
        std::tie(plan.resized_h, plan.resized_w) =
            VggResizedSize(height, width, d.resize_side);
        plan.window_y = d.crop_y;
        plan.window_x = d.crop_x;
        plan.flip = d.flip;
      } else {
        std::tie(plan.resized_h, plan.resized_w) =
            VggResizedSize(height, width, kVggResizeSideMin);
        SLIM_CHECK(plan.resized_h >= out_h && plan.resized_w >= out_w,
                   "vgg preprocessing: a ", height, "x", width,
                   " image resized to ", plan.resized_h, "x", plan.resized_w,
                   " is smaller than the ", out_h, "x", out_w, " crop");
        plan.window_y = (plan.resized_h - out_h) / 2;
        plan.window_x = (plan.resized_w - out_w) / 2;
      }
      SetSourceWindow(out_h, out_w, &plan);
      return plan;
    }
  }
  SLIM_FAIL("unreachable");
}

namespace {

// The resize's column tables, relative to the source window: each output
// column's two source columns (as offsets into a row) and its weight. Sizes
// the row buffers s.top / s.bottom too.
void FillColumnTables(const PhotoPlan& plan, int64_t out_w, int64_t c_count,
                      PhotoScratch* scratch) {
  PhotoScratch& s = *scratch;
  s.x_lower.resize(out_w);
  s.x_upper.resize(out_w);
  s.x_lerp.resize(out_w);
  s.top.resize(out_w * c_count);
  s.bottom.resize(out_w * c_count);
  const float sx = Scale(plan.in_w, plan.resized_w);
  const int64_t dx = plan.base_x - plan.source.x;
  for (int64_t i = 0; i < out_w; ++i) {
    const Sample t = LegacySample(plan.window_x + i, sx, plan.in_w);
    s.x_lower[i] = (t.lower + dx) * c_count;
    s.x_upper[i] = (t.upper + dx) * c_count;
    s.x_lerp[i] = t.lerp;
  }
}

// The bilinear resize of the source window (`pixels`, rows `row_stride`
// bytes apart, values times `unit`) into the out_h x out_w output planes
// of `out`, mirrored when plan.flip, minus `means` (per channel) unless
// null. Uses the column tables of FillColumnTables.
void ResizeIntoPlanes(const PhotoPlan& plan, const uint8_t* pixels,
                      int64_t row_stride, int channels, float unit,
                      const float* means, int64_t out_h, int64_t out_w,
                      float* out, PhotoScratch* scratch) {
  PhotoScratch& s = *scratch;
  const int64_t plane = out_h * out_w;
  // One source row lerped along x (uint8 → float first, as the tensor ops),
  // into planar s.top / s.bottom.
  auto lerp_row = [&](const uint8_t* row, float* dst) {
    internal::LerpSourceRow(row, s.x_lower.data(), s.x_upper.data(),
                            s.x_lerp.data(), channels, out_w, unit, dst);
  };

  const float sy = Scale(plan.in_h, plan.resized_h);
  const int64_t dy = plan.base_y - plan.source.y;
  // Source rows held in s.top / s.bottom (an upscale reuses them).
  int64_t top_row = -1, bottom_row = -1;
  for (int64_t oy = 0; oy < out_h; ++oy) {
    const Sample t = LegacySample(plan.window_y + oy, sy, plan.in_h);
    if (t.lower != top_row) {
      if (t.lower == bottom_row) {
        std::swap(s.top, s.bottom);
        std::swap(top_row, bottom_row);
      } else {
        lerp_row(pixels + (t.lower + dy) * row_stride, s.top.data());
        top_row = t.lower;
      }
    }
    if (t.upper != bottom_row) {
      if (t.upper == top_row) {
        s.bottom = s.top;
      } else {
        lerp_row(pixels + (t.upper + dy) * row_stride, s.bottom.data());
      }
      bottom_row = t.upper;
    }
    // Vertical lerp into the output planes (mirrored when flipping).
    internal::LerpOutputRow(s.top.data(), s.bottom.data(), t.lerp, channels,
                            out_w, plan.flip, means, out + oy * out_w, plane);
  }
}

}  // namespace

void PhotoPreprocessing::Apply(const PhotoPlan& plan, const uint8_t* pixels,
                               int64_t row_stride, int channels, float* out,
                               PhotoScratch* scratch) const {
  SLIM_CHECK(channels == 1 || channels == 3,
             "photo preprocessing expects 1 or 3 channels, got ", channels);
  const int64_t out_h = options_.output_height;
  const int64_t out_w = options_.output_width;
  const bool inception =
      kind_ == Kind::kInceptionTrain || kind_ == Kind::kInceptionEval;
  // convert_image_dtype for inception; vgg resizes the uint8 values.
  const float unit = inception ? static_cast<float>(1.0 / 255.0) : 1.0f;
  const int64_t c_count = channels;
  const int64_t plane = out_h * out_w;
  FillColumnTables(plan, out_w, c_count, scratch);
  // vgg subtracts its means in the resize, inception's per-pixel stages
  // follow it.
  const float* means =
      inception ? nullptr : (c_count == 1 ? &kVggGrayMean : kVggRgbMeans);
  ResizeIntoPlanes(plan, pixels, row_stride, channels, unit, means, out_h,
                   out_w, out, scratch);
  if (kind_ == Kind::kInceptionTrain) {
    float* planes[3] = {out, out + plane, out + 2 * plane};
    internal::InceptionDistortPixels(planes, channels, plane,
                                     plan.brightness_delta,
                                     plan.saturation_factor);
  } else if (kind_ == Kind::kInceptionEval) {
    internal::SignedUnitPixels(out, c_count * plane);
  }
}

}  // namespace slimtorch
