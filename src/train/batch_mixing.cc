#include "slimtorch/train/batch_mixing.h"

#include <algorithm>
#include <cmath>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// Uniform in [0, 1) from the top 53 bits.
double Uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Gamma(shape, 1) by Marsaglia and Tsang (shape >= 1; smaller shapes by
// the boost Gamma(a) = Gamma(a + 1) * U^(1/a)), normals by Box-Muller: a
// fixed sequence of draws from `rng`, the same on every standard library.
double Gamma(double shape, std::mt19937_64& rng) {
  if (shape < 1.0) {
    const double boost = std::pow(1.0 - Uniform(rng), 1.0 / shape);
    return Gamma(shape + 1.0, rng) * boost;
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double u1 = 1.0 - Uniform(rng);
    const double u2 = Uniform(rng);
    const double z =
        std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    const double v = std::pow(1.0 + c * z, 3);
    if (v <= 0) continue;
    const double u = 1.0 - Uniform(rng);
    if (std::log(u) < 0.5 * z * z + d - d * v + d * std::log(v)) return d * v;
  }
}

double Beta(double alpha, std::mt19937_64& rng) {
  const double x = Gamma(alpha, rng);
  const double y = Gamma(alpha, rng);
  return x / (x + y);
}

int64_t UniformInt(int64_t n, std::mt19937_64& rng) {
  return std::min<int64_t>(
      n - 1, static_cast<int64_t>(Uniform(rng) * static_cast<double>(n)));
}

// The smoothed one-hot targets of `labels`.
torch::Tensor OneHot(const torch::Tensor& labels, int64_t num_classes,
                     double smoothing) {
  const double off = smoothing / static_cast<double>(num_classes);
  const double on = 1.0 - smoothing + off;
  return torch::full({labels.size(0), num_classes}, off,
                     torch::dtype(torch::kFloat32).device(labels.device()))
      .scatter_(1, labels.unsqueeze(1), on);
}

}  // namespace

void CheckMixOptions(const MixOptions& o) {
  SLIM_CHECK(o.mixup_alpha >= 0 && o.cutmix_alpha >= 0,
             "--mixup_alpha and --cutmix_alpha must be >= 0 (0: off), got ",
             o.mixup_alpha, " and ", o.cutmix_alpha);
  SLIM_CHECK(o.mix_prob >= 0 && o.mix_prob <= 1,
             "--mix_prob must be in [0, 1], got ", o.mix_prob);
  SLIM_CHECK(o.switch_prob >= 0 && o.switch_prob <= 1,
             "--mix_switch_prob must be in [0, 1], got ", o.switch_prob);
  SLIM_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1,
             "--label_smoothing must be in [0, 1], got ", o.label_smoothing);
}

MixDraws DrawMix(const MixOptions& o, int64_t height, int64_t width,
                 std::mt19937_64& rng) {
  MixDraws d;
  if (!o.enabled() || !(Uniform(rng) < o.mix_prob)) return d;
  if (o.mixup_alpha > 0 && o.cutmix_alpha > 0) {
    d.cutmix = Uniform(rng) < o.switch_prob;
  } else {
    d.cutmix = o.cutmix_alpha > 0;
  }
  d.lam = Beta(d.cutmix ? o.cutmix_alpha : o.mixup_alpha, rng);
  if (d.cutmix) {
    d.cy = UniformInt(height, rng);
    d.cx = UniformInt(width, rng);
  }
  return d;
}

MixedBatch MixBatch(const torch::Tensor& images, const torch::Tensor& labels,
                    int64_t num_classes, const MixDraws& d,
                    double label_smoothing) {
  SLIM_CHECK(images.dim() == 4 && labels.dim() == 1 &&
                 images.size(0) == labels.size(0),
             "batch mixing: images ", images.sizes(), " and labels ",
             labels.sizes(), " do not match");
  MixedBatch m;
  m.images = images;
  m.lam = d.lam;
  const torch::Tensor y = OneHot(labels, num_classes, label_smoothing);
  if (d.lam == 1.0) {
    m.targets = y;
    return m;
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor flipped = images.flip(0);
  if (d.cutmix) {
    const int64_t h = images.size(2), w = images.size(3);
    const double ratio = std::sqrt(1.0 - d.lam);
    const auto cut_h = static_cast<int64_t>(static_cast<double>(h) * ratio);
    const auto cut_w = static_cast<int64_t>(static_cast<double>(w) * ratio);
    const int64_t y0 = std::clamp<int64_t>(d.cy - cut_h / 2, 0, h);
    const int64_t y1 = std::clamp<int64_t>(d.cy + (cut_h + 1) / 2, 0, h);
    const int64_t x0 = std::clamp<int64_t>(d.cx - cut_w / 2, 0, w);
    const int64_t x1 = std::clamp<int64_t>(d.cx + (cut_w + 1) / 2, 0, w);
    m.images = images.clone();
    m.images.narrow(2, y0, y1 - y0)
        .narrow(3, x0, x1 - x0)
        .copy_(flipped.narrow(2, y0, y1 - y0).narrow(3, x0, x1 - x0));
    m.lam = 1.0 - static_cast<double>((y1 - y0) * (x1 - x0)) /
                      static_cast<double>(h * w);
  } else {
    m.images = images * d.lam + flipped * (1.0 - d.lam);
  }
  m.targets = y * m.lam + y.flip(0) * (1.0 - m.lam);
  return m;
}

std::mt19937_64 MixGenerator(uint64_t seed, int64_t replica,
                             int64_t micro_batch) {
  std::seed_seq seq{
      static_cast<uint32_t>(seed),
      static_cast<uint32_t>(seed >> 32),
      static_cast<uint32_t>(replica),
      0x4D495855u /* "MIXU" */,
      static_cast<uint32_t>(micro_batch),
      static_cast<uint32_t>(static_cast<uint64_t>(micro_batch) >> 32)};
  return std::mt19937_64(seq);
}

}  // namespace slimtorch
