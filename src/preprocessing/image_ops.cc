#include "slimtorch/preprocessing/image_ops.h"

#include <algorithm>
#include <cmath>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace image_ops {
namespace {

void CheckImageRank(const torch::Tensor& image, const char* op) {
  SLIM_CHECK(image.dim() == 3 || image.dim() == 4, op,
             " expects [H, W, C] or [N, H, W, C], got ", image.sizes());
}

}  // namespace

torch::Tensor ResizeWithCropOrPad(const torch::Tensor& image, int64_t target_h,
                                  int64_t target_w) {
  CheckImageRank(image, "ResizeWithCropOrPad");
  const int64_t h = image.size(-3);
  const int64_t w = image.size(-2);
  if (h == target_h && w == target_w) return image;
  const int64_t crop_top = std::max<int64_t>(h - target_h, 0) / 2;
  const int64_t crop_left = std::max<int64_t>(w - target_w, 0) / 2;
  torch::Tensor cropped = image.narrow(-3, crop_top, std::min(h, target_h))
                              .narrow(-2, crop_left, std::min(w, target_w));
  if (cropped.size(-3) == target_h && cropped.size(-2) == target_w) {
    return cropped.contiguous();
  }
  const int64_t pad_top = std::max<int64_t>(target_h - h, 0) / 2;
  const int64_t pad_left = std::max<int64_t>(target_w - w, 0) / 2;
  std::vector<int64_t> sizes = image.sizes().vec();
  sizes[image.dim() - 3] = target_h;
  sizes[image.dim() - 2] = target_w;
  torch::Tensor out = torch::zeros(sizes, image.options());
  out.narrow(-3, pad_top, cropped.size(-3))
      .narrow(-2, pad_left, cropped.size(-2))
      .copy_(cropped);
  return out;
}

torch::Tensor RgbToGrayscale(const torch::Tensor& image) {
  if (image.size(-1) == 1) return image;
  SLIM_CHECK(image.size(-1) == 3, "rgb_to_grayscale expects 1 or 3 channels, ",
             "got ", image.size(-1));
  torch::Tensor w = torch::tensor({0.2989f, 0.5870f, 0.1140f},
                                  image.options().dtype(torch::kFloat32));
  return torch::matmul(image.to(torch::kFloat32), w).unsqueeze(-1);
}

torch::Tensor AdjustBrightness_(torch::Tensor images,
                                const torch::Tensor& delta) {
  CheckImageRank(images, "AdjustBrightness_");
  return images.add_(delta);
}

torch::Tensor AdjustContrast_(torch::Tensor images,
                              const torch::Tensor& factor) {
  CheckImageRank(images, "AdjustContrast_");
  torch::Tensor mean = images.mean({-3, -2}, /*keepdim=*/true);
  return images.sub_(mean).mul_(factor).add_(mean);
}

torch::Tensor PerImageStandardization_(torch::Tensor images) {
  CheckImageRank(images, "PerImageStandardization_");
  const double values =
      static_cast<double>(images.size(-3) * images.size(-2) * images.size(-1));
  images.sub_(images.mean({-3, -2, -1}, /*keepdim=*/true));
  // Population stddev = |x - mean| / sqrt(K), without a squared copy.
  torch::Tensor stddev = images.norm(2, {-3, -2, -1}, /*keepdim=*/true)
                             .div_(std::sqrt(values))
                             .clamp_min_(1.0 / std::sqrt(values));
  return images.div_(stddev);
}

