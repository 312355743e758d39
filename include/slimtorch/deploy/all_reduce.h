#pragma once
// Gradient averaging across the processes of a data-parallel job on
// PyTorch's own distributed engine, c10d: a store rendezvous (TCPStore, or
// FileStore) and a Gloo process group (CPU tensors) or an NCCL one (CUDA
// tensors). Gloo is built when LibTorch ships c10d with Gloo's headers
// (Debian's libtorch-dev with libgloo-dev), NCCL with a CUDA LibTorch and
// nccl.h; otherwise connecting throws saying so.

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/deploy/cluster.h"
#include "slimtorch/train/gradient_exchange.h"

namespace slimtorch {

// Whether this build has c10d's Gloo process group (CPU tensors), and its
// NCCL one (CUDA tensors; a LibTorch with CUDA distributed support).
bool HaveProcessGroups();
bool HaveNccl();

// A connected c10d process group (pimpl: c10d and Gloo headers stay in
// src/deploy). Copies share the group.
class ProcessGroup {
 public:
  // Rank 0 serves a TCPStore at master_addr:master_port and the others
  // connect (under torchrun's agent store, cluster.agent_store, every
  // process connects to the agent's); each publishes its host, address and
  // pid and waits for all; all create one group: Gloo for CPU tensors (on
  // GLOO_SOCKET_IFNAME, else the interface that reaches the store), or NCCL
  // for tensors on the CUDA `device` (made this process's current device).
  // The rendezvous and every collective fail after `timeout` instead of
  // hanging. Errors name this replica and its host, the store's address,
  // the seconds really waited, and the likely cause: the replicas that
  // never joined, a port already taken, nothing serving the store.
  // While the group lives each process beats in the store every 0.5 s; a
  // failed collective names the replicas whose beat stopped (about 2 s
  // after the failure) or says the store itself is gone.
  static ProcessGroup Connect(const ClusterSpec& cluster,
                              std::chrono::milliseconds timeout,
                              torch::Device device = torch::kCPU);
  // The same through a c10d FileStore at `path` (processes or threads of
  // one machine; tests).
  static ProcessGroup ConnectFile(const std::string& path, int rank,
                                  int world_size,
                                  std::chrono::milliseconds timeout,
                                  torch::Device device = torch::kCPU);

  int rank() const;
  int world_size() const;
  // Sums `tensors` (contiguous, on the group's device) in place across the
  // group, waiting
  // for the result. Throws slimtorch::Error naming the group's failure
  // (a peer gone, a timeout).
  void AllReduceSum(std::vector<torch::Tensor>& tensors);
  struct Impl;
  // Starts the same without waiting: the sum is in `tensors` once Wait()
  // returns; the tensors must stay untouched until then.
  class Pending {
   public:
    Pending() = default;
    // Throws as AllReduceSum does; a default Pending returns at once.
    void Wait();

    struct Work;

   private:
    friend class ProcessGroup;
    std::shared_ptr<Work> work_;
    std::shared_ptr<Impl> group_;
  };
  Pending StartAllReduceSum(std::vector<torch::Tensor> tensors);
  void Barrier();

 private:
  explicit ProcessGroup(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// GradientExchange that averages every trainable gradient across the group,
// as DDP's reducer does: the trainable list, last variable first (about the
// order backward makes their gradients), is cut into buckets of one dtype
// and about `bucket_bytes` (the first one `first_bucket_bytes`, so that the
// all-reduce starts early). Once attached, a hook on each variable's
// gradient accumulator marks its gradient ready during backward; a bucket
// whose gradients are all ready is packed into its flat buffer and its
// all-reduce (sum) started at once, in bucket order (every process starts
// the same collectives in the same order), while backward goes on.
// Exchange() starts the buckets still waiting (variables backward did not
// reach), waits for all, divides by the world size and unpacks. Without
// Attach, Exchange does all of it after backward. Every process must pass
// the same variables in the same order.
class AllReduceGradients : public GradientExchange {
 public:
  explicit AllReduceGradients(ProcessGroup group,
                              int64_t bucket_bytes = int64_t{25} << 20,
                              int64_t first_bucket_bytes = int64_t{1} << 20);
  ~AllReduceGradients() override;
  void Attach(const NamedTensors& trainable) override;
  void Exchange(const NamedTensors& trainable) override;
  void AccumulateOnly(bool on) override { accumulate_only_ = on; }
  void ShareLoss(const torch::Tensor& loss) override { loss_ = loss.detach(); }
  std::vector<double> ReplicaLosses() const override { return losses_; }
  // Before the first Exchange: one all-reduce of the stop requests. Later,
  // the answer of the last Exchange, which all-reduces the replicas' losses
  // and the stop requests seen so far with the gradients' last bucket.
  bool AgreeOnStop(bool local) override;
  // The group's all-reduce (sum), waited for.
  bool SumAcrossReplicas(std::vector<torch::Tensor>& tensors) override {
    group_.AllReduceSum(tensors);
    return true;
  }

  // Buckets of the last Exchange whose all-reduce started during backward
  // (overlapped), and all buckets.
  int overlapped_buckets() const { return overlapped_; }
  int num_buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> vars;  // indices into vars_
    torch::Tensor flat;
    ProcessGroup::Pending pending;
    int waiting = 0;  // gradients not ready yet
    bool started = false;
  };
  void Plan(const NamedTensors& trainable);
  void GradReady(size_t var);
  // Starts the buckets ready in order from next_bucket_.
  void StartReadyBuckets();
  void StartBucket(Bucket& bucket);
  void ResetStep();

  struct GradHook;
  ProcessGroup group_;
  int64_t bucket_bytes_;
  int64_t first_bucket_bytes_;
  NamedTensors vars_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // var -> bucket
  std::vector<char> ready_;        // per var, this step
  size_t next_bucket_ = 0;
  torch::Device device_ = torch::kCPU;  // of the variables
  torch::Tensor loss_;  // this step's, as given to ShareLoss
  std::vector<double> losses_;
  bool stop_seen_ = false;  // a local stop request, not yet shared
  bool stop_agreed_ = false;
  bool exchanged_ = false;
  bool in_backward_ = false;
  bool accumulate_only_ = false;  // AccumulateOnly: hooks stand aside
  int overlapped_ = 0;      // of the last Exchange
  int overlapped_now_ = 0;  // of the step in progress
  // Keep the accumulators (and their hooks) alive across steps: a leaf
  // holds its own only weakly. (std::shared_ptr in LibTorch 1.x and early
  // 2.x, c10::intrusive_ptr in later ones.)
  using NodePtr = decltype(torch::autograd::impl::grad_accumulator(
      std::declval<const torch::Tensor&>()));
  std::vector<NodePtr> accumulators_;
  std::vector<uintptr_t> hook_keys_;  // removed again on destruction
};

}  // namespace slimtorch
