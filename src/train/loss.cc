#include "slimtorch/train/loss.h"

#include "slimtorch/core/error.h"

namespace slimtorch {

torch::Tensor SoftmaxCrossEntropy(const torch::Tensor& logits,
                                  const torch::Tensor& labels,
                                  double label_smoothing, double weight) {
  if (labels.dim() == 2 && labels.is_floating_point()) {
    SLIM_CHECK(labels.sizes() == logits.sizes(),
               "softmax_cross_entropy: "
               "logits ",
               logits.sizes(), " and soft targets ", labels.sizes(),
               " do not match");
    SLIM_CHECK(label_smoothing == 0.0,
               "soft targets hold their label "
               "smoothing already");
    const torch::Tensor loss =
        -(torch::log_softmax(logits, 1) * labels).sum(1).mean();
    return weight == 1.0 ? loss : loss.mul(weight);
  }
  SLIM_CHECK(logits.dim() == 2 && labels.dim() == 1 &&
                 logits.size(0) == labels.size(0),
             "softmax_cross_entropy: logits ", logits.sizes(), " and labels ",
             labels.sizes(), " do not match");
  SLIM_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
             "--label_smoothing must be in [0, 1], got ", label_smoothing);
  torch::Tensor logp = torch::log_softmax(logits, 1);
  torch::Tensor loss;
  if (label_smoothing == 0.0) {
    loss = torch::nll_loss(logp, labels);
  } else {
    const double k = static_cast<double>(logits.size(1));
    torch::Tensor picked = logp.gather(1, labels.unsqueeze(1)).squeeze(1);
    loss = -(picked.mul(1.0 - label_smoothing) +
             logp.sum(1).mul(label_smoothing / k))
                .mean();
  }
  return weight == 1.0 ? loss : loss.mul(weight);
}

}  // namespace slimtorch