torch::Tensor AdjustSaturation(const torch::Tensor& images,
                               const torch::Tensor& factor) {
  CheckImageRank(images, "AdjustSaturation");
  SLIM_CHECK(images.size(-1) == 3, "adjust_saturation expects 3 channels ",
             "(RGB), got ", images.size(-1));
  SLIM_CHECK(images.scalar_type() == torch::kFloat32,
             "adjust_saturation expects float32 images, got ",
             images.scalar_type());
  // Per-image factors [N, 1, 1, 1] broadcast over [N, H, W] channel planes.
  const torch::Tensor scale = factor.dim() == 4 ? factor.squeeze(-1) : factor;
  std::vector<torch::Tensor> rgb = images.unbind(-1);
  const torch::Tensor& r = rgb[0];
  const torch::Tensor& g = rgb[1];
  const torch::Tensor& b = rgb[2];
  // rgb_to_hsv of TF's kernel.
  torch::Tensor v = torch::max(r, torch::max(g, b));
  torch::Tensor range = v - torch::min(r, torch::min(g, b));
  torch::Tensor zero = torch::zeros({}, images.options());
  torch::Tensor s = torch::where(v > 0, range / v, zero);
  torch::Tensor norm = 1.0f / (6.0f * range);
  torch::Tensor h = torch::where(
      r == v, norm * (g - b),
      torch::where(g == v, norm * (b - r) + static_cast<float>(2.0 / 6.0),
                   norm * (r - g) + static_cast<float>(4.0 / 6.0)));
  h = torch::where(range <= 0, zero, h);
  h = torch::where(h < 0, h + 1.0f, h);
  s = (s * scale).clamp_(0.0f, 1.0f);
  // hsv_to_rgb of TF's kernel. dh lies in [0, 6]; TF's sector is int(dh)
  // (6 only when h rounded up to 1: every channel gets m) and its fmodu
  // folds dh into (0, 2), where dh = 0 and 2 give the same x = 0.
  torch::Tensor c = s * v;
  torch::Tensor m = v - c;
  torch::Tensor dh = h * 6.0f;
  torch::Tensor sector = dh.floor();
  torch::Tensor x = c * (1.0f - (torch::fmod(dh, 2.0f) - 1.0f).abs());
  auto pick = [&](const torch::Tensor& in0, const torch::Tensor& in1,
                  const torch::Tensor& in2, const torch::Tensor& in3,
                  const torch::Tensor& in4, const torch::Tensor& in5) {
    torch::Tensor out = torch::where(sector == 5, in5, zero);
    out = torch::where(sector == 4, in4, out);
    out = torch::where(sector == 3, in3, out);
    out = torch::where(sector == 2, in2, out);
    out = torch::where(sector == 1, in1, out);
    return torch::where(sector == 0, in0, out) + m;
  };
  return torch::stack(
      {pick(c, x, zero, zero, x, c), pick(x, c, c, x, zero, zero),
       pick(zero, zero, x, c, c, x)},
      -1);
}

CropBox CentralCropBox(int64_t height, int64_t width, double central_fraction) {
  SLIM_CHECK(central_fraction > 0.0 && central_fraction <= 1.0,
             "central_crop fraction must be in (0, 1], got ", central_fraction);
  SLIM_CHECK(height > 0 && width > 0, "central_crop of an empty ", height, "x",
             width, " image");
  CropBox box;
  box.y = static_cast<int64_t>((height - height * central_fraction) / 2);
  box.x = static_cast<int64_t>((width - width * central_fraction) / 2);
  box.height = height - 2 * box.y;
  box.width = width - 2 * box.x;
  return box;
}

torch::Tensor CentralCrop(const torch::Tensor& image, double central_fraction) {
  CheckImageRank(image, "CentralCrop");
  const CropBox box =
      CentralCropBox(image.size(-3), image.size(-2), central_fraction);
  return image.narrow(-3, box.y, box.height).narrow(-2, box.x, box.width);
}

