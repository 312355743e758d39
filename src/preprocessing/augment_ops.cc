#include "slimtorch/preprocessing/augment_ops.h"

#include <array>
#include <cmath>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

constexpr double kPi = 3.14159265358979323846;

double Radians(double degrees) { return degrees * kPi / 180.0; }

void CheckImage(const torch::Tensor& image) {
  SLIM_CHECK(image.dim() == 3 && image.scalar_type() == torch::kUInt8 &&
                 (image.size(0) == 1 || image.size(0) == 3),
             "augmentation ops take a uint8 image [C, H, W] of 1 or 3 "
             "channels, got ",
             image.scalar_type(), " ", image.sizes());
}

// _get_inverse_affine_matrix(center, angle, translate, scale 1, shear),
// inverted, in double as Python computes it.
std::array<double, 6> InverseAffineMatrix(double cx, double cy, double angle,
                                          double tx, double ty, double shear_x,
                                          double shear_y) {
  const double rot = Radians(angle);
  const double sx = Radians(shear_x);
  const double sy = Radians(shear_y);
  const double cos_sy = std::cos(sy);
  const double tan_sx = std::tan(sx);
  const double rot_minus_sy = rot - sy;
  const double cx_plus_tx = cx + tx;
  const double cy_plus_ty = cy + ty;
  const double a = std::cos(rot_minus_sy) / cos_sy;
  const double b = -(a * tan_sx + std::sin(rot));
  const double c = std::sin(rot_minus_sy) / cos_sy;
  const double d = std::cos(rot) - c * tan_sx;
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};
  m[2] += cx - m[0] * cx_plus_tx - m[1] * cy_plus_ty;
  m[5] += cy - m[3] * cx_plus_tx - m[4] * cy_plus_ty;
  return m;
}

// _affine_grid(theta, w, h, ow = w, oh = h) in float32.
torch::Tensor AffineGrid(const std::array<double, 6>& matrix, int64_t w,
                         int64_t h) {
  torch::Tensor theta = torch::empty({1, 2, 3}, torch::kFloat32);
  auto t = theta.accessor<float, 3>();
  for (int k = 0; k < 6; ++k)
    t[0][k / 3][k % 3] = static_cast<float>(matrix[k]);
  torch::Tensor base = torch::empty({1, h, w, 3}, torch::kFloat32);
  base.select(3, 0).copy_(torch::linspace((1.0 - static_cast<double>(w)) * 0.5,
                                          (static_cast<double>(w) - 1.0) * 0.5,
                                          w));
  base.select(3, 1).copy_(torch::linspace((1.0 - static_cast<double>(h)) * 0.5,
                                          (static_cast<double>(h) - 1.0) * 0.5,
                                          h)
                              .unsqueeze(-1));
  base.select(3, 2).fill_(1);
  const torch::Tensor scale = torch::tensor(
      {0.5 * static_cast<double>(w), 0.5 * static_cast<double>(h)},
      torch::kFloat32);
  const torch::Tensor rescaled = theta.transpose(1, 2).div(scale);
  return base.view({1, h * w, 3}).bmm(rescaled).view({1, h, w, 2});
}

// _apply_grid_transform(NEAREST, fill None): grid_sample with zero padding,
// rounded back to uint8.
torch::Tensor GridTransform(const torch::Tensor& image,
                            const std::array<double, 6>& matrix) {
  const int64_t h = image.size(1), w = image.size(2);
  const torch::Tensor grid = AffineGrid(matrix, w, h);
  torch::Tensor out = torch::grid_sampler(
      image.unsqueeze(0).to(torch::kFloat32), grid, /*interpolation=*/1,
      /*padding_mode=*/0, /*align_corners=*/false);
  return out.round_().to(torch::kUInt8)[0];
}

// _rgb_to_grayscale_image(preserve_dtype=False) floored: float [1, H, W].
torch::Tensor FlooredGray(const torch::Tensor& image) {
  const torch::Tensor l = image[0].mul(0.2989);
  l.add_(image[1], 0.587).add_(image[2], 0.114);
  return l.unsqueeze(0).floor_();
}

// _blend: image * ratio + other * (1 - ratio), clamped, truncated to uint8.
torch::Tensor Blend(const torch::Tensor& image, const torch::Tensor& other,
                    double ratio) {
  return image.mul(ratio)
      .add_(other, 1.0 - ratio)
      .clamp_(0, 255)
      .to(torch::kUInt8);
}

}  // namespace

