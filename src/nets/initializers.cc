#include "slimtorch/nets/initializers.h"

#include <algorithm>
#include <cmath>

namespace slimtorch {
namespace nets {

torch::Tensor TruncatedNormal(torch::IntArrayRef shape, double stddev) {
  // TensorFlow's sampler: standard normals, those beyond 2 redrawn until
  // none is left (4.6% per round), then scaled. Float32, in chunks that stay
  // in cache, so that a 100M-parameter net is drawn in about a second.
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::empty(shape, torch::kFloat32);
  torch::Tensor flat = x.view({-1});
  constexpr int64_t kChunk = int64_t{1} << 18;
  for (int64_t begin = 0; begin < flat.numel(); begin += kChunk) {
    torch::Tensor c =
        flat.narrow(0, begin, std::min(kChunk, flat.numel() - begin));
    c.normal_();
    for (;;) {
      torch::Tensor outside = c.abs() > 2.0f;
      const int64_t n = outside.sum().item<int64_t>();
      if (n == 0) break;
      c.masked_scatter_(outside, torch::empty({n}, torch::kFloat32).normal_());
    }
  }
  return x.mul_(stddev);
}

void Initialize(torch::Tensor& t, const Initializer& init, int64_t fan_in,
                int64_t fan_out) {
  torch::NoGradGuard no_grad;
  switch (init.kind) {
    case Initializer::Kind::kZeros:
      t.zero_();
      break;
    case Initializer::Kind::kConstant:
      t.fill_(init.value);
      break;
    case Initializer::Kind::kTruncatedNormal:
      t.copy_(TruncatedNormal(t.sizes(), init.value));
      break;
    case Initializer::Kind::kXavierUniform: {
      double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
      t.uniform_(-limit, limit);
      break;
    }
    case Initializer::Kind::kVarianceScaling: {
      // tf_slim's correction for truncation (not Keras' 0.8796).
      t.copy_(TruncatedNormal(
          t.sizes(),
          std::sqrt(1.3 * init.value / static_cast<double>(fan_in))));
      break;
    }
    case Initializer::Kind::kVarianceScalingFanOut: {
      t.copy_(TruncatedNormal(
          t.sizes(),
          std::sqrt(1.3 * init.value / static_cast<double>(fan_out))));
      break;
    }
  }
}

}  // namespace nets
}  // namespace slimtorch