namespace {

// TF's legacy bilinear sampling along one axis for outputs [start,
// start + count) of out_size: lower and upper source indices and the weight
// of the upper one.
struct AxisWeights {
  torch::Tensor lower, upper, lerp;
};

AxisWeights LegacyAxisWeights(int64_t in_size, int64_t out_size, int64_t start,
                              int64_t count, const torch::Device& device) {
  const float scale =
      static_cast<float>(in_size) / static_cast<float>(out_size);
  torch::Tensor lower = torch::empty({count}, torch::kInt64);
  torch::Tensor upper = torch::empty({count}, torch::kInt64);
  torch::Tensor lerp = torch::empty({count}, torch::kFloat32);
  int64_t* lo = lower.data_ptr<int64_t>();
  int64_t* up = upper.data_ptr<int64_t>();
  float* w = lerp.data_ptr<float>();
  for (int64_t i = 0; i < count; ++i) {
    const float in = static_cast<float>(start + i) * scale;
    const float in_floor = std::floor(in);
    lo[i] = std::max<int64_t>(static_cast<int64_t>(in_floor), 0);
    up[i] = std::min<int64_t>(static_cast<int64_t>(std::ceil(in)), in_size - 1);
    w[i] = in - in_floor;
  }
  return {lower.to(device), upper.to(device), lerp.to(device)};
}

}  // namespace

torch::Tensor ResizeBilinearLegacy(const torch::Tensor& images, int64_t out_h,
                                   int64_t out_w) {
  CropBox all;
  all.height = out_h;
  all.width = out_w;
  return ResizeBilinearLegacyWindow(images, out_h, out_w, all);
}

torch::Tensor ResizeBilinearLegacyWindow(const torch::Tensor& images,
                                         int64_t out_h, int64_t out_w,
                                         const CropBox& window) {
  CheckImageRank(images, "ResizeBilinearLegacy");
  const int64_t in_h = images.size(-3);
  const int64_t in_w = images.size(-2);
  SLIM_CHECK(in_h > 0 && in_w > 0 && out_h > 0 && out_w > 0,
             "resize_bilinear from ", in_h, "x", in_w, " to ", out_h, "x",
             out_w, ": sizes must be positive");
  SLIM_CHECK(
      window.y >= 0 && window.x >= 0 && window.height > 0 && window.width > 0 &&
          window.y + window.height <= out_h && window.x + window.width <= out_w,
      "resize window ", window.height, "x", window.width, " at (", window.y,
      ", ", window.x, ") outside the ", out_h, "x", out_w, " resized image");
  const AxisWeights ys =
      LegacyAxisWeights(in_h, out_h, window.y, window.height, images.device());
  const AxisWeights xs =
      LegacyAxisWeights(in_w, out_w, window.x, window.width, images.device());
  const torch::Tensor top = images.index_select(-3, ys.lower);
  const torch::Tensor bottom = images.index_select(-3, ys.upper);
  auto corner = [](const torch::Tensor& rows, const torch::Tensor& cols) {
    return rows.index_select(-2, cols).to(torch::kFloat32);
  };
  const torch::Tensor x_lerp = xs.lerp.view({-1, 1});
  const torch::Tensor y_lerp = ys.lerp.view({-1, 1, 1});
  torch::Tensor top_left = corner(top, xs.lower);
  torch::Tensor bottom_left = corner(bottom, xs.lower);
  torch::Tensor t = top_left + (corner(top, xs.upper) - top_left) * x_lerp;
  torch::Tensor bt =
      bottom_left + (corner(bottom, xs.upper) - bottom_left) * x_lerp;
  return t + (bt - t) * y_lerp;
}

