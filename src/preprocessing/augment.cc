#include "slimtorch/preprocessing/augment.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// U[0, 1) from one generator output (53 bits).
double Uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1p-53;
}

// Uniform in [0, n).
int64_t UniformIndex(std::mt19937_64& rng, int64_t n) {
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

// torch.linspace(lo, hi, n) in float32 as PyTorch 2's CPU kernel computes
// the short tables here (n < 32, its scalar loop, compiled with FMA): the
// first half from lo, the second from hi, each one rounding. LibTorch 1.13
// differs in the last bit of some values, enough to move a solarize
// threshold or a truncated translation across an integer. As doubles.
std::vector<double> Linspace(double lo, double hi, int64_t n) {
  const auto start = static_cast<float>(lo);
  const auto end = static_cast<float>(hi);
  const float step = n > 1 ? (end - start) / static_cast<float>(n - 1) : 0.0f;
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = i < n / 2 ? std::fma(step, static_cast<float>(i), start)
                       : std::fma(-step, static_cast<float>(n - i - 1), end);
  }
  return out;
}

// (8 - arange(n) / ((n - 1) / levels)).round().int(): the posterize bits.
std::vector<double> PosterizeBits(int64_t n, double levels) {
  const torch::Tensor t =
      torch::rsub(torch::arange(n).div(static_cast<double>(n - 1) / levels), 8)
          .round()
          .to(torch::kInt)
          .to(torch::kDouble);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + n);
}

using PolicyOp = Augmentation::PolicyOp;

AugmentOp Op(const char* name) { return AugmentOpByName(name); }

