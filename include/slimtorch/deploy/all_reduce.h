#pragma once
// Gradient averaging across the processes of a data-parallel job on
// PyTorch's own distributed engine, c10d: a store rendezvous (TCPStore, or
// FileStore) and a Gloo process group (CPU tensors). Built when LibTorch
// ships c10d with Gloo (Debian's libtorch-dev with libgloo-dev does);
// otherwise connecting throws saying so.

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "slimtorch/deploy/cluster.h"
#include "slimtorch/train/trainer.h"

namespace slimtorch {

// Whether this build has c10d's Gloo process group.
bool HaveProcessGroups();

// A connected c10d process group (pimpl: c10d and Gloo headers stay in
// src/deploy). Copies share the group.
class ProcessGroup {
 public:
  // Rank 0 serves a TCPStore at master_addr:master_port, the others
  // connect; all create one Gloo group. The rendezvous and every collective
  // fail after `timeout` instead of hanging.
  static ProcessGroup Connect(const ClusterSpec& cluster,
                              std::chrono::milliseconds timeout);
  // The same through a c10d FileStore at `path` (processes or threads of
  // one machine; tests).
  static ProcessGroup ConnectFile(const std::string& path, int rank,
                                  int world_size,
                                  std::chrono::milliseconds timeout);

  int rank() const;
  int world_size() const;
  // Sums `tensors` (CPU, contiguous) in place across the group, waiting
  // for the result. Throws slimtorch::Error naming the group's failure
  // (a peer gone, a timeout).
  void AllReduceSum(std::vector<torch::Tensor>& tensors);
  void Barrier();

  struct Impl;

 private:
  explicit ProcessGroup(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// GradientExchange that averages every trainable gradient across the group:
// gradients are packed, in the fixed order of the trainable list, into
// buckets of about `bucket_bytes` (one dtype per bucket), each bucket is
// all-reduced (sum) and divided by the world size, and unpacked. Every
// process must pass the same variables in the same order.
class AllReduceGradients : public GradientExchange {
 public:
  explicit AllReduceGradients(ProcessGroup group,
                              int64_t bucket_bytes = int64_t{25} << 20);
  void Exchange(const NamedTensors& trainable) override;
  // One all-reduce of the stop requests.
  bool AgreeOnStop(bool local) override;

 private:
  ProcessGroup group_;
  int64_t bucket_bytes_;
};

}  // namespace slimtorch
