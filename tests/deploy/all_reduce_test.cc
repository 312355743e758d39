// c10d all-reduce of gradients, with processes played by threads meeting
// through a FileStore (Gloo over loopback, as between processes).
#include "slimtorch/deploy/all_reduce.h"

#include <ATen/CPUGeneratorImpl.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "io/io_test_util.h"
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

// Attached, the exchange starts buckets during backward: a chain of layers
// whose first layer takes no part in the loss on one step (its gradient
// stays undefined, zero-filled by the caller as the trainer does); every
// gradient equals the mean of the ranks' own gradients, computed
// independently here, and the buckets backward reached started before
// Exchange. Over two steps, to show the hooks re-arm.
TEST(AllReduceGradientsTest, AttachedOverlapsBackwardAndAverages) {
  SKIP_WITHOUT_C10D();
  const int world = 2;
  testing::TempDir dir;
  // Variables: five 16x16 matrices (1 KiB each) and a bias; buckets of
  // 1 KiB after a first one of 2 KiB.
  const int kLayers = 5;
  auto make_vars = [&] {
    // Own generators: the ranks are threads.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    NamedTensors vars;
    for (int l = 0; l < kLayers; ++l) {
      vars.push_back({"w" + std::to_string(l),
                      (torch::randn({16, 16}, gen) * 0.3).requires_grad_()});
    }
    vars.push_back({"b", torch::zeros({16}).requires_grad_()});
    return vars;
  };
  // The loss of rank r at step s; skip_first leaves w0 out.
  auto loss_of = [&](const NamedTensors& vars, int r, int step,
                     bool skip_first) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + 10 * step + r);
    torch::Tensor x = torch::randn({8, 16}, gen);
    for (int l = skip_first ? 1 : 0; l < kLayers; ++l) {
      x = torch::tanh(x.matmul(vars[l].tensor));
    }
    return (x + vars[kLayers].tensor).pow(2).sum();
  };
  // Expected: each rank's gradients alone, then their mean.
  std::vector<std::vector<torch::Tensor>> expected(2);
  for (int step = 0; step < 2; ++step) {
    std::vector<torch::Tensor> sum;
    for (int r = 0; r < world; ++r) {
      NamedTensors vars = make_vars();
      loss_of(vars, r, step, step == 1).backward();
      for (size_t k = 0; k < vars.size(); ++k) {
        torch::Tensor g = vars[k].tensor.grad();
        if (!g.defined()) g = torch::zeros_like(vars[k].tensor);
        if (sum.size() <= k) {
          sum.push_back(g.clone());
        } else {
          sum[k] += g;
        }
      }
    }
    for (auto& g : sum) expected[step].push_back(g / world);
  }
  std::vector<std::vector<std::vector<torch::Tensor>>> got(
      world, std::vector<std::vector<torch::Tensor>>(2));
  std::vector<std::vector<int>> overlapped(world, std::vector<int>(2));
  std::vector<int> buckets(world);
  OnThreads(world, [&](int r) {
    ProcessGroup group = ProcessGroup::ConnectFile(dir.Join("store"), r, world,
                                                   milliseconds(20000));
    AllReduceGradients exchange(group, /*bucket_bytes=*/1024,
                                /*first_bucket_bytes=*/2048);
    for (int step = 0; step < 2; ++step) {
      // Fresh variables each step, as expected[] was computed: the hooks
      // are on the first step's accumulators, so attach per object.
      NamedTensors vars = make_vars();
      AllReduceGradients per_step(group, 1024, 2048);
      per_step.Attach(vars);
      loss_of(vars, r, step, step == 1).backward();
      for (auto& v : vars) {
        if (!v.tensor.grad().defined()) {
          v.tensor.mutable_grad() = torch::zeros_like(v.tensor);
        }
      }
      per_step.Exchange(vars);
      overlapped[r][step] = per_step.overlapped_buckets();
      buckets[r] = per_step.num_buckets();
      for (auto& v : vars) got[r][step].push_back(v.tensor.grad().clone());
    }
    // One exchange over two steps of the same variables: the hooks re-arm.
    NamedTensors vars = make_vars();
    exchange.Attach(vars);
    for (int step = 0; step < 2; ++step) {
      for (auto& v : vars) v.tensor.mutable_grad() = torch::Tensor();
      loss_of(vars, r, step, false).backward();
      exchange.Exchange(vars);
      EXPECT_EQ(exchange.overlapped_buckets(), exchange.num_buckets())
          << "rank " << r << " step " << step;
    }
  });
  for (int r = 0; r < world; ++r) {
    // Bucket 0: b + w4 + w3 (16 floats + 2 KiB > 2 KiB: b + w4), then one
    // matrix each: b+w4 | w3 | w2 | w1 | w0.
    EXPECT_EQ(buckets[r], 5);
    // Step 0 reaches every variable during backward; step 1 never reaches
    // w0, whose bucket (the last) starts in Exchange.
    EXPECT_EQ(overlapped[r][0], 5);
    EXPECT_EQ(overlapped[r][1], 4);
    for (int step = 0; step < 2; ++step) {
      for (size_t k = 0; k < expected[step].size(); ++k) {
        EXPECT_TRUE(
            torch::allclose(got[r][step][k], expected[step][k], 1e-6, 1e-6))
            << "rank " << r << " step " << step << " variable " << k;
        EXPECT_TRUE(torch::equal(got[r][step][k], got[0][step][k]));
      }
    }
  }
}