// torchvision's AutoAugmentPolicy.IMAGENET, CIFAR10 and SVHN: two
// (op, probability, bin or -1) each.
struct PolicyRow {
  const char* op1;
  double p1;
  int bin1;
  const char* op2;
  double p2;
  int bin2;
};
const PolicyRow kImagenet[] = {
    {"Posterize", 0.4, 8, "Rotate", 0.6, 9},
    {"Solarize", 0.6, 5, "AutoContrast", 0.6, -1},
    {"Equalize", 0.8, -1, "Equalize", 0.6, -1},
    {"Posterize", 0.6, 7, "Posterize", 0.6, 6},
    {"Equalize", 0.4, -1, "Solarize", 0.2, 4},
    {"Equalize", 0.4, -1, "Rotate", 0.8, 8},
    {"Solarize", 0.6, 3, "Equalize", 0.6, -1},
    {"Posterize", 0.8, 5, "Equalize", 1.0, -1},
    {"Rotate", 0.2, 3, "Solarize", 0.6, 8},
    {"Equalize", 0.6, -1, "Posterize", 0.4, 6},
    {"Rotate", 0.8, 8, "Color", 0.4, 0},
    {"Rotate", 0.4, 9, "Equalize", 0.6, -1},
    {"Equalize", 0.0, -1, "Equalize", 0.8, -1},
    {"Invert", 0.6, -1, "Equalize", 1.0, -1},
    {"Color", 0.6, 4, "Contrast", 1.0, 8},
    {"Rotate", 0.8, 8, "Color", 1.0, 2},
    {"Color", 0.8, 8, "Solarize", 0.8, 7},
    {"Sharpness", 0.4, 7, "Invert", 0.6, -1},
    {"ShearX", 0.6, 5, "Equalize", 1.0, -1},
    {"Color", 0.4, 0, "Equalize", 0.6, -1},
    {"Equalize", 0.4, -1, "Solarize", 0.2, 4},
    {"Solarize", 0.6, 5, "AutoContrast", 0.6, -1},
    {"Invert", 0.6, -1, "Equalize", 1.0, -1},
    {"Color", 0.6, 4, "Contrast", 1.0, 8},
    {"Equalize", 0.8, -1, "Equalize", 0.6, -1},
};
const PolicyRow kCifar10[] = {
    {"Invert", 0.1, -1, "Contrast", 0.2, 6},
    {"Rotate", 0.7, 2, "TranslateX", 0.3, 9},
    {"Sharpness", 0.8, 1, "Sharpness", 0.9, 3},
    {"ShearY", 0.5, 8, "TranslateY", 0.7, 9},
    {"AutoContrast", 0.5, -1, "Equalize", 0.9, -1},
    {"ShearY", 0.2, 7, "Posterize", 0.3, 7},
    {"Color", 0.4, 3, "Brightness", 0.6, 7},
    {"Sharpness", 0.3, 9, "Brightness", 0.7, 9},
    {"Equalize", 0.6, -1, "Equalize", 0.5, -1},
    {"Contrast", 0.6, 7, "Sharpness", 0.6, 5},
    {"Color", 0.7, 7, "TranslateX", 0.5, 8},
    {"Equalize", 0.3, -1, "AutoContrast", 0.4, -1},
    {"TranslateY", 0.4, 3, "Sharpness", 0.2, 6},
    {"Brightness", 0.9, 6, "Color", 0.2, 8},
    {"Solarize", 0.5, 2, "Invert", 0.0, -1},
    {"Equalize", 0.2, -1, "AutoContrast", 0.6, -1},
    {"Equalize", 0.2, -1, "Equalize", 0.6, -1},
    {"Color", 0.9, 9, "Equalize", 0.6, -1},
    {"AutoContrast", 0.8, -1, "Solarize", 0.2, 8},
    {"Brightness", 0.1, 3, "Color", 0.7, 0},
    {"Solarize", 0.4, 5, "AutoContrast", 0.9, -1},
    {"TranslateY", 0.9, 9, "TranslateY", 0.7, 9},
    {"AutoContrast", 0.9, -1, "Solarize", 0.8, 3},
    {"Equalize", 0.8, -1, "Invert", 0.1, -1},
    {"TranslateY", 0.7, 9, "AutoContrast", 0.9, -1},
};
const PolicyRow kSvhn[] = {
    {"ShearX", 0.9, 4, "Invert", 0.2, -1},
    {"ShearY", 0.9, 8, "Invert", 0.7, -1},
    {"Equalize", 0.6, -1, "Solarize", 0.6, 6},
    {"Invert", 0.9, -1, "Equalize", 0.6, -1},
    {"Equalize", 0.6, -1, "Rotate", 0.9, 3},
    {"ShearX", 0.9, 4, "AutoContrast", 0.8, -1},
    {"ShearY", 0.9, 8, "Invert", 0.4, -1},
    {"ShearY", 0.9, 5, "Solarize", 0.2, 6},
    {"Invert", 0.9, -1, "AutoContrast", 0.8, -1},
    {"Equalize", 0.6, -1, "Rotate", 0.9, 3},
    {"ShearX", 0.9, 4, "Solarize", 0.3, 3},
    {"ShearY", 0.8, 8, "Invert", 0.7, -1},
    {"Equalize", 0.9, -1, "TranslateY", 0.6, 6},
    {"Invert", 0.9, -1, "Equalize", 0.6, -1},
    {"Contrast", 0.3, 3, "Rotate", 0.8, 4},
    {"Invert", 0.8, -1, "TranslateY", 0.0, 2},
    {"ShearY", 0.7, 6, "Solarize", 0.4, 8},
    {"Invert", 0.6, -1, "Rotate", 0.8, 4},
    {"ShearY", 0.3, 7, "TranslateX", 0.9, 3},
    {"ShearX", 0.1, 6, "Invert", 0.6, -1},
    {"Solarize", 0.7, 2, "TranslateY", 0.6, 7},
    {"ShearY", 0.8, 4, "Invert", 0.8, -1},
    {"ShearX", 0.7, 9, "TranslateY", 0.8, 3},
    {"ShearY", 0.8, 5, "AutoContrast", 0.7, -1},
    {"ShearX", 0.7, 2, "Invert", 0.1, -1},
};

// The sub-policies of --auto_augment=`name`.
std::vector<std::vector<PolicyOp>> SubPoliciesOf(const std::string& name) {
  const PolicyRow* rows = name == "autoaugment_imagenet"  ? kImagenet
                          : name == "autoaugment_cifar10" ? kCifar10
                                                          : kSvhn;
  std::vector<std::vector<PolicyOp>> out;
  for (int i = 0; i < 25; ++i) {
    const PolicyRow& r = rows[i];
    out.push_back({{Op(r.op1), r.p1, r.bin1}, {Op(r.op2), r.p2, r.bin2}});
  }
  return out;
}

// "rand-m9-n2": magnitude and number of ops; false if it is not one.
bool ParseRandAugment(const std::string& s, int* magnitude, int* num_ops) {
  if (s.rfind("rand-", 0) != 0) return false;
  char* end = nullptr;
  const char* p = s.c_str() + 5;
  if (*p != 'm') return false;
  *magnitude = static_cast<int>(std::strtol(p + 1, &end, 10));
  if (end == p + 1 || std::string(end, 2) != "-n") return false;
  p = end + 2;
  *num_ops = static_cast<int>(std::strtol(p, &end, 10));
  return end != p && *end == '\0';
}

}  // namespace

