// Where a LeNet training step's time goes (batch 50, SGD), phase by phase,
// with the same library calls train_image_classifier makes; plus the input
// pipeline alone. Used to explain bench/lenet_throughput.sh's ratio.
//
//   build/bench/lenet_step_profile --dataset_dir=/tmp/fashion_mnist --threads=2

#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>

#include "slimtorch/data/input.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/loss.h"
#include "slimtorch/train/optimizer.h"

DEFINE_string(dataset_dir, "", "Converted fashion_mnist TFRecords.");
DEFINE_int32(threads, 2, "Intra-op threads.");
DEFINE_int32(steps, 200, "Timed steps.");
DEFINE_int32(batch_size, 50, "Batch size.");

namespace {
using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  at::set_num_threads(FLAGS_threads);
  using namespace slimtorch;
  torch::manual_seed(0);
  auto net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  net->module().train();
  auto opt = CreateOptimizer("sgd", net->TrainableVariables(), {});
  torch::Tensor x = torch::randn({FLAGS_batch_size, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {FLAGS_batch_size}, torch::kInt64);
  double fwd = 0, bwd = 0, upd = 0;
  for (int s = -20; s < FLAGS_steps; ++s) {
    auto t0 = Clock::now();
    for (auto& v : net->TrainableVariables()) v.tensor.mutable_grad() = torch::Tensor();
    torch::Tensor loss = SoftmaxCrossEntropy(net->Forward(x).logits, y);
    loss.item<float>();
    auto t1 = Clock::now();
    loss.backward();
    auto t2 = Clock::now();
    opt->Apply(0.01);
    auto t3 = Clock::now();
    if (s >= 0) {
      fwd += Ms(t0, t1);
      bwd += Ms(t1, t2);
      upd += Ms(t2, t3);
    }
  }
  const double n = FLAGS_steps;
  std::printf("model step (synthetic batch %d, %d threads): forward+loss %.2f ms, "
              "backward %.2f ms, sgd update %.2f ms, total %.2f ms = %.0f images/s\n",
              FLAGS_batch_size, FLAGS_threads, fwd / n, bwd / n, upd / n,
              (fwd + bwd + upd) / n,
              FLAGS_batch_size * n * 1000 / (fwd + bwd + upd));

  if (!FLAGS_dataset_dir.empty()) {
    auto spec = GetDatasetSpec("fashion_mnist");
    InputOptions in;
    in.dataset_dir = FLAGS_dataset_dir;
    in.split_name = "train";
    in.preprocessing_name = "lenet";
    in.image_size = 28;
    in.batch_size = FLAGS_batch_size;
    in.num_readers = 1;
    in.num_preprocessing_threads = 1;
    Pipeline pipeline(MakePipelineOptions(spec, in));
    for (int i = 0; i < 20; ++i) pipeline.Next();
    auto t0 = Clock::now();
    for (int i = 0; i < FLAGS_steps; ++i) pipeline.Next();
    double ms = Ms(t0, Clock::now());
    std::printf("input pipeline alone (1 reader, 1 worker): %.3f ms/batch = %.0f "
                "images/s\n", ms / n, FLAGS_batch_size * n * 1000 / ms);
  }
  return 0;
}
