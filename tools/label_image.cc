// label_image: TensorFlow's examples/label_image for slimtorch's exported
// models. Runs the ONNX file of export_inference_graph through OpenCV's DNN
// module, or through onnxruntime (loaded at run time) for an int8 QDQ model,
// which OpenCV 4.6 cannot import (no LibTorch math either way); built
// without OpenCV and given a checkpoint, runs it through LibTorch, and says
// so.

#include "slimtorch/export/label_image.h"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <torch/torch.h>

#include <cstdio>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/export/export.h"
#include "slimtorch/export/onnxruntime_model.h"
#include "slimtorch/train/variables.h"
#include "tool_common.h"
#ifdef SLIMTORCH_WITH_OPENCV
#include "slimtorch/export/opencv_model.h"
#endif

DEFINE_string(image, "",
              "The image to classify: a file, several separated by commas, "
              "or a folder of images.");
DEFINE_string(graph, "",
              "The model: an ONNX file written by export_inference_graph.");
DEFINE_string(labels, "",
              "Class names: TF-Slim's labels.txt (\"3:roses\") or one name "
              "per line (line number = class index); empty: indices only.");
DEFINE_int32(input_width, 0,
             "Resize the image to this width (0: the model's input width).");
DEFINE_int32(input_height, 0,
             "Resize the image to this height (0: the model's input height).");
DEFINE_double(input_mean, 0, "Subtracted from each pixel value.");
DEFINE_double(input_std, 255, "Pixel values are divided by this.");
DEFINE_string(input_layer, "input", "The model's input.");
DEFINE_string(output_layer, "",
              "The output to rank (empty: the model's predictions, "
              "<Scope>/Predictions).");
DEFINE_string(runtime, "auto",
              "What runs the ONNX model: auto (onnxruntime for an int8 QDQ "
              "model, OpenCV's DNN module for the others), opencv or "
              "onnxruntime.");
DEFINE_string(onnxruntime_library, "",
              "onnxruntime's shared library (empty: "
              "$SLIMTORCH_ONNXRUNTIME_LIBRARY, else libonnxruntime.so.1 or "
              "libonnxruntime.so on the loader's path).");
DEFINE_string(model_name, "",
              "Use this net's eval preprocessing (as eval_image_classifier) "
              "instead of resize + mean/std; without OpenCV, the net to run.");
DEFINE_string(preprocessing_name, "",
              "The eval preprocessing to use (default: --model_name's).");
DEFINE_bool(use_grayscale, false,
            "Whether to convert input images to grayscale.");
DEFINE_int32(top_k, 5, "How many classes to print per image.");
DEFINE_string(checkpoint_path, "",
              "Without OpenCV: the checkpoint to run through LibTorch.");
DEFINE_int32(num_classes, 0,
             "Without OpenCV: the net's classes (0: the --labels count).");
DEFINE_bool(self_test, false, "Unused (TensorFlow's self test).");
DEFINE_string(root_dir, "", "Prepended to --image, --graph and --labels.");

// --help's groups of the flags above (tools/tool_common.h), each flag in
// one.
const slimtorch::tools::FlagGroups kFlagGroups = {
    {"Images",
     {"image", "root_dir"}},
    {"Model",
     {"graph", "runtime", "onnxruntime_library", "input_layer", "output_layer",
      "checkpoint_path", "model_name", "num_classes"}},
    {"Preprocessing",
     {"preprocessing_name", "input_width", "input_height", "input_mean",
      "input_std", "use_grayscale"}},
    {"Results",
     {"labels", "top_k"}},
    {"TensorFlow's label_image (unused)",
     {"self_test"}},
};

namespace {

std::string Rooted(const std::string& path) {
  if (FLAGS_root_dir.empty() || path.empty()) return path;
  return slimtorch::JoinPath(FLAGS_root_dir, path);
}

// Runs the images through one engine and prints the top classes.
class Engine {
 public:
  virtual ~Engine() = default;
  // Scores [classes] of one NHWC image.
  virtual torch::Tensor Scores(const torch::Tensor& nhwc) = 0;
};

#ifdef SLIMTORCH_WITH_OPENCV
class OpenCvEngine : public Engine {
 public:
  OpenCvEngine(const std::string& graph, std::string input, std::string output)
      : model_(graph), input_(std::move(input)), output_(std::move(output)) {}
  torch::Tensor Scores(const torch::Tensor& nhwc) override {
    return model_.Run(nhwc, input_, output_).reshape({-1});
  }

 private:
  slimtorch::OpenCvModel model_;
  std::string input_, output_;
};
#endif

class OnnxRuntimeEngine : public Engine {
 public:
  OnnxRuntimeEngine(const std::string& graph, std::string input,
                    std::string output)
      : model_(graph, slimtorch::OnnxRuntimeOptions().library(
                          FLAGS_onnxruntime_library)),
        input_(std::move(input)),
        output_(std::move(output)) {}
  torch::Tensor Scores(const torch::Tensor& nhwc) override {
    return model_.Run(nhwc, input_, output_).reshape({-1});
  }
  const slimtorch::OnnxRuntimeInfo& info() const { return model_.info(); }

