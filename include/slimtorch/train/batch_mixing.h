#pragma once
// Batch mixing (ours; timm's Mixup in its 'batch' mode): --mixup_alpha,
// --cutmix_alpha, --mix_prob, --mix_switch_prob. Each batch (each replica's
// slice, each micro-batch of --accumulate_gradients) is mixed with itself
// reversed: example i with example N-1-i.
//
//   with probability mix_prob the batch is mixed, else left alone (lam 1);
//   with both alphas > 0, cutmix with probability switch_prob, else mixup;
//   lam ~ Beta(alpha, alpha) of the method chosen;
//   mixup:  x = lam * x + (1 - lam) * flip(x)
//   cutmix: a box of int(H sqrt(1 - lam)) x int(W sqrt(1 - lam)) pixels
//           centred at (cy, cx), cy uniform in [0, H), cx in [0, W), rows
//           [cy - cut_h // 2, cy + (cut_h + 1) // 2) and the columns
//           likewise, clipped to the image (timm 1.0), takes flip(x)'s
//           pixels; lam becomes 1 - box area / (H W) (timm's correct_lam)
//   targets: lam * onehot(y) + (1 - lam) * onehot(flip(y)), with label
//            smoothing folded in: on = 1 - ls + ls / K, off = ls / K.
//
// The draws come from a generator seeded by (seed, replica, micro-batch
// number), so a resumed run mixes as the uninterrupted one did.

#include <torch/torch.h>

#include <cstdint>
#include <random>

namespace slimtorch {

struct MixOptions {
  double mixup_alpha = 0.0;
  double cutmix_alpha = 0.0;
  double mix_prob = 1.0;
  double switch_prob = 0.5;
  // --label_smoothing, folded into the soft targets.
  double label_smoothing = 0.0;

  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// Throws naming the flag on an option out of its range.
void CheckMixOptions(const MixOptions& options);

// One batch's draws.
struct MixDraws {
  bool cutmix = false;
  double lam = 1.0;        // as drawn (1: not mixed)
  int64_t cy = 0, cx = 0;  // cutmix: the box's centre
};

// The draws for a batch of height x width images, in timm's order: the
// mix coin, the method coin (both alphas > 0), the Beta draw, the centre's
// row, then its column.
MixDraws DrawMix(const MixOptions& options, int64_t height, int64_t width,
                 std::mt19937_64& rng);

// A batch mixed: the images and the soft targets [N, K] (float32).
struct MixedBatch {
  torch::Tensor images;
  torch::Tensor targets;
  double lam = 1.0;  // after cutmix's correction
};

// Mixes `images` [N, C, H, W] (float) and int64 `labels` [N] of
// `num_classes` with `draws` (a new images tensor; the input is not
// changed). Unmixed (lam 1) the images are returned as they are and the
// targets are the smoothed one-hot labels.
MixedBatch MixBatch(const torch::Tensor& images, const torch::Tensor& labels,
                    int64_t num_classes, const MixDraws& draws,
                    double label_smoothing);

// The generator of one micro-batch's draws.
std::mt19937_64 MixGenerator(uint64_t seed, int64_t replica,
                             int64_t micro_batch);

}  // namespace slimtorch
