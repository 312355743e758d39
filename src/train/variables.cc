#include "slimtorch/train/variables.h"

#include <sstream>

#include "slimtorch/core/error.h"

namespace slimtorch {

std::vector<std::string> SplitScopes(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t b = part.find_first_not_of(" \t");
    size_t e = part.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(part.substr(b, e - b + 1));
  }
  return out;
}

bool InScopes(const std::string& name, const std::vector<std::string>& scopes) {
  for (const auto& s : scopes) {
    if (name.compare(0, s.size(), s) == 0) return true;
  }
  return false;
}

int RestoreVariables(const NamedTensors& variables, const CheckpointData& ckpt,
                     const std::string& ckpt_path,
                     const RestoreOptions& options) {
  std::vector<std::string> problems;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  for (const auto& v : variables) {
    if (InScopes(v.name, options.exclude_scopes)) continue;
    torch::Tensor saved = ckpt.Find(v.name);
    if (!saved.defined()) {
      if (!options.ignore_missing) problems.push_back(v.name + " is missing");
      continue;
    }
    if (saved.sizes() != v.tensor.sizes()) {
      problems.push_back(StrCat(v.name, " has shape ", saved.sizes(),
                                " in the checkpoint, ", v.tensor.sizes(),
                                " in the model"));
      continue;
    }
    copies.emplace_back(v.tensor, saved);
  }
  if (!problems.empty()) {
    std::string msg = StrCat("checkpoint '", ckpt_path,
                             "' does not match the model (", problems.size(),
                             " variable", problems.size() > 1 ? "s" : "", "): ");
    const size_t shown = std::min<size_t>(problems.size(), 20);
    for (size_t i = 0; i < shown; ++i) msg += (i ? "; " : "") + problems[i];
    if (shown < problems.size()) {
      msg += StrCat("; and ", problems.size() - shown, " more");
    }
    SLIM_FAIL(msg);
  }
  torch::NoGradGuard no_grad;
  for (auto& c : copies) c.first.copy_(c.second);
  return static_cast<int>(copies.size());
}

}  // namespace slimtorch
