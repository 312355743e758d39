#pragma once
// A tensor with its TF-Slim variable name ("LeNet/conv1/weights"). Names are
// checkpoint keys: they follow TF-Slim exactly so TF-Slim recipes
// (--checkpoint_exclude_scopes, --trainable_scopes) apply unchanged.

#include <torch/torch.h>

#include <string>
#include <vector>

namespace slimtorch {

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

using NamedTensors = std::vector<NamedTensor>;

}  // namespace slimtorch
