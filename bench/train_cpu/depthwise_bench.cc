// Forward and backward time of channels-last float32 depthwise
// convolutions (multiplier 1, SAME, stride 1) at batch 8: slimtorch's
// (LibTorch's forward, the own backward kernel: src/nets/depthwise_conv.h)
// against LibTorch's convolution alone (oneDNN through ATen), on the shapes
// of NASNet-A, PNASNet-5 and MobileNet v3.
// Median of --repeats timed runs.
//
//   build/bench/depthwise_bench --threads=2

#include <gflags/gflags.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "lib/timing.h"
#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/nets/layers.h"

DEFINE_int32(threads, 2, "Intra-op threads.");
DEFINE_int32(repeats, 20, "Timed runs per case (after 3 warm-up runs).");
DEFINE_int32(batch_size, 8, "Batch size.");

namespace {

using bench::Clock;
using bench::Median;
using bench::Ms;

struct Shape {
  int64_t c, hw, k, stride;
};

// Forward and backward medians of conv on x.
std::pair<double, double> Time(slimtorch::nets::Conv2d& conv,
                               const torch::Tensor& x0) {
  std::vector<double> fwd, bwd;
  for (int r = 0; r < FLAGS_repeats + 3; ++r) {
    torch::Tensor x = x0.detach().requires_grad_(true);
    const auto t0 = Clock::now();
    torch::Tensor y = conv(x);
    const auto t1 = Clock::now();
    y.backward(torch::ones_like(y));
    const auto t2 = Clock::now();
    conv->zero_grad();
    if (r >= 3) {
      fwd.push_back(Ms(t0, t1));
      bwd.push_back(Ms(t1, t2));
    }
  }
  return {Median(fwd), Median(bwd)};
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  slimtorch::UseCachingCpuAllocator();  // as the tools have it
  at::set_num_threads(FLAGS_threads);
  torch::manual_seed(0);
  // (the layers route only stride-1 filters of 5 x 5 and more to the own
  // backward pass: depthwise_conv.h)
  const std::vector<Shape> shapes = {
      {32, 32, 5, 1},  {32, 32, 7, 1}, {44, 28, 5, 1},  {44, 28, 7, 1},
      {88, 14, 5, 1},  {176, 7, 7, 1}, {54, 28, 5, 1},  {120, 28, 5, 1},
      {240, 28, 5, 1}, {672, 14, 5, 1}, {960, 7, 5, 1}};
  std::printf("depthwise conv, batch %d, %d threads, channels-last, median of %d\n",
              FLAGS_batch_size, FLAGS_threads, FLAGS_repeats);
  std::printf("%-16s %9s %9s %9s %9s\n", "C x HW k/s", "own_fwd", "own_bwd",
              "aten_fwd", "aten_bwd");
  for (const Shape& s : shapes) {
    slimtorch::nets::Conv2d conv(slimtorch::nets::Conv2dOptions(s.c, s.c, s.k)
                                     .stride(s.stride)
                                     .depthwise(true)
                                     .use_bias(false)
                                     .activation(slimtorch::nets::Activation::kNone));
    const torch::Tensor x = torch::randn({FLAGS_batch_size, s.c, s.hw, s.hw})
                                .contiguous(torch::MemoryFormat::ChannelsLast);
    slimtorch::SetKernelSwitch(slimtorch::KernelSwitch::kDepthwise, true);
    const auto own = Time(conv, x);
    slimtorch::SetKernelSwitch(slimtorch::KernelSwitch::kDepthwise, false);
    const auto aten = Time(conv, x);
    char name[32];
    std::snprintf(name, sizeof name, "%ldx%ld %ld/%ld", static_cast<long>(s.c),
                  static_cast<long>(s.hw), static_cast<long>(s.k),
                  static_cast<long>(s.stride));
    std::printf("%-16s %9.3f %9.3f %9.3f %9.3f\n", name, own.first, own.second,
                aten.first, aten.second);
  }
  return 0;
}
