#pragma once
// The seam through which layers combine values across the replicas of a
// data-parallel job (--sync_batch_norm's statistics), with nothing of
// deploy's in nets.

#include <torch/torch.h>

#include <vector>

namespace slimtorch {
namespace nets {

// Sums tensors in place across the replicas (the trainer implements it with
// the gradient exchange's process group). Every replica makes the same
// calls in the same order.
class CrossReplicaSum {
 public:
  virtual ~CrossReplicaSum() = default;
  virtual void Sum(std::vector<torch::Tensor>& tensors) = 0;
};

}  // namespace nets
}  // namespace slimtorch