namespace augment_ops {

torch::Tensor Affine(const torch::Tensor& image, double angle_degrees,
                     double translate_x, double translate_y,
                     double shear_x_degrees, double shear_y_degrees,
                     bool center_top_left) {
  CheckImage(image);
  const double h = static_cast<double>(image.size(1));
  const double w = static_cast<double>(image.size(2));
  // The centre in pixels relative to the image centre.
  const double cx = center_top_left ? -w * 0.5 : 0.0;
  const double cy = center_top_left ? -h * 0.5 : 0.0;
  return GridTransform(
      image,
      InverseAffineMatrix(cx, cy, angle_degrees, translate_x, translate_y,
                          shear_x_degrees, shear_y_degrees));
}

torch::Tensor Rotate(const torch::Tensor& image, double angle_degrees) {
  CheckImage(image);
  // angle % 360 as Python's (the sign of the divisor).
  double angle = std::fmod(angle_degrees, 360.0);
  if (angle < 0) angle += 360.0;
  if (angle == 0) return image.clone();
  if (angle == 180) return torch::rot90(image, 2, {-2, -1}).contiguous();
  if (image.size(1) == image.size(2)) {
    if (angle == 90) return torch::rot90(image, 1, {-2, -1}).contiguous();
    if (angle == 270) return torch::rot90(image, 3, {-2, -1}).contiguous();
  }
  return GridTransform(image, InverseAffineMatrix(0, 0, -angle, 0, 0, 0, 0));
}

torch::Tensor AdjustBrightness(const torch::Tensor& image, double factor) {
  CheckImage(image);
  SLIM_CHECK(factor >= 0, "brightness factor ", factor, " is negative");
  return image.mul(factor).clamp_(0, 255).to(torch::kUInt8);
}

torch::Tensor AdjustSaturation(const torch::Tensor& image, double factor) {
  CheckImage(image);
  SLIM_CHECK(factor >= 0, "saturation factor ", factor, " is negative");
  if (image.size(0) == 1) return image.clone();
  return Blend(image, FlooredGray(image), factor);
}

torch::Tensor AdjustContrast(const torch::Tensor& image, double factor) {
  CheckImage(image);
  SLIM_CHECK(factor >= 0, "contrast factor ", factor, " is negative");
  const torch::Tensor gray =
      image.size(0) == 3 ? FlooredGray(image) : image.to(torch::kFloat32);
  const torch::Tensor mean = torch::mean(gray, {-3, -2, -1}, /*keepdim=*/true);
  return Blend(image, mean, factor);
}

torch::Tensor AdjustSharpness(const torch::Tensor& image, double factor) {
  CheckImage(image);
  SLIM_CHECK(factor >= 0, "sharpness factor ", factor, " is negative");
  const int64_t c = image.size(0);
  if (image.numel() == 0 || image.size(1) <= 2 || image.size(2) <= 2) {
    return image.clone();
  }
  const double a = 1.0 / 13.0, b = 5.0 / 13.0;
  const torch::Tensor kernel =
      torch::tensor({a, a, a, a, b, a, a, a, a}, torch::kFloat32)
          .view({1, 1, 3, 3})
          .expand({c, 1, 3, 3});
  torch::Tensor out = image.to(torch::kFloat32);
  torch::Tensor blurred =
      torch::conv2d(out.unsqueeze(0), kernel, /*bias=*/torch::Tensor(),
                    /*stride=*/torch::IntArrayRef{1, 1},
                    /*padding=*/torch::IntArrayRef{0, 0},
                    /*dilation=*/torch::IntArrayRef{1, 1}, /*groups=*/c)[0]
          .round_();
  using torch::indexing::Slice;
  torch::Tensor view = out.index({Slice(), Slice(1, -1), Slice(1, -1)});
  view.add_(blurred.sub_(view), 1.0 - factor);
  return out.clamp_(0, 255).to(torch::kUInt8);
}

torch::Tensor Posterize(const torch::Tensor& image, int bits) {
  CheckImage(image);
  SLIM_CHECK(bits >= 0 && bits <= 8, "posterize bits ", bits, " not in [0, 8]");
  if (bits >= 8) return image.clone();
  const int mask = ((1 << bits) - 1) << (8 - bits);
  return torch::bitwise_and(image, mask);
}

torch::Tensor Solarize(const torch::Tensor& image, double threshold) {
  CheckImage(image);
  SLIM_CHECK(threshold <= 255, "solarize threshold ", threshold, " above 255");
  return torch::where(image.ge(threshold), torch::bitwise_not(image), image);
}

torch::Tensor AutoContrast(const torch::Tensor& image) {
  CheckImage(image);
  if (image.numel() == 0) return image.clone();
  const torch::Tensor x = image.to(torch::kFloat32);
  torch::Tensor minimum = x.amin({-2, -1}, /*keepdim=*/true);
  torch::Tensor maximum = x.amax({-2, -1}, /*keepdim=*/true);
  const torch::Tensor eq = maximum.eq(minimum);
  torch::Tensor inv_scale = maximum.sub_(minimum).mul_(1.0 / 255.0);
  minimum.masked_fill_(eq, 0.0);
  inv_scale.masked_fill_(eq, 1.0);
  return x.sub_(minimum).div_(inv_scale).clamp_(0, 255).to(torch::kUInt8);
}

torch::Tensor Equalize(const torch::Tensor& image) {
  CheckImage(image);
  if (image.numel() == 0) return image.clone();
  const int64_t c = image.size(0);
  const torch::Tensor flat = image.flatten(1).to(torch::kLong);
  torch::Tensor hist = torch::zeros({c, 256}, torch::kInt32);
  hist.scatter_add_(1, flat, torch::ones({1}, torch::kInt32).expand_as(flat));
  torch::Tensor cum = hist.cumsum(-1, torch::kInt32);
  const torch::Tensor index = cum.argmax(-1).unsqueeze(-1);
  const torch::Tensor non_max = flat.size(1) - hist.gather(-1, index);
  torch::Tensor step = non_max.div(255, "floor");
  const torch::Tensor valid = step.ne(0);
  torch::Tensor lut = cum.narrow(-1, 0, 255).add(step.div(2, "floor"));
  lut = lut.div(step.clamp(1), "floor").clamp_(0, 255).to(torch::kUInt8);
  lut = torch::cat({torch::zeros({c, 1}, torch::kUInt8), lut}, -1);
  const torch::Tensor equalized = lut.gather(-1, flat).view_as(image);
  return torch::where(valid.view({c, 1, 1}), equalized, image);
}

torch::Tensor Invert(const torch::Tensor& image) {
  CheckImage(image);
  return torch::bitwise_not(image);
}

}  // namespace augment_ops

