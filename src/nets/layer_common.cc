#include "slimtorch/nets/layer_common.h"

#include <algorithm>

namespace slimtorch {
namespace nets {

std::array<int64_t, 4> SamePadding(int64_t in_h, int64_t in_w, int64_t kh,
                                   int64_t kw, int64_t stride) {
  auto total = [stride](int64_t in, int64_t k) {
    int64_t out = (in + stride - 1) / stride;
    return std::max<int64_t>((out - 1) * stride + k - in, 0);
  };
  int64_t th = total(in_h, kh);
  int64_t tw = total(in_w, kw);
  return {th / 2, th - th / 2, tw / 2, tw - tw / 2};
}

torch::Tensor Regularized::RegularizationLoss() const {
  torch::Tensor loss;
  for (const auto& [v, c] : L2Variables()) {
    torch::Tensor term = v.pow(2).sum().mul(0.5 * c);
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

}  // namespace nets
}  // namespace slimtorch