std::shared_ptr<const Augmentation> Augmentation::Create(
    const std::string& auto_augment, double random_erase) {
  SLIM_CHECK(random_erase >= 0 && random_erase <= 1,
             "--random_erase must be a probability in [0, 1], got ",
             random_erase);
  if (auto_augment.empty() && random_erase == 0) return nullptr;
  auto a = std::make_shared<Augmentation>();
  a->random_erase_ = random_erase;
  a->name_ = auto_augment;
  int magnitude = 0, num_ops = 0;
  if (auto_augment.empty()) {
    a->kind_ = Kind::kNone;
  } else if (ParseRandAugment(auto_augment, &magnitude, &num_ops)) {
    SLIM_CHECK(magnitude >= 0 && magnitude < a->num_bins_ && num_ops >= 0,
               "--auto_augment=", auto_augment,
               ": the magnitude must be in "
               "[0, 30] and the number of ops >= 0");
    a->kind_ = Kind::kRandAugment;
    a->magnitude_ = magnitude;
    a->num_ops_ = num_ops;
  } else if (auto_augment == "trivialaugment_wide") {
    a->kind_ = Kind::kTrivialAugmentWide;
  } else if (auto_augment == "autoaugment_imagenet" ||
             auto_augment == "autoaugment_cifar10" ||
             auto_augment == "autoaugment_svhn") {
    a->kind_ = Kind::kAutoAugment;
    a->sub_policies_ = SubPoliciesOf(auto_augment);
  } else {
    SLIM_FAIL("--auto_augment=", auto_augment,
              " is not one of rand-m<M>-n<N> "
              "(RandAugment, e.g. rand-m9-n2), trivialaugment_wide, "
              "autoaugment_imagenet, autoaugment_cifar10, autoaugment_svhn");
  }
  return a;
}

std::string Augmentation::Describe() const {
  std::ostringstream s;
  if (has_policy()) s << name_;
  if (random_erase_ > 0) {
    s << (has_policy() ? ", " : "") << "random_erase " << random_erase_;
  }
  return s.str();
}

std::vector<Augmentation::OpSpace> Augmentation::Space(int64_t height,
                                                       int64_t width) const {
  const bool wide = kind_ == Kind::kTrivialAugmentWide;
  const int64_t n = kind_ == Kind::kAutoAugment ? 10 : num_bins_;
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  const double shear = wide ? 0.99 : 0.3;
  const double color = wide ? 0.99 : 0.9;
  std::vector<OpSpace> s;
  if (kind_ != Kind::kAutoAugment)
    s.push_back({AugmentOp::kIdentity, {}, false});
  s.push_back({AugmentOp::kShearX, Linspace(0, shear, n), true});
  s.push_back({AugmentOp::kShearY, Linspace(0, shear, n), true});
  s.push_back({AugmentOp::kTranslateX,
               Linspace(0, wide ? 32.0 : 150.0 / 331.0 * w, n), true});
  s.push_back({AugmentOp::kTranslateY,
               Linspace(0, wide ? 32.0 : 150.0 / 331.0 * h, n), true});
  s.push_back({AugmentOp::kRotate, Linspace(0, wide ? 135.0 : 30.0, n), true});
  for (AugmentOp op : {AugmentOp::kBrightness, AugmentOp::kColor,
                       AugmentOp::kContrast, AugmentOp::kSharpness}) {
    s.push_back({op, Linspace(0, color, n), true});
  }
  s.push_back({AugmentOp::kPosterize, PosterizeBits(n, wide ? 6 : 4), false});
  s.push_back({AugmentOp::kSolarize, Linspace(1.0, 0.0, n), false});
  s.push_back({AugmentOp::kAutoContrast, {}, false});
  s.push_back({AugmentOp::kEqualize, {}, false});
  if (kind_ == Kind::kAutoAugment) s.push_back({AugmentOp::kInvert, {}, false});
  return s;
}

ExampleAugment Augmentation::Draw(std::mt19937_64& rng, int64_t height,
                                  int64_t width) const {
  ExampleAugment out;
  switch (kind_) {
    case Kind::kRandAugment:
      DrawRandAugment(rng, height, width, &out);
      break;
    case Kind::kTrivialAugmentWide:
      DrawTrivialAugment(rng, height, width, &out);
      break;
    case Kind::kAutoAugment:
      DrawAutoAugment(rng, height, width, &out);
      break;
    case Kind::kNone:
      break;
  }
  if (random_erase_ > 0) out.erase = DrawErase(rng, height, width);
  return out;
}

