// Forward and backward time of slimtorch's fused batch norm + ReLU
// (training mode) on ResNet-50's and Inception's activation shapes at batch
// 8, channels-last and NCHW, next to a plain copy of the same tensor
// (x.clone(): one read, one write) as the memory's pace. Median of
// --repeats timed runs.
//
//   build/bench/bn_bench --threads=2

#include <gflags/gflags.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "lib/timing.h"
#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/cpu_isa.h"
#include "slimtorch/nets/layers.h"

DEFINE_int32(threads, 2, "Intra-op threads.");
DEFINE_int32(repeats, 20, "Timed runs per case (after 3 warm-up runs).");
DEFINE_int32(batch_size, 8, "Batch size.");

namespace {

using bench::Clock;
using bench::Median;
using bench::Ms;

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  slimtorch::UseCachingCpuAllocator();  // as the tools have it
  at::set_num_threads(FLAGS_threads);
  torch::manual_seed(0);
  struct Shape {
    int64_t c, hw;
  };
  const std::vector<Shape> shapes = {{64, 112},  {64, 56},  {256, 56},
                                     {128, 28},  {512, 28}, {256, 14},
                                     {1024, 14}, {2048, 7}};
  std::printf(
      "batch norm + relu, batch %d, %d threads, median of %d, kernels %s\n",
      FLAGS_batch_size, FLAGS_threads, FLAGS_repeats,
      slimtorch::CpuIsaName(slimtorch::ActiveCpuIsa()));
  std::printf("%-14s %-6s %8s %8s %8s %8s\n", "shape", "order", "MB", "copy_ms",
              "fwd_ms", "bwd_ms");
  for (const Shape& s : shapes) {
    for (bool cl : {true, false}) {
      torch::Tensor x = torch::randn({FLAGS_batch_size, s.c, s.hw, s.hw});
      if (cl) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
      x.requires_grad_(true);
      torch::Tensor up = torch::randn_like(x);
      slimtorch::nets::BatchNorm bn(
          slimtorch::nets::BatchNormOptions(s.c).scale(true));
      bn->train();
      std::vector<double> copy, fwd, bwd;
      for (int r = -3; r < FLAGS_repeats; ++r) {
        const auto t0 = Clock::now();
        torch::Tensor c = x.detach().clone();
        const auto t1 = Clock::now();
        torch::Tensor y = slimtorch::nets::BatchNormRelu(*bn, x);
        const auto t2 = Clock::now();
        y.backward(up);
        const auto t3 = Clock::now();
        x.mutable_grad().reset();
        if (r < 0) continue;
        copy.push_back(Ms(t0, t1));
        fwd.push_back(Ms(t1, t2));
        bwd.push_back(Ms(t2, t3));
      }
      char name[32];
      std::snprintf(name, sizeof name, "%ldx%ldx%ld", static_cast<long>(s.c),
                    static_cast<long>(s.hw), static_cast<long>(s.hw));
      std::printf("%-14s %-6s %8.1f %8.3f %8.3f %8.3f\n", name,
                  cl ? "nhwc" : "nchw", x.numel() * 4 / 1e6, Median(copy),
                  Median(fwd), Median(bwd));
    }
  }
  return 0;
}
