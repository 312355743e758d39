#pragma once
// Batch norm's training statistics across replicas (--sync_batch_norm;
// BatchNormImpl::cross_replica).

#include <torch/torch.h>

#include "slimtorch/nets/cross_replica_sum.h"

namespace slimtorch {
namespace nets {
namespace internal {

struct CrossReplicaStatistics {
  // (x - mean) / sqrt(variance + epsilon), in x's dtype; differentiable in
  // x through the global statistics.
  torch::Tensor normalized;
  // [C] float32, the global batch's mean and biased variance (no
  // gradient); count: [1], the values per channel over all replicas.
  torch::Tensor mean, variance, count;
};

// x: [N, C, ...] (channel dimension 1). The per-channel sums of every
// replica's x and counts are summed by `sum`, then the sums of squared
// deviations from the global mean (two passes, as LibTorch's batch norm);
// in the backward pass the sums of the gradient and of the gradient times
// the normalized values, so that the input gradient is the one of the
// whole global batch.
CrossReplicaStatistics CrossReplicaNormalize(const torch::Tensor& x,
                                             double epsilon,
                                             CrossReplicaSum& sum);

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