// --accumulate_gradients: the hooks stand aside while a step's earlier
// micro-batches add up their gradients (no bucket starts on a partial sum),
// and the last micro-batch's backward starts every bucket on the whole sum:
// each gradient is the ranks' mean of the micro-batches' sum.
TEST(AllReduceGradientsTest, AccumulateOnlyExchangesTheSumOnce) {
  SKIP_WITHOUT_C10D();
  const int world = 2;
  testing::TempDir dir;
  auto make_vars = [] {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    NamedTensors vars;
    for (int l = 0; l < 3; ++l) {
      vars.push_back({"w" + std::to_string(l),
                      (torch::randn({16, 16}, gen) * 0.3).requires_grad_()});
    }
    return vars;
  };
  // The loss of rank r's micro-batch m.
  auto loss_of = [](const NamedTensors& vars, int r, int m) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(200 + 10 * m + r);
    torch::Tensor x = torch::randn({4, 16}, gen);
    for (const auto& v : vars) x = torch::tanh(x.matmul(v.tensor));
    return x.pow(2).sum();
  };
  std::vector<torch::Tensor> expected;
  for (int r = 0; r < world; ++r) {
    for (int m = 0; m < 3; ++m) {
      NamedTensors vars = make_vars();
      loss_of(vars, r, m).backward();
      for (size_t k = 0; k < vars.size(); ++k) {
        const torch::Tensor g = vars[k].tensor.grad() / world;
        if (expected.size() <= k) {
          expected.push_back(g);
        } else {
          expected[k] += g;
        }
      }
    }
  }
  std::vector<std::vector<torch::Tensor>> got(world);
  std::vector<int> overlapped(world, -1);
  OnThreads(world, [&](int r) {
    ProcessGroup group = ProcessGroup::ConnectFile(dir.Join("store"), r, world,
                                                   milliseconds(20000));
    AllReduceGradients exchange(group, /*bucket_bytes=*/1024,
                                /*first_bucket_bytes=*/1024);
    NamedTensors vars = make_vars();
    exchange.Attach(vars);
    for (int m = 0; m < 3; ++m) {
      exchange.AccumulateOnly(m < 2);
      loss_of(vars, r, m).backward();
    }
    exchange.Exchange(vars);
    overlapped[r] = exchange.overlapped_buckets();
    for (auto& v : vars) got[r].push_back(v.tensor.grad().clone());
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(overlapped[r], 3) << "rank " << r;
    for (size_t k = 0; k < expected.size(); ++k) {
      EXPECT_TRUE(torch::allclose(got[r][k], expected[k], 1e-5, 1e-6))
          << "rank " << r << " variable " << k;
      EXPECT_TRUE(torch::equal(got[r][k], got[0][k]));
    }
  }
}

