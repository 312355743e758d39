#include "slimtorch/deploy/all_reduce.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <signal.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "slimtorch/core/error.h"

#ifdef SLIMTORCH_WITH_C10D
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#ifdef SLIMTORCH_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef SLIMTORCH_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace slimtorch {

#ifdef SLIMTORCH_WITH_C10D

// c10d::ProcessGroup::Work in LibTorch 1.x, c10d::Work in 2.x.
#ifdef SLIMTORCH_WITH_GLOO
using AnyGroup = c10d::ProcessGroupGloo;
#else
using AnyGroup = c10d::ProcessGroupNCCL;
#endif
using WorkPtr = decltype(std::declval<AnyGroup&>().allreduce(
    std::declval<std::vector<at::Tensor>&>()));

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  // The backend's collectives (Gloo or NCCL, whose common base class
  // differs between LibTorch versions); they hold the group.
  std::function<WorkPtr(std::vector<at::Tensor>&)> allreduce;
  std::function<WorkPtr()> barrier;
  const char* backend = "Gloo";
  int rank = 0;
  int world_size = 1;
};

#ifdef SLIMTORCH_WITH_GLOO
bool HaveProcessGroups() { return true; }
#else
bool HaveProcessGroups() { return false; }
#endif

#ifdef SLIMTORCH_WITH_NCCL
bool HaveNccl() { return true; }
#else
bool HaveNccl() { return false; }
#endif

namespace {

// First line of a c10d / Gloo error (they append C++ backtraces).
std::string FirstLine(const std::exception& e) {
  std::string what = e.what();
  const size_t nl = what.find('\n');
  return nl == std::string::npos ? what : what.substr(0, nl);
}

template <typename Group>
void SetCollectives(ProcessGroup::Impl* impl, c10::intrusive_ptr<Group> g) {
  impl->allreduce = [g](std::vector<at::Tensor>& t) { return g->allreduce(t); };
  impl->barrier = [g] { return g->barrier(); };
}

// A Gloo group (CPU tensors), or on a CUDA device an NCCL group.
std::shared_ptr<ProcessGroup::Impl> MakeGroup(
    c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
    const std::string& host, std::chrono::milliseconds timeout,
    torch::Device device) {
  // A peer that goes away mid-collective must surface as an error naming
  // the all-reduce, not as SIGPIPE killing this process on the next write.
  ::signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_shared<ProcessGroup::Impl>();
  impl->store = std::move(store);
  impl->rank = rank;
  impl->world_size = world_size;
  try {
    if (device.is_cuda()) {
#ifdef SLIMTORCH_WITH_NCCL
      impl->backend = "NCCL";
      c10::cuda::set_device(device.has_index() ? device.index() : 0);
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      SetCollectives(impl.get(), c10::make_intrusive<c10d::ProcessGroupNCCL>(
                                     impl->store, rank, world_size, options));
#else
      SLIM_FAIL("process ", rank, " of ", world_size, " trains on ", device,
                " but this slimtorch was built without NCCL (a LibTorch "
                "without CUDA distributed support): add --clone_on_cpu to "
                "train the replicas on CPUs over Gloo");
#endif
    } else {
#ifdef SLIMTORCH_WITH_GLOO
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices.push_back(
          host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                       : c10d::ProcessGroupGloo::createDeviceForHostname(host));
      options->threads = 2;
      SetCollectives(impl.get(), c10::make_intrusive<c10d::ProcessGroupGloo>(
                                     impl->store, rank, world_size, options));
#else
      (void)host;
      SLIM_FAIL("process ", rank, " of ", world_size,
                " trains on the CPU but this slimtorch was built without "
                "c10d's Gloo process group (no gloo headers; libgloo-dev)");
#endif
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    SLIM_FAIL("process ", rank, " of ", world_size, " could not join the ",
              impl->backend, " process group: ", FirstLine(e));
  }
  return impl;
}

}  // namespace

ProcessGroup ProcessGroup::Connect(const ClusterSpec& c,
                                   std::chrono::milliseconds timeout,
                                   torch::Device device) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(c.master_port);
  opts.isServer = c.rank == 0;
  opts.numWorkers = c.world_size;
  opts.waitWorkers = true;
  opts.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(c.master_addr, opts);
  } catch (const std::exception& e) {
    SLIM_FAIL("process ", c.rank, " of ", c.world_size, ": no rendezvous at ",
              c.master_addr, ":", c.master_port, " within ", timeout.count(),
              " ms (", FirstLine(e),
              "); is every process started, with the same MASTER_ADDR and "
              "MASTER_PORT?");
  }
  // Gloo binds to the address this host reaches the master by.
  const std::string host =
      c.master_addr == "127.0.0.1" || c.master_addr == "localhost" ? "127.0.0.1"
                                                                   : "";
  return ProcessGroup(
      MakeGroup(c10::make_intrusive<c10d::PrefixStore>("slimtorch", store),
                c.rank, c.world_size, host, timeout, device));
}