namespace {

struct OpName {
  AugmentOp op;
  const char* name;
};
constexpr OpName kOpNames[] = {
    {AugmentOp::kIdentity, "Identity"},
    {AugmentOp::kShearX, "ShearX"},
    {AugmentOp::kShearY, "ShearY"},
    {AugmentOp::kTranslateX, "TranslateX"},
    {AugmentOp::kTranslateY, "TranslateY"},
    {AugmentOp::kRotate, "Rotate"},
    {AugmentOp::kBrightness, "Brightness"},
    {AugmentOp::kColor, "Color"},
    {AugmentOp::kContrast, "Contrast"},
    {AugmentOp::kSharpness, "Sharpness"},
    {AugmentOp::kPosterize, "Posterize"},
    {AugmentOp::kSolarize, "Solarize"},
    {AugmentOp::kAutoContrast, "AutoContrast"},
    {AugmentOp::kEqualize, "Equalize"},
    {AugmentOp::kInvert, "Invert"},
};

// degrees(atan(m)): torchvision's shear of magnitude m.
double ShearDegrees(double m) { return std::atan(m) * 180.0 / kPi; }

}  // namespace

const char* AugmentOpName(AugmentOp op) {
  for (const OpName& n : kOpNames) {
    if (n.op == op) return n.name;
  }
  return "?";
}

AugmentOp AugmentOpByName(const std::string& name) {
  std::string names;
  for (const OpName& n : kOpNames) {
    if (name == n.name) return n.op;
    names += (names.empty() ? "" : ", ") + std::string(n.name);
  }
  SLIM_FAIL("unknown augmentation op '", name, "'; the ops are ", names);
}

torch::Tensor ApplyAugmentOp(const torch::Tensor& image, AugmentOp op,
                             double m) {
  namespace ops = augment_ops;
  switch (op) {
    case AugmentOp::kIdentity:
      CheckImage(image);
      return image.clone();
    case AugmentOp::kShearX:
      return ops::Affine(image, 0, 0, 0, ShearDegrees(m), 0, true);
    case AugmentOp::kShearY:
      return ops::Affine(image, 0, 0, 0, 0, ShearDegrees(m), true);
    case AugmentOp::kTranslateX:
      return ops::Affine(image, 0, std::trunc(m), 0, 0, 0, false);
    case AugmentOp::kTranslateY:
      return ops::Affine(image, 0, 0, std::trunc(m), 0, 0, false);
    case AugmentOp::kRotate:
      return ops::Rotate(image, m);
    case AugmentOp::kBrightness:
      return ops::AdjustBrightness(image, 1.0 + m);
    case AugmentOp::kColor:
      return ops::AdjustSaturation(image, 1.0 + m);
    case AugmentOp::kContrast:
      return ops::AdjustContrast(image, 1.0 + m);
    case AugmentOp::kSharpness:
      return ops::AdjustSharpness(image, 1.0 + m);
    case AugmentOp::kPosterize:
      return ops::Posterize(image, static_cast<int>(m));
    case AugmentOp::kSolarize:
      return ops::Solarize(image, 255.0 * m);
    case AugmentOp::kAutoContrast:
      return ops::AutoContrast(image);
    case AugmentOp::kEqualize:
      return ops::Equalize(image);
    case AugmentOp::kInvert:
      return ops::Invert(image);
  }
  SLIM_FAIL("unknown augmentation op ", static_cast<int>(op));
}

}  // namespace slimtorch
