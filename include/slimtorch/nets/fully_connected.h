#pragma once
// slim.fully_connected and slim.flatten. Variables: "weights" [out, in]
// (TF: [in, out]), "biases" [out] (checkpoint keys; do not change).

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "slimtorch/nets/initializers.h"
#include "slimtorch/nets/layer_common.h"

namespace slimtorch {
namespace nets {

struct FullyConnectedOptions {
  FullyConnectedOptions(int64_t in, int64_t out)
      : in_features_(in), out_features_(out) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  // Default ReLU, as slim.fully_connected.
  TORCH_ARG(Activation, activation) = Activation::kRelu;
  TORCH_ARG(bool, use_bias) = true;
  TORCH_ARG(Initializer, weights_init) = Initializer::XavierUniform();
  TORCH_ARG(Initializer, biases_init) = Initializer::Zeros();
  TORCH_ARG(double, weight_decay) = 0.0;
  // L2 coefficient on the biases; 0 = none.
  TORCH_ARG(double, bias_decay) = 0.0;
};

// slim.fully_connected. Input [N, in] float, output [N, out].
class FullyConnectedImpl : public torch::nn::Cloneable<FullyConnectedImpl>,
                           public Regularized {
 public:
  explicit FullyConnectedImpl(const FullyConnectedOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  std::vector<std::pair<torch::Tensor, double>> L2Variables() const override;

  FullyConnectedOptions options;
  torch::Tensor weights;
  torch::Tensor biases;
};
TORCH_MODULE(FullyConnected);

// slim.flatten on an NCHW tensor, in TensorFlow's NHWC element order, so
// that the following fully-connected weights map one to one to TF-Slim's.
torch::Tensor FlattenNhwc(const torch::Tensor& x);

}  // namespace nets
}  // namespace slimtorch
