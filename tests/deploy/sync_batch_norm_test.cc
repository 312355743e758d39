// --sync_batch_norm: batch norm layers whose statistics span replicas (nets'
// CrossReplicaSum over deploy's all-reduce), with replicas played by threads
// meeting through a FileStore. Each replica's slice must get what one batch
// norm on the whole global batch gives: outputs, input gradients, the sum
// of the replicas' gamma / beta gradients and the moving statistics.
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "slimtorch/deploy/all_reduce.h"
#include "slimtorch/nets/batch_norm.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using nets::BatchNorm;
using nets::BatchNormOptions;

BatchNorm MakeLayer(int64_t channels) {
  BatchNorm bn(BatchNormOptions(channels).scale(true).decay(0.9));
  torch::NoGradGuard no_grad;
  bn->gamma.copy_(torch::linspace(0.5, 1.5, channels));
  bn->beta.copy_(torch::linspace(-0.3, 0.2, channels));
  bn->moving_mean.copy_(torch::linspace(-1.0, 1.0, channels));
  bn->moving_variance.copy_(torch::linspace(0.5, 2.0, channels));
  return bn;
}

struct Result {
  torch::Tensor y, dx, dgamma, dbeta, moving_mean, moving_variance;
};

// One training pass of `bn` on x with loss sum(relu(bn(x)) * w) (relu: the
// fused batch norm + ReLU's entry) or sum(bn(x) * w).
Result Pass(BatchNorm& bn, const torch::Tensor& x_in, const torch::Tensor& w,
            bool relu) {
  bn->train();
  torch::Tensor x = x_in.clone().requires_grad_();
  torch::Tensor y = relu ? nets::BatchNormRelu(*bn, x) : bn->forward(x);
  (y * w).sum().backward();
  return {y.detach(),
          x.grad(),
          bn->gamma.grad(),
          bn->beta.grad(),
          bn->moving_mean.clone(),
          bn->moving_variance.clone()};
}

TEST(SyncBatchNormTest, ReplicasTogetherEqualOneGlobalBatch) {
  if (!HaveProcessGroups()) GTEST_SKIP() << "built without c10d Gloo";
  torch::manual_seed(3);
  for (int world : {2, 3}) {
    for (bool relu : {false, true}) {
      for (bool five_d : {false, true}) {
        SCOPED_TRACE(::testing::Message() << world << " replicas, relu " << relu
                                          << ", 5-D " << five_d);
        const int64_t per = 4, c = 5;
        std::vector<int64_t> shape = {per * world, c, 6, 7};
        if (five_d) shape = {per * world, c, 3, 4, 5};
        // Channels off-centre and scaled (a variance small against the
        // mean).
        const torch::Tensor x =
            torch::randn(shape) * 3 + 10 +
            torch::arange(c, torch::kFloat)
                .view({1, c, 1, 1})
                .expand({1, c, 1, 1})
                .reshape(five_d ? std::vector<int64_t>{1, c, 1, 1, 1}
                                : std::vector<int64_t>{1, c, 1, 1});
        const torch::Tensor w = torch::randn(shape);
        BatchNorm global = MakeLayer(c);
        global->fused_kernels = false;  // LibTorch's batch_norm
        const Result want = Pass(global, x, w, relu);

        testing::TempDir dir;
        std::vector<Result> got(world);
        std::vector<std::exception_ptr> errors(world);
        std::vector<std::thread> threads;
        for (int r = 0; r < world; ++r) {
          threads.emplace_back([&, r] {
            try {
              ProcessGroup group =
                  ProcessGroup::ConnectFile(dir.Join("store"), r, world,
                                            std::chrono::milliseconds(20000));
              AllReduceGradients exchange(group);
              BatchNorm bn = MakeLayer(c);
              bn->cross_replica = CrossReplicaSumOf(&exchange);
              got[r] = Pass(bn, x.narrow(0, r * per, per),
                            w.narrow(0, r * per, per), relu);
            } catch (...) {
              errors[r] = std::current_exception();
            }
          });
        }
        for (auto& t : threads) t.join();
        for (auto& e : errors) {
          if (e) std::rethrow_exception(e);
        }
        torch::Tensor dgamma = torch::zeros({c}), dbeta = torch::zeros({c});
        for (int r = 0; r < world; ++r) {
          EXPECT_TRUE(torch::allclose(got[r].y, want.y.narrow(0, r * per, per),
                                      1e-4, 1e-4))
              << r;
          EXPECT_TRUE(torch::allclose(
              got[r].dx, want.dx.narrow(0, r * per, per), 1e-4, 1e-5))
              << r << "\n"
              << (got[r].dx - want.dx.narrow(0, r * per, per)).abs().max();
          EXPECT_TRUE(torch::allclose(got[r].moving_mean, want.moving_mean,
                                      1e-5, 1e-5));
          EXPECT_TRUE(torch::allclose(got[r].moving_variance,
                                      want.moving_variance, 1e-5, 1e-5));
          dgamma += got[r].dgamma;
          dbeta += got[r].dbeta;
        }
        EXPECT_TRUE(torch::allclose(dgamma, want.dgamma, 1e-4, 1e-3));
        EXPECT_TRUE(torch::allclose(dbeta, want.dbeta, 1e-4, 1e-3));
      }
    }
  }
}

// One replica's sum is the identity: the layer then equals the local one.
class NoReplicas : public nets::CrossReplicaSum {
 public:
  void Sum(std::vector<torch::Tensor>&) override { ++calls; }
  int calls = 0;
};

TEST(SyncBatchNormTest, OneReplicaEqualsTheLocalLayerAndEvalIsLocal) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({6, 3, 5, 5}) * 2 + 1;
  const torch::Tensor w = torch::randn({6, 3, 5, 5});
  BatchNorm local = MakeLayer(3);
  const Result want = Pass(local, x, w, /*relu=*/true);
  BatchNorm synced = MakeLayer(3);
  auto sum = std::make_shared<NoReplicas>();
  EXPECT_EQ(nets::SetCrossReplicaBatchNorm(*synced, sum), 1);
  const Result got = Pass(synced, x, w, /*relu=*/true);
  EXPECT_EQ(sum->calls, 3);  // forward mean and variance, backward sums
  EXPECT_TRUE(torch::allclose(got.y, want.y, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(got.dx, want.dx, 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(got.dgamma, want.dgamma, 1e-4, 1e-4));
  EXPECT_TRUE(
      torch::allclose(got.moving_variance, want.moving_variance, 1e-6, 1e-6));
  // Evaluation uses the moving statistics, locally.
  synced->eval();
  torch::NoGradGuard no_grad;
  synced->forward(x);
  EXPECT_EQ(sum->calls, 3);
}

}  // namespace
}  // namespace slimtorch
