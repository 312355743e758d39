#include "slimtorch/nets/net.h"

#include "slimtorch/nets/layers.h"

namespace slimtorch {
namespace {

// "conv1.weights" → "<scope>/conv1/weights".
std::string TfName(const std::string& scope, std::string key) {
  for (char& c : key) {
    if (c == '.') c = '/';
  }
  return scope + "/" + key;
}

}  // namespace

NamedTensors Net::TrainableVariables() {
  NamedTensors out;
  for (const auto& item : module().named_parameters(/*recurse=*/true)) {
    out.push_back({TfName(scope(), item.key()), item.value()});
  }
  return out;
}

NamedTensors Net::ModelVariables() {
  NamedTensors out = TrainableVariables();
  for (const auto& item : module().named_buffers(/*recurse=*/true)) {
    out.push_back({TfName(scope(), item.key()), item.value()});
  }
  return out;
}

torch::Tensor Net::RegularizationLoss() {
  torch::Tensor total;
  for (const auto& m : module().modules(/*include_self=*/true)) {
    const auto* reg = dynamic_cast<const nets::Regularized*>(m.get());
    if (reg == nullptr) continue;
    torch::Tensor term = reg->RegularizationLoss();
    if (!term.defined()) continue;
    total = total.defined() ? total + term : term;
  }
  if (!total.defined()) {
    auto params = module().parameters();
    total = params.empty() ? torch::zeros({})
                           : torch::zeros({}, params.front().options());
  }
  return total;
}

int64_t Net::NumParameters() {
  int64_t n = 0;
  for (const auto& p : module().parameters()) n += p.numel();
  return n;
}

NetRegistry& GetNetRegistry() {
  static NetRegistry registry("model");
  return registry;
}

std::shared_ptr<Net> CreateNet(const std::string& name,
                               const NetOptions& options) {
  return GetNetRegistry().Get(name)(options);
}

}  // namespace slimtorch
