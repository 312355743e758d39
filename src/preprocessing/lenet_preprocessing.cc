// TF-Slim's lenet_preprocessing (training == evaluation):
//   to_float → [rgb_to_grayscale] → resize_image_with_crop_or_pad →
//   (x - 128) / 128, range [-1, 0.992].
// The per-image form is the batched one on a batch of one. Ours: with
// --auto_augment / --random_erase (training) the policy runs on the values
// after the crop or pad, the erasing on the output.
#include "preprocessing_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {
namespace {

// images: [N, H, W, C], any dtype and device → float [N, C', out_h, out_w];
// training with --auto_augment / --random_erase: `augments[i]` for image
// i (the policy on the cropped or padded values, the erasing on the
// output); none: TF-Slim's.
torch::Tensor LenetImages(const torch::Tensor& images,
                          const std::vector<ExampleAugment>& augments,
                          const PreprocessingOptions& options) {
  torch::Tensor x = images.to(torch::kFloat32);
  if (options.use_grayscale) x = image_ops::RgbToGrayscale(x);
  x = image_ops::ResizeWithCropOrPad(x, options.output_height,
                                     options.output_width);
  const auto ptrs = preprocessing_util::Pointers(augments);
  if (!augments.empty() && options.augmentation->has_policy()) {
    torch::Tensor nchw = x.permute({0, 3, 1, 2});
    AugmentFloatBatch(nchw, ptrs, 1.0);
  }
  torch::Tensor out =
      x.sub(128.0f).div_(128.0f).permute({0, 3, 1, 2}).contiguous();
  if (!augments.empty()) EraseBatch(out, ptrs);
  return out;
}

PreprocessingFn LenetPreprocessing(const PreprocessingOptions& options) {
  return [options](const torch::Tensor& image, std::mt19937_64& rng) {
    SLIM_CHECK(image.dim() == 3, "lenet preprocessing expects an image ",
               "[H, W, C], got ", image.sizes());
    std::vector<ExampleAugment> augments;
    if (options.is_training) {
      preprocessing_util::DrawAugment(rng, options, &augments);
    }
    return LenetImages(image.unsqueeze(0), augments, options)[0];
  };
}

BatchPreprocessingFn LenetBatchPreprocessing(
    const PreprocessingOptions& options) {
  return [options](const torch::Tensor& images,
                   std::vector<std::mt19937_64>& rngs) {
    SLIM_CHECK(images.dim() == 4, "batched lenet preprocessing expects ",
               "images [N, H, W, C], got ", images.sizes());
    std::vector<ExampleAugment> augments;
    if (options.is_training) {
      for (std::mt19937_64& rng : rngs) {
        preprocessing_util::DrawAugment(rng, options, &augments);
      }
    }
    return LenetImages(images, augments, options);
  };
}

SLIM_REGISTER_PREPROCESSING("lenet", LenetPreprocessing);
SLIM_REGISTER_BATCH_PREPROCESSING("lenet", LenetBatchPreprocessing);

}  // namespace
}  // namespace slimtorch
