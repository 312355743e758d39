// Inference speed of an exported net: LibTorch eager (eval_image_classifier's
// forward pass) and, when built with OpenCV, the exported ONNX model in
// OpenCV's DNN module (label_image's engine), on the same threads.
// bench/export/export_inference.sh runs it beside onnxruntime on the same ONNX
// file and TensorFlow on the frozen GraphDef of the same weights (--graphdef).
//
//   build/bench/inference_bench --model_name=mobilenet_v1 --num_threads=2 \
//       --onnx=/tmp/mobilenet_v1.onnx [--write_onnx] [--graphdef=/tmp/m.pb] \
//       [--onnx_clip=/tmp/mobilenet_v1_clip.onnx] \
//       [--onnx_int8=/tmp/mobilenet_v1_int8.onnx]
//
// Prints "engine=<e> latency_ms=<median batch-1> images_per_s=<batch-32>"
// lines (medians over --rounds).

#include <gflags/gflags.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/timing.h"
#include "slimtorch/core/error.h"
#include "slimtorch/export/export.h"
#include "slimtorch/export/graphdef_writer.h"
#include "slimtorch/export/onnx_writer.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/nets/quantize.h"
#include "slimtorch/nets/range_calibration.h"
#include "tool_common.h"
#ifdef SLIMTORCH_WITH_OPENCV
#include <opencv2/core.hpp>

#include "slimtorch/export/opencv_model.h"
#endif

DEFINE_string(model_name, "mobilenet_v1", "The net.");
DEFINE_int32(num_classes, 1001, "Its classes.");
DEFINE_string(onnx, "", "The ONNX file (written with --write_onnx).");
DEFINE_bool(write_onnx, false, "Export the net (random weights) to --onnx.");
DEFINE_string(graphdef, "",
              "Also export the same net as a frozen GraphDef (.pb) here.");
DEFINE_string(onnx_clip, "",
              "Also export the same weights with Relu6 as Clip (the float "
              "form onnxruntime fuses into its convolutions) here.");
DEFINE_string(onnx_int8, "",
              "Also export the same weights as an 8-bit ONNX (QDQ form, "
              "ranges calibrated on random images) here.");
DEFINE_int32(num_threads, 2, "Threads of every engine.");
DEFINE_int32(batch_size, 32, "Batch of the throughput runs.");
DEFINE_int32(rounds, 7, "Timed runs per measure (after one untimed).");

namespace slimtorch {
namespace {

using bench::Median;

// Median seconds of fn() over --rounds, after a warm-up call.
double Time(const std::function<void()>& fn) {
  fn();
  std::vector<double> s;
  for (int r = 0; r < FLAGS_rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    s.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  return Median(s);
}

void Report(const char* engine, double one, double batch) {
  std::printf("engine=%s latency_ms=%.2f images_per_s=%.1f\n", engine,
              one * 1e3, FLAGS_batch_size / batch);
  std::fflush(stdout);
}

// The 8-bit export of a copy of `net` (export_inference_graph --quantize
// --calibration_dataset_dir, minus the dataset): quantized as TensorFlow's
// eval rewrite does, each activation's range the min / max it took on two
// batches of random images like the timed ones. The speed of the integer
// kernels does not depend on the values, only on which ops are quantized.
void WriteInt8Onnx(const Net& net, int64_t size) {
  std::shared_ptr<Net> q8 = net.Clone();
  q8->EnableQuantization(nets::QuantizeOptions(), size);
  nets::Quantizer* q = q8->quantizer();
  std::map<std::string, nets::RangeObserver> observers;
  q->SetObserver([&](const std::string& name, const torch::Tensor& y) {
    observers[name].Observe(y);
  });
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(1);
    for (int b = 0; b < 2; ++b)
      q8->Forward(torch::rand({8, 3, size, size}) * 2 - 1);
  }
  q->SetObserver(nullptr);
  for (const std::string& name : q->ActivationRangeNames()) {
    const std::pair<float, float> r = observers.at(name).Range();
    q->SetActivationRange(name, r.first, r.second);
  }
  q->CheckRanges();
  WriteOnnxModel(FLAGS_onnx_int8, RecordInferenceGraph(*q8, size, 0));
}

void Run() {
  SLIM_CHECK(!FLAGS_onnx.empty(), "--onnx is required");
  tools::SetThreads(FLAGS_num_threads);
  auto net =
      CreateNet(FLAGS_model_name, NetOptions().num_classes(FLAGS_num_classes));
  net->module().eval();
  const int64_t s = net->default_image_size();
  if (FLAGS_write_onnx || !FLAGS_graphdef.empty() || !FLAGS_onnx_clip.empty()) {
    const InferenceGraph graph = RecordInferenceGraph(*net, s, 0);
    if (FLAGS_write_onnx) WriteOnnxModel(FLAGS_onnx, graph);
    if (!FLAGS_onnx_clip.empty()) {
      WriteOnnxModel(FLAGS_onnx_clip, graph, OnnxOptions().relu6_as_clip(true));
    }
    if (!FLAGS_graphdef.empty()) WriteGraphDef(FLAGS_graphdef, graph);
  }
  if (!FLAGS_onnx_int8.empty()) WriteInt8Onnx(*net, s);
  torch::manual_seed(0);
  const torch::Tensor one = torch::rand({1, 3, s, s}) * 2 - 1;
  const torch::Tensor batch = torch::rand({FLAGS_batch_size, 3, s, s}) * 2 - 1;
  {
    torch::NoGradGuard no_grad;
    Report("libtorch_eager", Time([&] { net->Forward(one); }),
           Time([&] { net->Forward(batch); }));
  }
#ifdef SLIMTORCH_WITH_OPENCV
  cv::setNumThreads(FLAGS_num_threads);
  OpenCvModel model(FLAGS_onnx);
  const std::string out = net->scope() + "/Predictions";
  const torch::Tensor one_nhwc = one.permute({0, 2, 3, 1}).contiguous();
  const torch::Tensor batch_nhwc = batch.permute({0, 2, 3, 1}).contiguous();
  Report("opencv_dnn", Time([&] { model.Run(one_nhwc, "input", out); }),
         Time([&] { model.Run(batch_nhwc, "input", out); }));
#endif
}

}  // namespace
}  // namespace slimtorch

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(argc, argv, "Inference speed",
                                   [] { slimtorch::Run(); });
}