ProcessGroup ProcessGroup::ConnectFile(const std::string& path, int rank,
                                       int world_size,
                                       std::chrono::milliseconds timeout,
                                       torch::Device device) {
  auto store = c10::make_intrusive<c10d::FileStore>(path, world_size);
  store->setTimeout(timeout);
  return ProcessGroup(
      MakeGroup(store, rank, world_size, "127.0.0.1", timeout, device));
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::world_size() const { return impl_->world_size; }

void ProcessGroup::AllReduceSum(std::vector<torch::Tensor>& tensors) {
  try {
    impl_->allreduce(tensors)->wait();
  } catch (const std::exception& e) {
    SLIM_FAIL(impl_->backend, " all-reduce across ", impl_->world_size,
              " processes failed on process ", impl_->rank, ": ", FirstLine(e),
              " (a process stopped or the network failed)");
  }
}

struct ProcessGroup::Pending::Work {
  WorkPtr work;
  std::vector<torch::Tensor> tensors;  // kept alive while in flight
};

ProcessGroup::Pending ProcessGroup::StartAllReduceSum(
    std::vector<torch::Tensor> tensors) {
  Pending pending;
  pending.group_ = impl_;
  pending.work_ = std::make_shared<Pending::Work>();
  pending.work_->tensors = std::move(tensors);
  try {
    pending.work_->work = impl_->allreduce(pending.work_->tensors);
  } catch (const std::exception& e) {
    SLIM_FAIL(impl_->backend, " all-reduce across ", impl_->world_size,
              " processes failed on process ", impl_->rank, ": ", FirstLine(e),
              " (a process stopped or the network failed)");
  }
  return pending;
}

void ProcessGroup::Pending::Wait() {
  if (!work_) return;
  auto work = std::move(work_);
  try {
    work->work->wait();
  } catch (const std::exception& e) {
    SLIM_FAIL(group_->backend, " all-reduce across ", group_->world_size,
              " processes failed on process ", group_->rank, ": ", FirstLine(e),
              " (a process stopped or the network failed)");
  }
}

void ProcessGroup::Barrier() {
  try {
    impl_->barrier()->wait();
  } catch (const std::exception& e) {
    SLIM_FAIL("barrier across ", impl_->world_size,
              " processes failed on process ", impl_->rank, ": ", FirstLine(e));
  }
}

#else  // !SLIMTORCH_WITH_C10D

struct ProcessGroup::Impl {};

bool HaveProcessGroups() { return false; }

namespace {
[[noreturn]] void NoC10d() {
  SLIM_FAIL(
      "this slimtorch was built without c10d's Gloo process group (LibTorch "
      "without distributed support, or no gloo headers): multi-process "
      "training is not available");
}
}  // namespace

bool HaveNccl() { return false; }

ProcessGroup ProcessGroup::Connect(const ClusterSpec&,
                                   std::chrono::milliseconds, torch::Device) {
  NoC10d();
}
ProcessGroup ProcessGroup::ConnectFile(const std::string&, int, int,
                                       std::chrono::milliseconds,
                                       torch::Device) {
  NoC10d();
}
int ProcessGroup::rank() const { return 0; }
int ProcessGroup::world_size() const { return 1; }
void ProcessGroup::AllReduceSum(std::vector<torch::Tensor>&) { NoC10d(); }
struct ProcessGroup::Pending::Work {};
ProcessGroup::Pending ProcessGroup::StartAllReduceSum(
    std::vector<torch::Tensor>) {
  NoC10d();
}
void ProcessGroup::Pending::Wait() {}
void ProcessGroup::Barrier() { NoC10d(); }

#endif  // SLIMTORCH_WITH_C10D

ProcessGroup::ProcessGroup(std::shared_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

// Marks its variable's gradient ready once the accumulator has stored it.
struct AllReduceGradients::GradHook : torch::autograd::FunctionPostHook {
  GradHook(AllReduceGradients* owner, size_t var) : owner(owner), var(var) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    owner->GradReady(var);
    return outputs;
  }
  AllReduceGradients* owner;
  size_t var;
};

AllReduceGradients::AllReduceGradients(ProcessGroup group, int64_t bucket_bytes,
                                       int64_t first_bucket_bytes)
    : group_(std::move(group)),
      bucket_bytes_(bucket_bytes),
      first_bucket_bytes_(first_bucket_bytes) {
  SLIM_CHECK(bucket_bytes_ > 0 && first_bucket_bytes_ > 0,
             "bucket sizes must be positive");
}

AllReduceGradients::~AllReduceGradients() {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
  // A bucket in flight must not outlive its buffers' users.
  for (auto& b : buckets_) {
    try {
      b.pending.Wait();
    } catch (const Error&) {
    }
  }
}

bool AllReduceGradients::AgreeOnStop(bool local) {
  stop_seen_ = stop_seen_ || local;
  if (exchanged_) return stop_agreed_;
  std::vector<torch::Tensor> flag = {torch::full(
      {1}, local ? 1.0f : 0.0f, torch::dtype(torch::kFloat).device(device_))};
  group_.AllReduceSum(flag);
  return flag[0].item<float>() > 0;
}

void AllReduceGradients::Plan(const NamedTensors& trainable) {
  vars_ = trainable;
  // Where the small collectives go too (NCCL takes only CUDA tensors).
  device_ = vars_.empty() ? torch::Device(torch::kCPU)
                          : vars_.front().tensor.device();
  buckets_.clear();
  bucket_of_.assign(vars_.size(), 0);
  ready_.assign(vars_.size(), 0);
  // Last variable first; a new bucket at a dtype change or when full (the
  // first bucket at first_bucket_bytes).
  int64_t bytes = 0;
  for (size_t k = vars_.size(); k-- > 0;) {
    const torch::Tensor& v = vars_[k].tensor;
    const auto n = static_cast<int64_t>(v.nbytes());
    if (buckets_.empty() ||
        vars_[buckets_.back().vars.front()].tensor.scalar_type() !=
            v.scalar_type() ||
        bytes + n >
            (buckets_.size() == 1 ? first_bucket_bytes_ : bucket_bytes_)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().vars.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += n;
  }
  for (auto& b : buckets_) {
    int64_t numel = 0;
    for (size_t k : b.vars) numel += vars_[k].tensor.numel();
    b.flat = torch::empty(
        {numel}, vars_[b.vars.front()].tensor.options().requires_grad(false));
  }
  ResetStep();
}
void AllReduceGradients::Attach(const NamedTensors& trainable) {
  SLIM_CHECK(accumulators_.empty(), "gradient exchange attached twice");
  Plan(trainable);
  for (size_t k = 0; k < vars_.size(); ++k) {
    const torch::Tensor& v = vars_[k].tensor;
    SLIM_CHECK(v.is_leaf() && v.requires_grad(), "variable ", vars_[k].name,
               " is not a trainable leaf");
    NodePtr acc = torch::autograd::impl::grad_accumulator(v);
    hook_keys_.push_back(
        acc->add_post_hook(std::make_unique<GradHook>(this, k)));
    accumulators_.push_back(std::move(acc));
  }
}

void AllReduceGradients::ResetStep() {
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& b : buckets_) {
    b.waiting = static_cast<int>(b.vars.size());
    b.started = false;
  }
  next_bucket_ = 0;
  in_backward_ = true;
  overlapped_now_ = 0;
}

void AllReduceGradients::GradReady(size_t var) {
  // Backward outside a training step (none in slimtorch) leaves the
  // exchange alone.
  if (!in_backward_ || accumulate_only_ || ready_[var]) return;
  ready_[var] = 1;
  --buckets_[bucket_of_[var]].waiting;
  StartReadyBuckets();
}

void AllReduceGradients::StartReadyBuckets() {
  while (next_bucket_ < buckets_.size() &&
         buckets_[next_bucket_].waiting == 0) {
    StartBucket(buckets_[next_bucket_]);
    if (in_backward_) ++overlapped_now_;
    ++next_bucket_;
  }
}

void AllReduceGradients::StartBucket(Bucket& b) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t k : b.vars) {
    const torch::Tensor g = vars_[k].tensor.grad();
    SLIM_CHECK(g.defined(), "variable ", vars_[k].name,
               " has no gradient to exchange");
    const int64_t n = g.numel();
    b.flat.narrow(0, offset, n).view(g.sizes()).copy_(g);
    offset += n;
  }
  b.pending = group_.StartAllReduceSum({b.flat});
  b.started = true;
}

