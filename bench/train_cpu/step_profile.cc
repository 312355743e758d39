// The model's training step alone, for any registered net: one random
// pre-made batch, then full steps the way train_image_classifier makes them
// (forward, softmax cross entropy + the nets' L2 terms when weight_decay is
// set, backward, optimizer update), timed phase by phase. Optionally the
// input pipeline alone on converted TFRecords. Runs with the tools'
// start-up (short OpenMP and OpenBLAS spins unless set, see
// tools/tool_common.h), so
// its numbers compare with the tool's.
//
//   build/bench/step_profile --model_name=lenet --input_channels=1 \
//       --batch_size=50 --learning_rate=0.01 --threads=2 \
//       --dataset_name=fashion_mnist --dataset_dir=/tmp/fashion_mnist
//
// Prints, besides the breakdown, one machine-readable line:
//   step_profile model=<name> batch=<n> image_size=<px> threads=<n>
//   steps=<n> ms_per_step=<f> images_per_sec=<f>
// and with --dataset_dir:
//   input_pipeline dataset=<name> batch=<n> ms_per_batch=<f>
//   images_per_sec=<f>

#include <gflags/gflags.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/error.h"
#include "slimtorch/data/input.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/loss.h"
#include "slimtorch/train/optimizer.h"
#include "slimtorch/train/precision.h"
#include "tool_common.h"

DEFINE_string(model_name, "lenet", "Registered net to time.");
DEFINE_int32(batch_size, 32, "Batch size.");
DEFINE_int32(image_size, 0, "Square input size; 0 = the net's default.");
DEFINE_int32(num_classes, 10, "Classes of the logits layer.");
DEFINE_int32(input_channels, 3, "Channels of the images (1 for MNIST).");
DEFINE_string(optimizer, "sgd", "Registered optimizer.");
DEFINE_double(learning_rate, 0.01, "Learning rate (fixed).");
DEFINE_double(weight_decay, 0.0,
              "L2 coefficient given to the net; non-zero adds the L2 terms "
              "to every step, as the trainer does.");
DEFINE_int32(steps, 100, "Timed steps.");
DEFINE_bool(l2_autograd, false,
            "Add the nets' L2 terms to the loss and backpropagate them (the "
            "trainer before 2026-11-23) instead of adding their gradients "
            "to .grad directly (Net::ApplyRegularizationGradients).");
DEFINE_string(data_format, "auto",
              "The net's memory order, as train_image_classifier's "
              "--data_format: auto, channels_first or channels_last.");
DEFINE_int32(warmup, 10, "Untimed steps first.");
DEFINE_string(precision, "fp32",
              "fp32 or bf16: the forward pass under autocast, as "
              "train_image_classifier's --precision.");
DEFINE_bool(fused_batch_norm, true,
            "Batch norm + activation as the fused CPU kernels (false: "
            "LibTorch's batch_norm then the activation, to compare).");
DEFINE_bool(caching_allocator, true,
            "LibTorch's CPU tensors from slimtorch's caching allocator, as "
            "the tools have them (false: LibTorch's own, glibc's malloc).");
DEFINE_string(profile_file, "",
              "Also record every op of the timed steps (LibTorch's autograd "
              "profiler) as a Chrome trace here; bench/lib/profile_summary.py "
              "sums it by op. Profiling slows the steps.");
DEFINE_int32(threads, 2, "Intra-op threads.");
DEFINE_bool(breakdown, true, "Also print the time of each phase.");
DEFINE_string(dataset_name, "",
              "With --dataset_dir: also time the input pipeline alone.");
DEFINE_string(dataset_dir, "", "Converted TFRecords of --dataset_name.");
DEFINE_string(preprocessing_name, "",
              "Preprocessing of the pipeline; empty = --model_name.");
DEFINE_int32(num_readers, 1, "Pipeline readers.");
DEFINE_int32(num_preprocessing_threads, 1, "Pipeline workers.");

