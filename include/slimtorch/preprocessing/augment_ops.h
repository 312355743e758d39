#pragma once
// The image ops of torchvision's AutoAugment, RandAugment and
// TrivialAugmentWide (torchvision.transforms.v2), on one uint8 image
// [C, H, W] (C 1 or 3) on the CPU, with torchvision's arithmetic: the same
// float32 tensor operations in the same order, nearest interpolation, and
// fill 0 outside the image (the policies' default).
// docs/training_recipes.md.
//
//   ShearX/Y     affine shear of degrees(atan(m)) about the top-left corner
//   TranslateX/Y affine translation by int(m) pixels
//   Rotate       rotation by m degrees (counter-clockwise) about the centre
//   Brightness   x * (1 + m)                               (then clamp, trunc)
//   Color        blend with the grayscale image, 1 + m     (saturation)
//   Contrast     blend with the grayscale mean, 1 + m
//   Sharpness    blend with the 3x3 smoothed image, 1 + m (borders kept)
//   Posterize    keep the int(m) high bits
//   Solarize     invert the values >= 255 * m
//   AutoContrast stretch each channel to [0, 255]
//   Equalize     PIL's histogram equalisation per channel
//   Invert       255 - x
// where m is the op's magnitude as the policies pass it (signed).

#include <torch/torch.h>

#include <string>
#include <vector>

namespace slimtorch {

enum class AugmentOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};

// torchvision's name of an op ("ShearX", ...), and the op of a name
// (throws listing the names).
const char* AugmentOpName(AugmentOp op);
AugmentOp AugmentOpByName(const std::string& name);

// `image` (uint8 [C, H, W], C 1 or 3, CPU) with `op` of magnitude
// `magnitude` applied: a new uint8 [C, H, W] tensor (`image` unchanged).
torch::Tensor ApplyAugmentOp(const torch::Tensor& image, AugmentOp op,
                             double magnitude);

namespace augment_ops {

// torchvision.transforms.v2.functional's kernels on uint8 images.
// affine_image(angle, translate, scale 1, shear, NEAREST, fill None,
// center): `center_top_left` puts the centre at pixel (0, 0) (the shears),
// else at the image centre.
torch::Tensor Affine(const torch::Tensor& image, double angle_degrees,
                     double translate_x, double translate_y,
                     double shear_x_degrees, double shear_y_degrees,
                     bool center_top_left);
// rotate_image(angle, NEAREST, expand False, center None, fill None).
torch::Tensor Rotate(const torch::Tensor& image, double angle_degrees);
torch::Tensor AdjustBrightness(const torch::Tensor& image, double factor);
torch::Tensor AdjustSaturation(const torch::Tensor& image, double factor);
torch::Tensor AdjustContrast(const torch::Tensor& image, double factor);
torch::Tensor AdjustSharpness(const torch::Tensor& image, double factor);
torch::Tensor Posterize(const torch::Tensor& image, int bits);
torch::Tensor Solarize(const torch::Tensor& image, double threshold);
torch::Tensor AutoContrast(const torch::Tensor& image);
torch::Tensor Equalize(const torch::Tensor& image);
torch::Tensor Invert(const torch::Tensor& image);

}  // namespace augment_ops
}  // namespace slimtorch
