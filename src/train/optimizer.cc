#include "slimtorch/train/optimizer.h"

#include <algorithm>
#include <utility>

#include "slimtorch/core/error.h"

namespace slimtorch {

OptimizerRegistry& GetOptimizerRegistry() {
  static auto* const registry = new OptimizerRegistry("optimizer");
  return *registry;
}

std::unique_ptr<Optimizer> CreateOptimizer(
    const std::string& name, NamedTensors variables,
    const OptimizerParameters& parameters) {
  const OptimizerDescriptor& d = GetOptimizerRegistry().Get(name);
  const std::vector<std::string> known = OptimizerParameterFlags();
  for (const auto& kv : parameters) {
    if (std::find(known.begin(), known.end(), kv.first) != known.end()) {
      continue;
    }
    std::string listed;
    for (const std::string& flag : known) {
      listed += (listed.empty() ? "" : ", ") + flag;
    }
    SLIM_FAIL("optimizer parameter '", kv.first,
              "' is read by no optimizer; known: ", listed);
  }
  return d.create(std::move(variables), parameters);
}

bool OptimizerHasDeviceForm(const std::string& name) {
  const OptimizerRegistry& registry = GetOptimizerRegistry();
  return registry.Has(name) && registry.Get(name).has_device_form;
}

std::vector<std::string> OptimizersReading(const std::string& flag) {
  std::vector<std::string> names;
  const OptimizerRegistry& registry = GetOptimizerRegistry();
  for (const std::string& name : registry.Names()) {
    for (const OptimizerParameter& p : registry.Get(name).parameters) {
      if (p.flag == flag) names.push_back(name);
    }
  }
  return names;
}

std::vector<std::string> OptimizerParameterFlags() {
  std::vector<std::string> flags;
  const OptimizerRegistry& registry = GetOptimizerRegistry();
  for (const std::string& name : registry.Names()) {
    for (const OptimizerParameter& p : registry.Get(name).parameters) {
      if (std::find(flags.begin(), flags.end(), p.flag) == flags.end()) {
        flags.push_back(p.flag);
      }
    }
  }
  return flags;
}

void ClipGradientNorms(const NamedTensors& variables, double max_norm) {
  SLIM_CHECK(max_norm > 0, "--clip_gradient_norm must be > 0, got ", max_norm);
  torch::NoGradGuard no_grad;
  for (const NamedTensor& v : variables) {
    torch::Tensor g = v.tensor.grad();
    if (!g.defined()) continue;
    // TensorFlow rounds the float norm bound to the gradient's dtype.
    const torch::Tensor bound = torch::scalar_tensor(
        max_norm,
        torch::TensorOptions().dtype(g.scalar_type()).device(g.device()));
    const torch::Tensor norm = g.square().sum().sqrt();
    g.mul_(bound).div_(torch::maximum(norm, bound));
  }
}

void Optimizer::LoadState(const std::map<std::string, torch::Tensor>& state) {
  NamedTensors live = State();
  std::string missing;
  std::string mismatched;
  for (const NamedTensor& slot : live) {
    auto it = state.find(slot.name);
    if (it == state.end() || !it->second.defined()) {
      missing += (missing.empty() ? "" : ", ") + slot.name;
    } else if (it->second.sizes() != slot.tensor.sizes()) {
      mismatched += StrCat(mismatched.empty() ? "" : ", ", slot.name,
                           " (expected shape ", slot.tensor.sizes(), ", got ",
                           it->second.sizes(), ")");
    }
  }
  SLIM_CHECK(missing.empty() && mismatched.empty(), name(),
             " optimizer state cannot be loaded:",
             missing.empty() ? "" : " missing ", missing,
             (!missing.empty() && !mismatched.empty()) ? ";" : "",
             mismatched.empty() ? "" : " shape mismatch ", mismatched);
  torch::NoGradGuard no_grad;
  for (NamedTensor& slot : live) slot.tensor.copy_(state.at(slot.name));
}

}  // namespace slimtorch
