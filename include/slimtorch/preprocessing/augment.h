#pragma once
// Per-image augmentation beyond TF-Slim's (docs/training_recipes.md):
// --auto_augment, a policy of torchvision's ops (preprocessing/augment_ops.h),
// and --random_erase, torchvision's RandomErasing. A training preprocessing
// draws an example's augmentation after its own draws (from the same
// per-example generator, so that a resumed run draws what the uninterrupted one
// drew), applies the policy after its crop and flip, on the image in uint8, and
// erases on its output.
//
// Policies (torchvision.transforms.v2's, magnitudes from its tables):
//   rand-m<M>-n<N>        RandAugment(num_ops N, magnitude M, 31 bins):
//                         N ops, each uniform over the 14 (Identity,
//                         ShearX/Y, TranslateX/Y, Rotate, Brightness, Color,
//                         Contrast, Sharpness, Posterize, Solarize,
//                         AutoContrast, Equalize), at bin M, the sign of a
//                         signed op a fair coin
//   trivialaugment_wide   TrivialAugmentWide(31 bins): one op of the 14
//                         (wider ranges), its bin uniform, sign a coin
//   autoaugment_imagenet, autoaugment_cifar10, autoaugment_svhn
//                         AutoAugment: one of the 25 sub-policies
//                         uniformly; each of its two ops applied with its
//                         probability, at its bin of 10
// Random erasing (p, scale (0.02, 0.33), ratio (0.3, 3.3), value 0): with
// probability p, up to 10 tries of area A * U(0.02, 0.33) and aspect
// exp(U(ln 0.3, ln 3.3)), h = round(sqrt(area * aspect)), w = round(sqrt(
// area / aspect)), the first that fits (h < H, w < W) at a uniform place.
// The draws are ours (the per-example std::mt19937_64), not torch's.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "slimtorch/preprocessing/augment_ops.h"

namespace slimtorch {

struct AugmentStep {
  AugmentOp op = AugmentOp::kIdentity;
  double magnitude = 0.0;  // signed, as the policy passes it
};

// A box to erase (set to 0) in the net's input.
struct EraseBox {
  bool erase = false;
  int64_t y = 0, x = 0, h = 0, w = 0;
};

// One example's draws.
struct ExampleAugment {
  std::vector<AugmentStep> steps;
  EraseBox erase;
};

class Augmentation {
 public:
  // "" and 0: none (nullptr). Throws naming the flag on a value it does
  // not know.
  static std::shared_ptr<const Augmentation> Create(
      const std::string& auto_augment, double random_erase);

  // The draws for an image of height x width (after the crop): the
  // policy's, then the erasing's.
  ExampleAugment Draw(std::mt19937_64& rng, int64_t height,
                      int64_t width) const;
  bool has_policy() const { return kind_ != Kind::kNone; }
  double random_erase() const { return random_erase_; }
  // "rand-m9-n2, random_erase 0.25" for the logs.
  std::string Describe() const;

  // The policy's op table for an image of height x width (tests): each op
  // with its magnitudes by bin (empty: no magnitude) and whether signed.
  struct OpSpace {
    AugmentOp op;
    std::vector<double> magnitudes;
    bool signed_op;
  };
  std::vector<OpSpace> Space(int64_t height, int64_t width) const;
  // AutoAugment's sub-policies: (op, probability, bin or -1), two each.
  struct PolicyOp {
    AugmentOp op;
    double probability;
    int bin;
  };
  const std::vector<std::vector<PolicyOp>>& SubPolicies() const {
    return sub_policies_;
  }

 private:
  enum class Kind { kNone, kRandAugment, kTrivialAugmentWide, kAutoAugment };
  void DrawRandAugment(std::mt19937_64& rng, int64_t h, int64_t w,
                       ExampleAugment* out) const;
  void DrawTrivialAugment(std::mt19937_64& rng, int64_t h, int64_t w,
                          ExampleAugment* out) const;
  void DrawAutoAugment(std::mt19937_64& rng, int64_t h, int64_t w,
                       ExampleAugment* out) const;
  EraseBox DrawErase(std::mt19937_64& rng, int64_t h, int64_t w) const;

  Kind kind_ = Kind::kNone;
  std::string name_;
  int num_ops_ = 2;
  int magnitude_ = 9;
  int num_bins_ = 31;
  std::vector<std::vector<PolicyOp>> sub_policies_;
  double random_erase_ = 0.0;
};

// `image` (uint8 [C, H, W]) with the steps applied in order.
torch::Tensor ApplyAugmentSteps(const torch::Tensor& image,
                                const std::vector<AugmentStep>& steps);

// The policy's steps on a float batch [N, C, H, W] (CPU) of pixel values
// times `scale` (1: 0..255, 1/255: 0..1): each example with steps rounded
// to uint8, augmented, and back, in place; the others untouched.
// `augments[i]` is example i's (null: none).
void AugmentFloatBatch(torch::Tensor& images,
                       const std::vector<const ExampleAugment*>& augments,
                       double scale);

// Sets the drawn boxes of a float batch [N, C, H, W] to 0, in place.
void EraseBatch(torch::Tensor& images,
                const std::vector<const ExampleAugment*>& augments);

}  // namespace slimtorch
