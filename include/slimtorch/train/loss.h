#pragma once
// Losses as TF-Slim's slim.losses.softmax_cross_entropy.

#include <torch/torch.h>

namespace slimtorch {

// Mean over the batch of softmax cross entropy between `logits` [N, K] and
// integer `labels` [N] (one-hot), times `weight`. With label_smoothing > 0
// the one-hot targets become onehot * (1 - ls) + ls / K, as TF.
// `labels` may also be soft targets, float [N, K] (batch mixing): the mean
// of -sum(targets * log_softmax(logits)); their smoothing is in them
// already (label_smoothing must be 0).
torch::Tensor SoftmaxCrossEntropy(const torch::Tensor& logits,
                                  const torch::Tensor& labels,
                                  double label_smoothing = 0.0,
                                  double weight = 1.0);

}  // namespace slimtorch