namespace {

// A magnitude of `space` at `bin`, its sign a coin when signed.
AugmentStep StepOf(const Augmentation::OpSpace& space, int64_t bin,
                   std::mt19937_64& rng) {
  AugmentStep step{space.op, 0.0};
  if (space.magnitudes.empty()) return step;
  step.magnitude = space.magnitudes[bin];
  if (space.signed_op && Uniform(rng) <= 0.5) step.magnitude = -step.magnitude;
  return step;
}

}  // namespace

void Augmentation::DrawRandAugment(std::mt19937_64& rng, int64_t h, int64_t w,
                                   ExampleAugment* out) const {
  const std::vector<OpSpace> space = Space(h, w);
  for (int i = 0; i < num_ops_; ++i) {
    const OpSpace& s = space[UniformIndex(rng, space.size())];
    out->steps.push_back(StepOf(s, magnitude_, rng));
  }
}

void Augmentation::DrawTrivialAugment(std::mt19937_64& rng, int64_t h,
                                      int64_t w, ExampleAugment* out) const {
  const std::vector<OpSpace> space = Space(h, w);
  const OpSpace& s = space[UniformIndex(rng, space.size())];
  const int64_t bin = s.magnitudes.empty() ? 0 : UniformIndex(rng, num_bins_);
  out->steps.push_back(StepOf(s, bin, rng));
}

void Augmentation::DrawAutoAugment(std::mt19937_64& rng, int64_t h, int64_t w,
                                   ExampleAugment* out) const {
  const std::vector<OpSpace> space = Space(h, w);
  const auto& policy = sub_policies_[UniformIndex(rng, sub_policies_.size())];
  for (const PolicyOp& p : policy) {
    if (!(Uniform(rng) <= p.probability)) continue;
    for (const OpSpace& s : space) {
      if (s.op == p.op) out->steps.push_back(StepOf(s, p.bin, rng));
    }
  }
}

EraseBox Augmentation::DrawErase(std::mt19937_64& rng, int64_t height,
                                 int64_t width) const {
  EraseBox box;
  if (!(Uniform(rng) < random_erase_)) return box;
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(0.3), log_hi = std::log(3.3);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * (0.02 + (0.33 - 0.02) * Uniform(rng));
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * Uniform(rng));
    const auto h =
        static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const auto w =
        static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    box.erase = true;
    box.h = h;
    box.w = w;
    box.y = UniformIndex(rng, height - h + 1);
    box.x = UniformIndex(rng, width - w + 1);
    break;
  }
  return box;
}

torch::Tensor ApplyAugmentSteps(const torch::Tensor& image,
                                const std::vector<AugmentStep>& steps) {
  torch::Tensor out = image;
  for (const AugmentStep& s : steps) {
    out = ApplyAugmentOp(out, s.op, s.magnitude);
  }
  return out;
}

void AugmentFloatBatch(torch::Tensor& images,
                       const std::vector<const ExampleAugment*>& augments,
                       double scale) {
  SLIM_CHECK(images.dim() == 4 &&
                 images.size(0) == static_cast<int64_t>(augments.size()),
             "AugmentFloatBatch: ", augments.size(),
             " augmentations for "
             "images ",
             images.sizes());
  for (size_t i = 0; i < augments.size(); ++i) {
    if (augments[i] == nullptr || augments[i]->steps.empty()) continue;
    torch::Tensor x = images[static_cast<int64_t>(i)];
    const torch::Tensor pixels =
        x.div(scale).round_().clamp_(0, 255).to(torch::kUInt8);
    x.copy_(ApplyAugmentSteps(pixels, augments[i]->steps)
                .to(torch::kFloat32)
                .mul_(scale));
  }
}

void EraseBatch(torch::Tensor& images,
                const std::vector<const ExampleAugment*>& augments) {
  SLIM_CHECK(images.dim() == 4 &&
                 images.size(0) == static_cast<int64_t>(augments.size()),
             "EraseBatch: ", augments.size(), " augmentations for images ",
             images.sizes());
  for (size_t i = 0; i < augments.size(); ++i) {
    if (augments[i] == nullptr || !augments[i]->erase.erase) continue;
    const EraseBox& b = augments[i]->erase;
    images[static_cast<int64_t>(i)]
        .narrow(1, b.y, b.h)
        .narrow(2, b.x, b.w)
        .zero_();
  }
}

}  // namespace slimtorch