namespace slimtorch {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

DEFINE_int32(premade_batches, 1,
             "With --dataset_dir: the step cycles through this many batches "
             "made before timing (1: TF-style one pre-made batch).");
DEFINE_bool(flush_denormal, false, "Flush denormal floats to zero (x86 FTZ/DAZ).");

double ImagesPerSec(double images, double ms) { return images * 1000 / ms; }

// With --dataset_dir: the dataset's input (as the tools build it).
InputOptions DatasetInput(int64_t image_size) {
  InputOptions in;
  in.dataset_dir = FLAGS_dataset_dir;
  in.split_name = "train";
  in.preprocessing_name = FLAGS_preprocessing_name.empty()
                              ? FLAGS_model_name
                              : FLAGS_preprocessing_name;
  in.image_size = image_size;
  in.batch_size = FLAGS_batch_size;
  in.num_readers = FLAGS_num_readers;
  in.num_preprocessing_threads = FLAGS_num_preprocessing_threads;
  return in;
}

// Returns the image size it used. With --dataset_dir the pre-made batch is
// the dataset's first training batch, else random normal images and labels.
int64_t ProfileStep() {
  torch::manual_seed(0);
  if (FLAGS_caching_allocator) UseCachingCpuAllocator();
  nets::SetFusedBatchNorm(FLAGS_fused_batch_norm);
  if (FLAGS_flush_denormal) at::globalContext().setFlushDenormal(true);
  auto net =
      CreateNet(FLAGS_model_name, NetOptions()
                                      .num_classes(FLAGS_num_classes)
                                      .weight_decay(FLAGS_weight_decay)
                                      .input_channels(FLAGS_input_channels)
                                      .image_size(FLAGS_image_size));
  net->SetMemoryFormat(
      ResolveDataFormat(FLAGS_data_format, FLAGS_model_name, torch::kCPU));
  net->module().train();
  const Precision precision = ParsePrecision(FLAGS_precision, torch::kCPU);
  const int64_t size =
      FLAGS_image_size > 0 ? FLAGS_image_size : net->default_image_size();
  NamedTensors trainable = net->TrainableVariables();
  auto opt = CreateOptimizer(FLAGS_optimizer, trainable, {});
  std::vector<torch::Tensor> xs;
  std::vector<torch::Tensor> ys;
  if (FLAGS_dataset_dir.empty()) {
    xs.push_back(
        torch::randn({FLAGS_batch_size, FLAGS_input_channels, size, size}));
    ys.push_back(torch::randint(0, FLAGS_num_classes, {FLAGS_batch_size},
                                torch::kInt64));
  } else {
    SLIM_CHECK(!FLAGS_dataset_name.empty(),
               "--dataset_dir needs --dataset_name");
    SLIM_CHECK(FLAGS_premade_batches > 0, "--premade_batches must be > 0");
    const DatasetSpec spec = GetDatasetSpec(FLAGS_dataset_name);
    std::unique_ptr<BatchSource> input = MakeInput(spec, DatasetInput(size));
    for (int i = 0; i < FLAGS_premade_batches; ++i) {
      Batch b = *input->Next();
      xs.push_back(b.images);
      ys.push_back(b.labels);
    }
  }

  double fwd = 0, bwd = 0, upd = 0;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
  for (int s = -FLAGS_warmup; s < FLAGS_steps; ++s) {
    if (s == 0 && !FLAGS_profile_file.empty()) {
      profile = std::make_unique<torch::autograd::profiler::RecordProfile>(
          FLAGS_profile_file);
    }
    const auto t0 = Clock::now();
    const size_t k = static_cast<size_t>(s + FLAGS_warmup) % xs.size();
    NetOutput out;
    {
      AutocastScope autocast(precision, torch::kCPU);
      out = net->Forward(xs[k]);
    }
    torch::Tensor loss =
        SoftmaxCrossEntropy(out.logits.to(torch::kFloat32), ys[k]);
    if (out.aux_logits.defined()) {
      // train_image_classifier's auxiliary loss (weight 0.4).
      loss = loss + 0.4 * SoftmaxCrossEntropy(
                              out.aux_logits.to(torch::kFloat32), ys[k]);
    }
    if (FLAGS_l2_autograd) loss = loss + net->RegularizationLoss();
    loss.item<double>();
    const auto t1 = Clock::now();
    for (auto& v : trainable) v.tensor.mutable_grad() = torch::Tensor();
    loss.backward();
    // As the trainer: the L2 terms' gradients added straight to .grad.
    if (!FLAGS_l2_autograd) net->ApplyRegularizationGradients().item<double>();
    const auto t2 = Clock::now();
    opt->Apply(FLAGS_learning_rate);
    const auto t3 = Clock::now();
    if (s >= 0) {
      fwd += Ms(t0, t1);
      bwd += Ms(t1, t2);
      upd += Ms(t2, t3);
    }
  }
  profile.reset();  // writes the trace
  const double n = FLAGS_steps;
  const double total = fwd + bwd + upd;
  if (FLAGS_breakdown) {
    std::printf(
        "model step (%s, %s batch(es) %d of %lldx%lld, %d threads): "
        "forward+loss %.2f ms, backward %.2f ms, %s update %.2f ms, "
        "total %.2f ms = %.0f images/s\n",
        FLAGS_model_name.c_str(),
        FLAGS_dataset_dir.empty()
            ? "one random"
            : (std::to_string(FLAGS_premade_batches) + " dataset").c_str(),
        FLAGS_batch_size, static_cast<long long>(size), static_cast<long long>(size),
        FLAGS_threads, fwd / n, bwd / n, FLAGS_optimizer.c_str(), upd / n,
        total / n, ImagesPerSec(FLAGS_batch_size * n, total));
    if (FLAGS_caching_allocator) {
      const CpuAllocatorStats a = CachingCpuAllocatorStats();
      std::printf(
          "caching CPU allocator: %lld large blocks, %lld from the cache, "
          "peak %.1f MiB in use, %.1f MiB cached\n",
          static_cast<long long>(a.allocations),
          static_cast<long long>(a.cache_hits), a.peak_bytes_in_use / 1048576.0,
          a.cached_bytes / 1048576.0);
    }
  }
  std::printf(
      "step_profile model=%s batch=%d image_size=%lld threads=%d steps=%d "
      "data_format=%s ms_per_step=%.3f images_per_sec=%.*f\n",
      FLAGS_model_name.c_str(), FLAGS_batch_size, static_cast<long long>(size),
      FLAGS_threads, FLAGS_steps,
      net->memory_format() == torch::MemoryFormat::ChannelsLast
          ? "channels_last"
          : "channels_first",
      total / n,
      // (three decimals below 10 images/s: the big nets' ratios to a peer
      // need more than one)
      ImagesPerSec(FLAGS_batch_size * n, total) < 10 ? 3 : 1,
      ImagesPerSec(FLAGS_batch_size * n, total));
  return size;
}

void ProfilePipeline(int64_t image_size) {
  DatasetSpec spec = GetDatasetSpec(FLAGS_dataset_name);
  InputOptions in = DatasetInput(image_size);
  std::unique_ptr<BatchSource> pipeline = MakeInput(spec, in);
  for (int i = 0; i < FLAGS_warmup; ++i) pipeline->Next();
  const auto t0 = Clock::now();
  for (int i = 0; i < FLAGS_steps; ++i) pipeline->Next();
  const double ms = Ms(t0, Clock::now());
  const double n = FLAGS_steps;
  if (FLAGS_breakdown) {
    std::printf(
        "input alone (%s): %.3f ms/batch = %.0f images/s\n",
        in.preprocessing_name.c_str(), ms / n,
        ImagesPerSec(FLAGS_batch_size * n, ms));
  }
  std::printf(
      "input_pipeline dataset=%s batch=%d ms_per_batch=%.3f "
      "images_per_sec=%.1f\n",
      FLAGS_dataset_name.c_str(), FLAGS_batch_size, ms / n,
      ImagesPerSec(FLAGS_batch_size * n, ms));
}

}  // namespace
}  // namespace slimtorch

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(
      argc, argv,
      "Times full training steps of a registered net on one pre-made batch.",
      [] {
        SLIM_CHECK(FLAGS_steps > 0 && FLAGS_warmup >= 0 && FLAGS_batch_size > 0,
                   "--steps and --batch_size must be positive, --warmup >= 0");
        at::set_num_threads(FLAGS_threads);
        const int64_t size = slimtorch::ProfileStep();
        if (!FLAGS_dataset_dir.empty()) slimtorch::ProfilePipeline(size);
      });
}