// The same exchange over NCCL, one rank per GPU (up to 2): gradients,
// shared losses and the stop agreement. Skipped without a GPU or NCCL (CI).
TEST(AllReduceGradientsTest, NcclOnGpusAveragesAndSharesLosses) {
  if (!HaveNccl() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "needs NCCL and a CUDA GPU";
  }
  const int world = std::min<int>(2, torch::cuda::device_count());
  testing::TempDir dir;
  std::vector<std::vector<torch::Tensor>> got(world);
  std::vector<std::vector<double>> losses(world);
  std::vector<int> stops(world);
  OnThreads(world, [&](int r) {
    const torch::Device device(torch::kCUDA, r);
    ProcessGroup group = ProcessGroup::ConnectFile(dir.Join("store"), r, world,
                                                   milliseconds(60000), device);
    NamedTensors vars = {
        {"a", torch::zeros({300}, torch::device(device)).requires_grad_()},
        {"b", torch::zeros({7, 3}, torch::device(device)).requires_grad_()}};
    AllReduceGradients exchange(group, /*bucket_bytes=*/512,
                                /*first_bucket_bytes=*/512);
    exchange.Attach(vars);
    EXPECT_FALSE(exchange.AgreeOnStop(false));
    // d loss / d a = r + 1, d loss / d b = 10 (r + 1).
    torch::Tensor loss = vars[0].tensor.sum() * (r + 1) +
                         vars[1].tensor.sum() * (10.0 * (r + 1));
    exchange.ShareLoss(torch::tensor(100.0 + r));
    loss.backward();
    exchange.Exchange(vars);
    for (auto& v : vars) got[r].push_back(v.tensor.grad().cpu());
    losses[r] = exchange.ReplicaLosses();
    stops[r] = exchange.AgreeOnStop(r == 0);  // answered from the exchange
  });
  // Mean of r + 1 over the ranks.
  const double mean = (world + 1) / 2.0;
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(torch::allclose(got[r][0], torch::full({300}, mean)));
    EXPECT_TRUE(torch::allclose(got[r][1], torch::full({7, 3}, 10 * mean)));
    ASSERT_EQ(losses[r].size(), size_t(world));
    for (int k = 0; k < world; ++k) EXPECT_EQ(losses[r][k], 100.0 + k);
    EXPECT_EQ(stops[r], 0);  // rank 0's request arrives with the next step
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
  EXPECT_NE(message.find("all-reduce across 2 processes failed on replica 0 "
                         "(thread of pid "),
            std::string::npos)
      << message;
  // Rank 1's group is gone with its heartbeat: the error names it.
  EXPECT_NE(message.find("replica 1 (thread of pid " +
                         std::to_string(::getpid()) + ") is gone"),
            std::string::npos)
      << message;
  EXPECT_LT(secs, 30.0);
}

// A free TCP port on 127.0.0.1 now.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The replicas of a job that torchrun's agent serves the store for
// (TORCHELASTIC_USE_AGENT_STORE=True): every one a client. The "agent"
// here is LibTorch's own TCPStore server (that of a one-process job, which
// serves it for as long as it lives); the replicas reach it through the
// client that speaks either PyTorch's protocol, which must recognise this
// LibTorch's. The store outlives each start of the job, as torchrun 2.x's
// does across restarts, whose restart counts need not agree between nodes
// (all 0 here): each start still meets only its own processes, even when
// replica 1 comes first and finds the last start's round.
TEST(AllReduceGradientsTest, ReplicasJoinTorchrunsAgentStore) {
  SKIP_WITHOUT_C10D();
  ClusterSpec agent;
  agent.master_port = FreePort();
  ProcessGroup server = ProcessGroup::Connect(agent, milliseconds(20000));
  for (int start = 0; start < 3; ++start) {
    SCOPED_TRACE(start);
    std::vector<double> sums(2);
    OnThreads(2, [&](int r) {
      // From the second start on, replica 0 comes late.
      if (r == 0 && start > 0) {
        std::this_thread::sleep_for(milliseconds(start == 1 ? 300 : 1500));
      }
      ClusterSpec c;
      c.world_size = 2;
      c.rank = r;
      c.master_port = agent.master_port;
      c.agent_store = true;
      ProcessGroup group = ProcessGroup::Connect(c, milliseconds(20000));
      std::vector<torch::Tensor> t = {
          torch::full({3}, double(r + 1 + start), torch::kDouble)};
      group.AllReduceSum(t);
      sums[r] = t[0][2].item<double>();
    });
    EXPECT_EQ(sums[0], 3.0 + 2 * start);
    EXPECT_EQ(sums[1], 3.0 + 2 * start);
  }
}

// Without the agent store, rank 0 serves it: a port already taken fails at
// once naming it and the likely cause; a replica that never comes fails
// after the time-out naming its rank and the seconds waited.
TEST(AllReduceGradientsTest, RendezvousErrorsSayWhatWasWaitedFor) {
  SKIP_WITHOUT_C10D();
  ClusterSpec first;
  first.master_port = FreePort();
  ProcessGroup holder = ProcessGroup::Connect(first, milliseconds(20000));
  ClusterSpec c;
  c.world_size = 2;
  c.master_port = first.master_port;
  EXPECT_ERROR_CONTAINS(ProcessGroup::Connect(c, milliseconds(2000)),
                        "replica 0 of 2 (host ",
                        "could not serve the "
                        "rendezvous store at 127.0.0.1:" +
                            std::to_string(c.master_port),
                        "is taken: another job");
  c.master_port = FreePort();
  c.world_size = 3;
  EXPECT_ERROR_CONTAINS(ProcessGroup::Connect(c, milliseconds(1000)),
                        "waited 1.", " s at the rendezvous 127.0.0.1:",
                        "for replicas 1, 2 of 3, which never joined");
}

}  // namespace
}  // namespace slimtorch
