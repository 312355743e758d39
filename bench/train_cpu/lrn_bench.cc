// Forward + backward time of tf.nn.lrn (CifarNet's depth_radius 4, bias 1,
// alpha 0.001/9, beta 0.75) on CifarNet's and the CIFAR-10 tutorial's
// norm1/norm2 shapes at batch 128: the fused CPU kernel
// (LocalResponseNormFused) against the composite of LibTorch ops
// (LocalResponseNormComposite). Median of --repeats timed runs.
//
//   build/bench/lrn_bench --threads=2

#include <gflags/gflags.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "slimtorch/nets/layers.h"

DEFINE_int32(threads, 2, "Intra-op threads.");
DEFINE_int32(repeats, 30, "Timed runs per case (after 5 warm-up runs).");
DEFINE_int32(batch_size, 128, "Batch size.");

namespace {

using Clock = std::chrono::steady_clock;
using Lrn = std::function<torch::Tensor(const torch::Tensor&, int64_t, double,
                                        double, double)>;

struct Timing {
  double forward_ms;
  double total_ms;  // forward + backward
};

Timing Time(const Lrn& lrn, const torch::Tensor& x, const torch::Tensor& up) {
  std::vector<double> fwd, total;
  for (int r = -5; r < FLAGS_repeats; ++r) {
    const auto t0 = Clock::now();
    torch::Tensor y = lrn(x, 4, 1.0, 0.001 / 9.0, 0.75);
    const auto t1 = Clock::now();
    torch::Tensor g = torch::autograd::grad({y}, {x}, {up})[0];
    const auto t2 = Clock::now();
    if (r < 0) continue;
    fwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    total.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  return {median(fwd), median(total)};
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  at::set_num_threads(FLAGS_threads);
  torch::manual_seed(0);
  std::printf("LRN fwd+bwd, %d threads, median of %d (ms)\n", FLAGS_threads,
              FLAGS_repeats);
  std::printf("%-20s %-26s %10s %10s %8s\n", "shape", "where", "composite",
              "fused", "speedup");
  struct Case {
    int64_t hw;
    const char* where;
  };
  for (const Case& c : {Case{16, "cifarnet norm1/norm2"},
                        Case{12, "tutorial norm1/norm2"}, Case{8, "(8x8)"}}) {
    const int64_t n = FLAGS_batch_size;
    torch::Tensor x = torch::relu(torch::randn({n, 64, c.hw, c.hw}) * 10)
                          .requires_grad_(true);
    torch::Tensor up = torch::randn_like(x);
    const Timing composite =
        Time(slimtorch::nets::LocalResponseNormComposite, x, up);
    const Timing fused = Time(slimtorch::nets::LocalResponseNormFused, x, up);
    char shape[64];
    std::snprintf(shape, sizeof(shape), "[%ld,64,%ld,%ld]",
                  static_cast<long>(n), static_cast<long>(c.hw),
                  static_cast<long>(c.hw));
    std::printf(
        "%-20s %-26s %10.2f %10.2f %7.1fx   (forward only: %.2f vs "
        "%.2f)\n",
        shape, c.where, composite.total_ms, fused.total_ms,
        composite.total_ms / fused.total_ms, composite.forward_ms,
        fused.forward_ms);
  }
  return 0;
}
