#pragma once
// The trainer's seam for data-parallel deployment (deploy/all_reduce.h
// implements it; TrainOptions::gradient_exchange takes it), apart from the
// trainer so that an exchange needs none of the trainer's headers.

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/nets/cross_replica_sum.h"

namespace slimtorch {

// Combines the trainable variables' gradients across replicas between the
// backward pass and the update (data-parallel deployment). Without one,
// training is one replica's.
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  // Once, before the first step, with the variables Exchange will get: an
  // exchange may hook into the backward pass to start combining gradients
  // while backward still runs.
  virtual void Attach(const NamedTensors& trainable) {}
  // After backward (and before the L2 terms' gradients, which are the same
  // on every replica, are added): `trainable` in a fixed order; every
  // .grad() is defined.
  virtual void Exchange(const NamedTensors& trainable) = 0;
  // Before each backward: true while the gradients of a step's earlier
  // micro-batches (--accumulate_gradients) only add up locally; false for
  // the last, after which Exchange combines the sums.
  virtual void AccumulateOnly(bool on) {}
  // Before backward: this replica's loss of the step (without the L2
  // terms; a scalar tensor on the device, not read here so that the device
  // need not synchronise), shared with the others by Exchange.
  virtual void ShareLoss(const torch::Tensor& loss) {}
  // After Exchange: every replica's ShareLoss value, by replica (empty when
  // the exchange does not share them).
  virtual std::vector<double> ReplicaLosses() const { return {}; }
  // Called by every replica before each step with its own stop request:
  // true when any replica asks to stop, so that all stop after the same
  // step. An exchange may answer from the requests it shared in an earlier
  // Exchange (every replica gets the same answer; a request then takes one
  // step longer to arrive).
  virtual bool AgreeOnStop(bool local) { return local; }
  // Sums `tensors` in place across the replicas, now (--sync_batch_norm's
  // statistics, forward and backward); every replica makes the same calls
  // in the same order. False when this exchange cannot (nothing changed).
  virtual bool SumAcrossReplicas(std::vector<torch::Tensor>& tensors) {
    return false;
  }
};

// --sync_batch_norm's sum (the nets::CrossReplicaSum batch norm layers call
// forward and backward) through `exchange`'s SumAcrossReplicas; it throws
// when the exchange cannot sum. `exchange` must outlive it.
std::shared_ptr<nets::CrossReplicaSum> CrossReplicaSumOf(
    GradientExchange* exchange);

}  // namespace slimtorch