void AllReduceGradients::Exchange(const NamedTensors& trainable) {
  torch::NoGradGuard no_grad;
  bool same = trainable.size() == vars_.size();
  for (size_t k = 0; same && k < vars_.size(); ++k) {
    same = trainable[k].tensor.is_same(vars_[k].tensor);
  }
  if (!same) {
    SLIM_CHECK(accumulators_.empty(),
               "Exchange got other variables than those attached");
    Plan(trainable);
  }
  // Backward is over: what it did not reach goes now, in order.
  in_backward_ = false;
  for (auto& b : buckets_) b.waiting = 0;
  StartReadyBuckets();
  // The replicas' losses, each in its slot, and the stop requests.
  const int world_size = group_.world_size();
  torch::Tensor meta = torch::zeros({world_size + 1}, torch::kDouble);
  meta[world_size] = stop_seen_ ? 1.0 : 0.0;
  meta = meta.to(device_);
  if (loss_.defined()) {
    meta.narrow(0, group_.rank(), 1).copy_(loss_.reshape({1}));
  }
  ProcessGroup::Pending meta_pending = group_.StartAllReduceSum({meta});
  const double world = world_size;
  for (auto& b : buckets_) {
    b.pending.Wait();
    b.flat.div_(world);
    int64_t offset = 0;
    for (size_t k : b.vars) {
      torch::Tensor g = vars_[k].tensor.grad();
      const int64_t n = g.numel();
      g.copy_(b.flat.narrow(0, offset, n).view(g.sizes()));
      offset += n;
    }
  }
  meta_pending.Wait();
  meta = meta.cpu();
  losses_.assign(meta.data_ptr<double>(), meta.data_ptr<double>() + world_size);
  stop_agreed_ = meta[world_size].item<double>() > 0;
  exchanged_ = true;
  overlapped_ = overlapped_now_;
  ResetStep();
}

}  // namespace slimtorch
