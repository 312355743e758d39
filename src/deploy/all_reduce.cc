#include "slimtorch/deploy/all_reduce.h"

#include <map>
#include <utility>

#include "slimtorch/core/error.h"

#ifdef SLIMTORCH_WITH_C10D
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace slimtorch {

#ifdef SLIMTORCH_WITH_C10D

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  int rank = 0;
  int world_size = 1;
};

bool HaveProcessGroups() { return true; }

namespace {

// First line of a c10d / Gloo error (they append C++ backtraces).
std::string FirstLine(const std::exception& e) {
  std::string what = e.what();
  const size_t nl = what.find('\n');
  return nl == std::string::npos ? what : what.substr(0, nl);
}

std::shared_ptr<ProcessGroup::Impl> MakeGroup(
    c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
    const std::string& host, std::chrono::milliseconds timeout) {
  auto impl = std::make_shared<ProcessGroup::Impl>();
  impl->store = std::move(store);
  impl->rank = rank;
  impl->world_size = world_size;
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(
      host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                   : c10d::ProcessGroupGloo::createDeviceForHostname(host));
  options->threads = 2;
  try {
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        impl->store, rank, world_size, options);
  } catch (const std::exception& e) {
    SLIM_FAIL("process ", rank, " of ", world_size,
              " could not join the Gloo process group: ", FirstLine(e));
  }
  return impl;
}

}  // namespace

ProcessGroup ProcessGroup::Connect(const ClusterSpec& c,
                                   std::chrono::milliseconds timeout) {
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
                c.rank, c.world_size, host, timeout));
}

ProcessGroup ProcessGroup::ConnectFile(const std::string& path, int rank,
                                       int world_size,
                                       std::chrono::milliseconds timeout) {
  auto store = c10::make_intrusive<c10d::FileStore>(path, world_size);
  store->setTimeout(timeout);
  return ProcessGroup(MakeGroup(store, rank, world_size, "127.0.0.1", timeout));
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::world_size() const { return impl_->world_size; }

void ProcessGroup::AllReduceSum(std::vector<torch::Tensor>& tensors) {
  try {
    impl_->group->allreduce(tensors)->wait();
  } catch (const std::exception& e) {
    SLIM_FAIL("all-reduce across ", impl_->world_size,
              " processes failed on process ", impl_->rank, ": ", FirstLine(e),
              " (a process stopped or the network failed)");
  }
}

void ProcessGroup::Barrier() {
  try {
    impl_->group->barrier()->wait();
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

ProcessGroup ProcessGroup::Connect(const ClusterSpec&,
                                   std::chrono::milliseconds) {
  NoC10d();
}
ProcessGroup ProcessGroup::ConnectFile(const std::string&, int, int,
                                       std::chrono::milliseconds) {
  NoC10d();
}
int ProcessGroup::rank() const { return 0; }
int ProcessGroup::world_size() const { return 1; }
void ProcessGroup::AllReduceSum(std::vector<torch::Tensor>&) { NoC10d(); }
void ProcessGroup::Barrier() { NoC10d(); }

#endif  // SLIMTORCH_WITH_C10D

ProcessGroup::ProcessGroup(std::shared_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

AllReduceGradients::AllReduceGradients(ProcessGroup group, int64_t bucket_bytes)
    : group_(std::move(group)), bucket_bytes_(bucket_bytes) {
  SLIM_CHECK(bucket_bytes_ > 0, "bucket size must be positive");
}

bool AllReduceGradients::AgreeOnStop(bool local) {
  std::vector<torch::Tensor> flag = {torch::full({1}, local ? 1.0f : 0.0f)};
  group_.AllReduceSum(flag);
  return flag[0].item<float>() > 0;
}

void AllReduceGradients::Exchange(const NamedTensors& trainable) {
  torch::NoGradGuard no_grad;
  size_t i = 0;
  while (i < trainable.size()) {
    // One bucket: consecutive gradients of one dtype, up to bucket_bytes.
    std::vector<torch::Tensor> grads;
    int64_t bytes = 0;
    const auto dtype = trainable[i].tensor.grad().scalar_type();
    for (; i < trainable.size(); ++i) {
      const torch::Tensor g = trainable[i].tensor.grad();
      SLIM_CHECK(g.defined(), "variable ", trainable[i].name,
                 " has no gradient to exchange");
      if (g.scalar_type() != dtype ||
          (!grads.empty() && bytes + g.nbytes() > uint64_t(bucket_bytes_))) {
        break;
      }
      grads.push_back(g);
      bytes += g.nbytes();
    }
    std::vector<torch::Tensor> flat;
    flat.reserve(grads.size());
    for (const auto& g : grads) flat.push_back(g.reshape({-1}));
    std::vector<torch::Tensor> bucket = {torch::cat(flat)};
    group_.AllReduceSum(bucket);
    bucket[0].div_(group_.world_size());
    int64_t offset = 0;
    for (auto& g : grads) {
      const int64_t n = g.numel();
      g.copy_(bucket[0].narrow(0, offset, n).view(g.sizes()));
      offset += n;
    }
  }
}

}  // namespace slimtorch