 private:
  slimtorch::OnnxRuntimeModel model_;
  std::string input_, output_;
};

class LibTorchEngine : public Engine {
 public:
  explicit LibTorchEngine(std::shared_ptr<slimtorch::Net> net)
      : net_(std::move(net)) {}
  torch::Tensor Scores(const torch::Tensor& nhwc) override {
    torch::NoGradGuard no_grad;
    const torch::Tensor logits =
        net_->Forward(nhwc.permute({0, 3, 1, 2}).contiguous()).logits;
    return torch::softmax(logits, -1).reshape({-1});
  }

 private:
  std::shared_ptr<slimtorch::Net> net_;
};

slimtorch::ImageInputOptions InputFromFlags() {
  slimtorch::ImageInputOptions in;
  in.input_mean = FLAGS_input_mean;
  in.input_std = FLAGS_input_std;
  in.use_grayscale = FLAGS_use_grayscale;
  in.preprocessing_name = FLAGS_preprocessing_name.empty()
                              ? FLAGS_model_name
                              : FLAGS_preprocessing_name;
  return in;
}

// The --graph ONNX model's input size goes to `in`; returns its path, input
// and the output to rank, checked against the flags.
struct Graph {
  std::string path, input, output;
  bool quantized = false;
};
Graph ReadGraph(slimtorch::ImageInputOptions* in) {
  using namespace slimtorch;
  SLIM_CHECK(!FLAGS_graph.empty(),
             "You must supply the model with --graph (an .onnx file written "
             "by export_inference_graph)");
  const std::string graph = Rooted(FLAGS_graph);
  const OnnxSignature sig = ReadOnnxSignature(graph);
  SLIM_CHECK(sig.input == FLAGS_input_layer, graph, " has input '", sig.input,
             "', not --input_layer=", FLAGS_input_layer);
  SLIM_CHECK(sig.input_dims.size() == 4, graph,
             ": expected an NHWC image input, got ", sig.input_dims.size(),
             " dimensions");
  in->height = sig.input_dims[1];
  in->width = sig.input_dims[2];
  in->channels = sig.input_dims[3];
  const std::string output =
      FLAGS_output_layer.empty() ? sig.outputs.back() : FLAGS_output_layer;
  SLIM_CHECK(std::find(sig.outputs.begin(), sig.outputs.end(), output) !=
                 sig.outputs.end(),
             graph, " has no output --output_layer=", output);
  if (FLAGS_input_height > 0 || FLAGS_input_width > 0) {
    SLIM_CHECK(
        FLAGS_input_height == in->height && FLAGS_input_width == in->width,
        graph, " takes ", in->height, "x", in->width,
        " images, not --input_height=", FLAGS_input_height,
        " --input_width=", FLAGS_input_width);
  }
  return {graph, sig.input, output, sig.quantized};
}

#ifdef SLIMTORCH_WITH_OPENCV
constexpr bool kWithOpenCv = true;
#else
constexpr bool kWithOpenCv = false;
#endif

// --runtime for `graph`: "opencv" or "onnxruntime".
std::string ChooseRuntime(const Graph& graph) {
  const std::string& r = FLAGS_runtime;
  SLIM_CHECK(r == "auto" || r == "opencv" || r == "onnxruntime",
             "--runtime=", r, " is not one of auto, opencv, onnxruntime");
  SLIM_CHECK(r != "opencv" || kWithOpenCv,
             "--runtime=opencv: this label_image was built without OpenCV's "
             "DNN module; use --runtime=onnxruntime");
  if (r != "auto") return r;
  return graph.quantized || !kWithOpenCv ? "onnxruntime" : "opencv";
}

std::unique_ptr<Engine> MakeOnnxRuntimeEngine(const Graph& graph) {
  std::string why = "--runtime=onnxruntime";
  if (FLAGS_runtime == "auto") {
    why = graph.quantized
              ? "an int8 QDQ model (QuantizeLinear / DequantizeLinear "
                "nodes), which OpenCV 4.6 cannot import"
              : "this label_image was built without OpenCV";
  }
  std::unique_ptr<OnnxRuntimeEngine> engine;
  try {
    engine = std::make_unique<OnnxRuntimeEngine>(graph.path, graph.input,
                                                 graph.output);
  } catch (const slimtorch::Error& e) {
    SLIM_FAIL(graph.path, " runs in onnxruntime (", why, "); ", e.what());
  }
  const slimtorch::OnnxRuntimeInfo& info = engine->info();
  LOG(INFO) << "running " << graph.path << " through onnxruntime "
            << info.version << " (" << info.library << ", C API "
            << info.api_version << "): " << why;
  return engine;
}

// The --graph ONNX model through OpenCV or onnxruntime (--runtime).
std::unique_ptr<Engine> MakeOnnxEngine(slimtorch::ImageInputOptions* in) {
  const Graph graph = ReadGraph(in);
  if (ChooseRuntime(graph) == "onnxruntime")
    return MakeOnnxRuntimeEngine(graph);
#ifdef SLIMTORCH_WITH_OPENCV
  if (graph.quantized) {
    LOG(WARNING) << graph.path << " is an int8 QDQ model: OpenCV "
                 << slimtorch::OpenCvModel::Version()
                 << " may not import it (--runtime=auto runs it in "
                    "onnxruntime)";
  }
  LOG(INFO) << "running " << graph.path << " through OpenCV "
            << slimtorch::OpenCvModel::Version() << "'s DNN module";
  return std::make_unique<OpenCvEngine>(graph.path, graph.input, graph.output);
#else
  SLIM_FAIL("unreachable: --runtime=opencv without OpenCV");
#endif
}

// The --checkpoint_path net through LibTorch (`num_names` classes unless
// --num_classes); its input size goes to `in`.
std::unique_ptr<Engine> MakeLibTorchEngine(size_t num_names,
                                           slimtorch::ImageInputOptions* in) {
  using namespace slimtorch;
  SLIM_CHECK(!FLAGS_model_name.empty() && !FLAGS_checkpoint_path.empty(),
             "this label_image was built without OpenCV: it runs a "
             "checkpoint through LibTorch and needs --model_name and "
             "--checkpoint_path (and --labels or --num_classes)");
  const int64_t classes = FLAGS_num_classes > 0
                              ? FLAGS_num_classes
                              : static_cast<int64_t>(num_names);
  SLIM_CHECK(classes > 0, "give --num_classes or --labels");
  auto net = CreateNet(FLAGS_model_name, NetOptions().num_classes(classes));
  net->module().eval();
  RestoreOptions restore;  // label_image has no scope flags
  restore.hints.model_name = FLAGS_model_name;
  restore.hints.classes_flags = "--labels or --num_classes";
  restore.hints.channels_flags =
      "--checkpoint_path (label_image feeds the net 3-channel images)";
  RestoreCheckpointFor(FLAGS_checkpoint_path, *net, restore, false);
  in->height =
      FLAGS_input_height > 0 ? FLAGS_input_height : net->default_image_size();
  in->width =
      FLAGS_input_width > 0 ? FLAGS_input_width : net->default_image_size();
  in->channels = net->input_channels();
  LOG(INFO) << "built without OpenCV: running " << FLAGS_model_name << " from "
            << FLAGS_checkpoint_path << " through LibTorch";
  return std::make_unique<LibTorchEngine>(net);
}

// Built without OpenCV, a --checkpoint_path (or no --graph) runs through
// LibTorch as before; otherwise the --graph ONNX model runs.
std::unique_ptr<Engine> MakeEngine(size_t num_names,
                                   slimtorch::ImageInputOptions* in) {
  if (!kWithOpenCv && (!FLAGS_checkpoint_path.empty() || FLAGS_graph.empty()))
    return MakeLibTorchEngine(num_names, in);
  return MakeOnnxEngine(in);
}

// Prints the top --top_k classes of `scores` (named by `names` when given),
// under the image's path when there are several images.
void PrintTopClasses(const std::string& path, const torch::Tensor& scores,
                     const std::vector<std::string>& names, bool several) {
  SLIM_CHECK(
      names.empty() || static_cast<int64_t>(names.size()) >= scores.numel(),
      FLAGS_labels, " names ", names.size(), " classes; the model has ",
      scores.numel());
  if (several) std::printf("%s\n", path.c_str());
  for (const auto& [index, score] : slimtorch::TopK(scores, FLAGS_top_k)) {
    const std::string name =
        names.empty() ? std::to_string(index) : names[index];
    std::printf("%s (%lld): %.6f\n", name.c_str(),
                static_cast<long long>(index), score);
  }
}

void Run() {
  using namespace slimtorch;
  SLIM_CHECK(FLAGS_top_k > 0, "--top_k must be positive, got ", FLAGS_top_k);
  const std::vector<std::string> images = ListImageFiles(Rooted(FLAGS_image));
  std::vector<std::string> names;
  if (!FLAGS_labels.empty()) names = ReadClassNames(Rooted(FLAGS_labels));
  ImageInputOptions in = InputFromFlags();
  const std::unique_ptr<Engine> engine = MakeEngine(names.size(), &in);
  for (const std::string& path : images) {
    const torch::Tensor scores = engine->Scores(LoadModelInput(path, in));
    PrintTopClasses(path, scores, names, images.size() > 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(
      argc, argv,
      "Classifies images with an exported model (TensorFlow's label_image): "
      "prints the top classes with their names and scores.\nExample:\n"
      "  label_image --graph=/tmp/inception_v3.onnx --image=flowers/ "
      "--labels=/tmp/flowers/labels.txt --model_name=inception_v3",
      kFlagGroups, Run);
}
