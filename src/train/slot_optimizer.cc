#include "slot_optimizer.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// v's strides when v is dense in some memory order (channels-last weights),
// else the contiguous ones.
std::vector<int64_t> DenseStrides(const torch::Tensor& v) {
  if (v.is_non_overlapping_and_dense()) return v.strides().vec();
  std::vector<int64_t> strides(v.dim());
  int64_t step = 1;
  for (int64_t d = v.dim() - 1; d >= 0; --d) {
    strides[d] = step;
    step *= std::max<int64_t>(v.size(d), 1);
  }
  return strides;
}

}  // namespace

namespace train_internal {

SlotOptimizer::SlotOptimizer(const char* name, NamedTensors variables,
                             std::vector<SlotSpec> slots, int num_scratch)
    : name_(name) {
  torch::NoGradGuard no_grad;
  std::set<std::string> seen;
  // Largest numel per (device, dtype); scratch of one group shares storage.
  std::map<std::string, int64_t> max_numel;
  auto group_of = [](const torch::Tensor& t) {
    return StrCat(t.device(), "/", t.scalar_type());
  };
  for (const NamedTensor& v : variables) {
    SLIM_CHECK(v.tensor.defined(), name, ": variable '", v.name,
               "' is undefined");
    SLIM_CHECK(v.tensor.is_floating_point(), name, ": variable '", v.name,
               "' has non-floating dtype ", v.tensor.scalar_type());
    SLIM_CHECK(seen.insert(v.name).second, name, ": variable '", v.name,
               "' given twice");
    int64_t& n = max_numel[group_of(v.tensor)];
    n = std::max(n, v.tensor.numel());
  }
  std::map<std::string, std::vector<torch::Tensor>> buffers;
  for (const NamedTensor& v : variables) {
    std::vector<torch::Tensor>& group = buffers[group_of(v.tensor)];
    if (group.empty()) {
      for (int i = 0; i < num_scratch; ++i) {
        group.push_back(torch::empty({max_numel[group_of(v.tensor)]},
                                     v.tensor.options()));
      }
    }
    SlotEntry e;
    e.name = v.name;
    e.var = v.tensor;
    for (const SlotSpec& spec : slots) {
      e.slots.push_back(torch::full_like(v.tensor, spec.init));
    }
    for (const torch::Tensor& buffer : group) {
      // In the variable's own memory order (channels-last weights too), so
      // the elementwise updates run over matching strides.
      e.scratch.push_back(
          buffer.narrow(0, 0, v.tensor.numel())
              .as_strided(v.tensor.sizes(), DenseStrides(v.tensor)));
    }
    e.zero = torch::zeros({}, v.tensor.options());
    entries_.push_back(std::move(e));
  }
  for (const SlotSpec& spec : slots) slot_suffixes_.push_back(spec.suffix);
}

void SlotOptimizer::Apply(double lr) {
  torch::NoGradGuard no_grad;
  const double lr32 = Float32(lr);
  bool prepared = false;
  for (SlotEntry& e : entries_) {
    const torch::Tensor& grad = e.var.grad();
    if (!grad.defined()) continue;
    SLIM_CHECK(!grad.is_sparse(), name_, ": sparse gradient for '", e.name,
               "' is not supported");
    SLIM_CHECK(grad.sizes() == e.var.sizes(), name_, ": gradient of '",
               e.name, "' has shape ", grad.sizes(), ", expected ",
               e.var.sizes());
    if (!prepared) {
      Prepare();
      prepared = true;
    }
    Update(e, grad, lr32);
  }
  if (prepared) Finish();
}

NamedTensors SlotOptimizer::State() const {
  NamedTensors state;
  for (const SlotEntry& e : entries_) {
    for (size_t i = 0; i < e.slots.size(); ++i) {
      state.push_back({e.name + "/" + slot_suffixes_[i], e.slots[i]});
    }
  }
  for (NamedTensor& t : NonSlotState()) state.push_back(std::move(t));
  return state;
}

void SlotDeviceForm::Apply(const torch::Tensor& learning_rate,
                           const torch::Tensor& step_after) {
  torch::NoGradGuard no_grad;
  SlotGradients g;
  g.slots.resize(entries_.empty() ? 0 : entries_[0].slots.size());
  for (const SlotEntry& e : entries_) {
    const torch::Tensor& grad = e.var.grad();
    if (!grad.defined()) continue;
    SLIM_CHECK(!grad.is_sparse() && grad.sizes() == e.var.sizes(),
               "gradient of ", e.name, " is sparse or of shape ", grad.sizes());
    g.vars.push_back(e.var);
    g.grads.push_back(grad);
    for (size_t k = 0; k < g.slots.size(); ++k) {
      g.slots[k].push_back(e.slots[k]);
    }
  }
  if (!g.vars.empty()) Update(g, learning_rate, step_after);
}

}  // namespace train_internal
}  // namespace slimtorch
