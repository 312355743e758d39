#include "slimtorch/train/gradient_exchange.h"

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

class ExchangeSum : public nets::CrossReplicaSum {
 public:
  explicit ExchangeSum(GradientExchange* exchange) : exchange_(exchange) {}
  void Sum(std::vector<torch::Tensor>& tensors) override {
    SLIM_CHECK(exchange_->SumAcrossReplicas(tensors),
               "--sync_batch_norm: the gradient exchange cannot sum across "
               "replicas");
  }

 private:
  GradientExchange* exchange_;
};

}  // namespace

std::shared_ptr<nets::CrossReplicaSum> CrossReplicaSumOf(
    GradientExchange* exchange) {
  return std::make_shared<ExchangeSum>(exchange);
}

}  // namespace slimtorch