namespace {

// TF's GenerateRandomCrop: one candidate crop of a width x height image for
// one aspect ratio, or false when rounding cannot meet the area range.
bool GenerateRandomCrop(int64_t width, int64_t height, float min_relative,
                        float max_relative, float aspect, std::mt19937_64& rng,
                        CropBox* crop) {
  const float min_area = min_relative * width * height;
  const float max_area = max_relative * width * height;
  int64_t h = std::lrint(std::sqrt(min_area / aspect));
  int64_t max_h = std::lrint(std::sqrt(max_area / aspect));
  if (std::lrint(max_h * aspect) > width) {
    // The largest max_h with lrint(max_h * aspect) <= width.
    const float kEps = 0.0000001f;
    max_h = static_cast<int64_t>((width + 0.5 - kEps) / aspect);
    if (std::lrint(max_h * aspect) > width) max_h -= 1;
  }
  max_h = std::min(max_h, height);
  h = std::min(h, max_h);
  if (h < max_h) h += static_cast<int64_t>(rng() % (max_h - h + 1));
  int64_t w = std::lrint(h * aspect);
  float area = static_cast<float>(w * h);
  if (area < min_area) {
    h += 1;
    w = std::lrint(h * aspect);
    area = static_cast<float>(w * h);
  }
  if (area > max_area) {
    h -= 1;
    w = std::lrint(h * aspect);
    area = static_cast<float>(w * h);
  }
  if (area < min_area || area > max_area || w > width || h > height || w <= 0 ||
      h <= 0) {
    return false;
  }
  crop->height = h;
  crop->width = w;
  crop->y = h < height ? static_cast<int64_t>(rng() % (height - h)) : 0;
  crop->x = w < width ? static_cast<int64_t>(rng() % (width - w)) : 0;
  return true;
}

int64_t IntersectionArea(const CropBox& a, const CropBox& b) {
  const int64_t h =
      std::min(a.y + a.height, b.y + b.height) - std::max(a.y, b.y);
  const int64_t w = std::min(a.x + a.width, b.x + b.width) - std::max(a.x, b.x);
  return h > 0 && w > 0 ? h * w : 0;
}

}  // namespace

CropBox SampleDistortedBoundingBox(int64_t height, int64_t width,
                                   const DistortedBoxOptions& options,
                                   std::mt19937_64& rng) {
  const DistortedBoxOptions& o = options;
  SLIM_CHECK(height > 0 && width > 0,
             "sample_distorted_bounding_box of an empty ", height, "x", width,
             " image");
  SLIM_CHECK(o.min_object_covered >= 0, "min_object_covered must be ",
             "non-negative, got ", o.min_object_covered);
  SLIM_CHECK(o.min_aspect_ratio > 0 && o.max_aspect_ratio > 0,
             "aspect ratio range must be positive, got [", o.min_aspect_ratio,
             ", ", o.max_aspect_ratio, "]");
  SLIM_CHECK(
      o.min_area > 0 && o.max_area > 0 && o.min_area <= 1 && o.max_area <= 1,
      "area range must lie in (0, 1], got [", o.min_area, ", ", o.max_area,
      "]");
  SLIM_CHECK(o.max_attempts > 0, "max_attempts must be positive, got ",
             o.max_attempts);
  CropBox image;
  image.height = height;
  image.width = width;
  std::vector<CropBox> objects;
  for (const std::array<float, 4>& b : o.boxes) {
    for (float v : b) {
      SLIM_CHECK(v >= 0.0f && v <= 1.0f, "bounding box coordinates must be ",
                 "in [0, 1], got ", v);
    }
    CropBox box;
    box.y = static_cast<int64_t>(b[0] * height);
    box.x = static_cast<int64_t>(b[1] * width);
    box.height = static_cast<int64_t>(b[2] * height) - box.y;
    box.width = static_cast<int64_t>(b[3] * width) - box.x;
    objects.push_back(box);
  }
  if (objects.empty()) objects.push_back(image);

  for (int attempt = 0; attempt < o.max_attempts; ++attempt) {
    // RandFloat in [0, 1) from 24 bits, then TF's float arithmetic.
    const float u = static_cast<float>(rng() >> 40) * 0x1p-24f;
    const float aspect =
        u * (o.max_aspect_ratio - o.min_aspect_ratio) + o.min_aspect_ratio;
    CropBox crop;
    if (!GenerateRandomCrop(width, height, o.min_area, o.max_area, aspect, rng,
                            &crop)) {
      continue;
    }
    for (const CropBox& object : objects) {
      // Boxes with no pixels (TF's area < 1) never count as covered.
      if (object.height <= 0 || object.width <= 0) continue;
      const float object_area =
          static_cast<float>(object.height * object.width);
      if (static_cast<float>(IntersectionArea(crop, object)) / object_area >=
          o.min_object_covered) {
        return crop;
      }
    }
  }
  return image;
}

}  // namespace image_ops
}  // namespace slimtorch
