// c10d all-reduce of gradients, with processes played by threads meeting
// through a FileStore (Gloo over loopback, as between processes).
#include "slimtorch/deploy/all_reduce.h"

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "slimtorch/core/error.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using std::chrono::milliseconds;

#define SKIP_WITHOUT_C10D() \
  if (!HaveProcessGroups()) GTEST_SKIP() << "built without c10d Gloo"

// Runs body(rank) on `world` threads; rethrows the first failure.
void OnThreads(int world, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Every gradient becomes the mean of the ranks' gradients, for 2 and 3
// ranks, with buckets small enough to split the list, and float and double
// variables in one list (a bucket holds one dtype).
TEST(AllReduceGradientsTest, AveragesEveryGradientAcrossRanks) {
  SKIP_WITHOUT_C10D();
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    testing::TempDir dir;
    const std::vector<std::vector<int64_t>> shapes = {
        {3, 4}, {5}, {2, 2, 2}, {7}, {1}};
    const std::vector<torch::Dtype> dtypes = {torch::kFloat, torch::kFloat,
                                              torch::kDouble, torch::kFloat,
                                              torch::kFloat};
    // The gradients each rank starts from, and their mean.
    std::vector<std::vector<torch::Tensor>> given(world);
    torch::manual_seed(1);
    for (int r = 0; r < world; ++r) {
      for (size_t v = 0; v < shapes.size(); ++v) {
        given[r].push_back(
            (torch::rand(shapes[v], torch::kDouble) + r * 10 + int64_t(v))
                .to(dtypes[v]));
      }
    }
    std::vector<std::vector<torch::Tensor>> got(world);
    OnThreads(world, [&](int r) {
      ProcessGroup group = ProcessGroup::ConnectFile(
          dir.Join("store"), r, world, milliseconds(20000));
      EXPECT_EQ(group.rank(), r);
      EXPECT_EQ(group.world_size(), world);
      NamedTensors vars;
      for (size_t v = 0; v < shapes.size(); ++v) {
        torch::Tensor w =
            torch::zeros(shapes[v], torch::TensorOptions().dtype(dtypes[v]))
                .requires_grad_();
        w.mutable_grad() = given[r][v].clone();
        vars.push_back({"v" + std::to_string(v), w});
      }
      AllReduceGradients exchange(group, /*bucket_bytes=*/40);
      exchange.Exchange(vars);
      for (auto& v : vars) got[r].push_back(v.tensor.grad());
    });
    for (size_t v = 0; v < shapes.size(); ++v) {
      torch::Tensor sum = torch::zeros_like(given[0][v]);
      for (int r = 0; r < world; ++r) sum += given[r][v];
      const torch::Tensor mean = sum / world;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(got[r][v].scalar_type(), dtypes[v]);
        EXPECT_TRUE(torch::allclose(got[r][v], mean, 1e-6, 1e-6))
            << "rank " << r << " variable " << v;
        // Every rank holds the very same values.
        EXPECT_TRUE(torch::equal(got[r][v], got[0][v]));
      }
    }
  }
}

// A rank that never arrives: the others fail with an error naming the
// all-reduce within a bounded time instead of hanging.
TEST(AllReduceGradientsTest, AMissingPeerIsAnErrorNotAHang) {
  SKIP_WITHOUT_C10D();
  testing::TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  OnThreads(2, [&](int r) {
    ProcessGroup group =
        ProcessGroup::ConnectFile(dir.Join("store"), r, 2, milliseconds(1500));
    if (r == 1) return;  // joins, then "dies" before the step
    std::vector<torch::Tensor> t = {torch::ones({4})};
    try {
      group.AllReduceSum(t);
    } catch (const Error& e) {
      message = e.what();
    }
  });
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_NE(message.find("all-reduce across 2 processes failed on process 0"),
            std::string::npos)
      << message;
  EXPECT_LT(secs, 30.0);
}

}  // namespace
}  // namespace slimtorch
