#include "slimtorch/export/export.h"

#include <glog/logging.h>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/data/input.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/export/graphdef_writer.h"
#include "slimtorch/export/onnx_writer.h"
#include "slimtorch/train/variables.h"

namespace slimtorch {
namespace {

const char* FormatName(ExportFormat f) {
  switch (f) {
    case ExportFormat::kOnnx:
      return "ONNX";
    case ExportFormat::kGraphDef:
      return "GraphDef";
    case ExportFormat::kGraphDefText:
      return "text GraphDef";
  }
  return "?";
}

// TF-Slim's export_inference_graph.py: --num_frames is required with
// --is_video_model (it is the placeholder's frame axis); without it the
// flag would be ignored there, an error here.
void CheckVideoFlags(const ExportOptions& o) {
  SLIM_CHECK(o.num_frames >= 0, "--num_frames must be positive, got ",
             o.num_frames);
  SLIM_CHECK(!o.is_video_model || o.num_frames > 0,
             "Number of frames must be specified for video models with "
             "--num_frames");
  SLIM_CHECK(o.is_video_model || o.num_frames == 0,
             "--num_frames applies to video models only (with "
             "--is_video_model)");
}

// --is_video_model is for the video nets, which need it; returns the
// frames of `net`'s clips (0: an image net).
int64_t CheckVideoNet(const ExportOptions& o, const Net& net) {
  const int64_t frames = net.num_frames();
  SLIM_CHECK(o.is_video_model == (frames > 0), "--model_name=", o.model_name,
             frames > 0 ? " is a video net (clips [batch, frames, height, "
                          "width, channels]): export it with --is_video_model "
                          "and --num_frames"
                        : " is an image net: --is_video_model applies to the "
                          "video nets (i3d, s3dg) only");
  return frames;
}

// ", 8 frames" for a video net's log line.
std::string FramesNote(int64_t frames) {
  return frames > 0 ? ", " + std::to_string(frames) + " frames" : "";
}

// --quantize: the ranges from calibration, or else from the checkpoint
// (which must have them).
void Quantize(const ExportOptions& o, Net& net,
              const std::vector<std::string>& absent, ExportResult* result) {
  result->quantized = true;
  if (o.calibration.dataset_dir.empty()) {
    RequireQuantizationRanges(result->checkpoint, absent);
    net.quantizer()->CheckRanges();
    return;
  }
  CalibrationRun run = o.calibration;
  if (run.dataset_name.empty()) run.dataset_name = o.dataset_name;
  run.model_name = o.model_name;
  run.image_size = result->image_size;
  run.use_grayscale = o.use_grayscale;
  if (absent.empty()) {
    LOG(INFO) << "Calibration replaces the ranges " << result->checkpoint
              << " holds";
  }
  result->calibration = CalibrateQuantization(net, run);
}

// The checkpoint's weights into `net` (made 8-bit first with --quantize,
// its ranges from the checkpoint or calibration).
void RestoreWeights(const ExportOptions& o, Net& net, ExportResult* result) {
  if (o.quantize) {
    net.EnableQuantization(
        nets::QuantizeOptions().per_channel(o.quantize_per_channel),
        result->image_size);
  }
  RestoreOptions restore;  // export_inference_graph has no scope flags
  restore.hints.model_name = o.model_name;
  std::vector<std::string> absent;
  QuantizationRangesOptional(net, &restore, &absent);
  const RestoredCheckpoint restored = RestoreCheckpointFor(
      o.checkpoint_path, net, restore, o.moving_average_decay != 0.0);
  result->checkpoint = restored.path;
  result->global_step = restored.global_step.value_or(0);
  if (o.quantize) Quantize(o, net, absent, result);
}

// Calibration flags without --quantize would be ignored: an error.
void CheckQuantizeFlags(const ExportOptions& o) {
  SLIM_CHECK(o.quantize || (!o.quantize_per_channel &&
                            o.calibration.dataset_dir.empty()),
             "--quantize_per_channel and --calibration_dataset_dir apply "
             "with --quantize");
}

}  // namespace

ExportFormat ExportFormatFor(const std::string& output_file,
                             bool write_text_graphdef) {
  if (write_text_graphdef || EndsWith(output_file, ".pbtxt")) {
    return ExportFormat::kGraphDefText;
  }
  if (EndsWith(output_file, ".pb")) return ExportFormat::kGraphDef;
  return ExportFormat::kOnnx;
}

InferenceGraph RecordInferenceGraph(Net& net, int64_t size, int64_t batch) {
  net.CheckImageSize(size);
  net.module().eval();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape = {std::max<int64_t>(batch, 1),
                                net.input_channels(), size, size};
  if (net.num_frames() > 0) shape.insert(shape.begin() + 2, net.num_frames());
  const torch::Tensor images = torch::zeros(shape);
  GraphRecorder recorder(images, ModulePaths(net.module(), net.scope()));
  const NetOutput out = net.Forward(images);
  SLIM_CHECK(out.logits.defined() && out.logits.dim() == 2, "exporting ",
             net.scope(), ": the net's logits are ", out.logits.sizes(),
             ", expected [batch, classes] (a net built "
             "with num_classes 0 or without spatial squeeze has none)");
  return recorder.Finish(net.scope(), out.logits, out.end_points);
}

ExportResult ExportInferenceGraph(const ExportOptions& o) {
  SLIM_CHECK(!o.output_file.empty(),
             "You must supply the path to save to with --output_file");
  SLIM_CHECK(o.batch_size >= 0, "--batch_size must be >= 0 (0: dynamic), got ",
             o.batch_size);
  SLIM_CHECK(o.image_size >= 0,
             "--image_size must be >= 0 (0: the net's default), got ",
             o.image_size);
  ExportResult result;
  result.output_file = o.output_file;
  result.format = ExportFormatFor(o.output_file, o.write_text_graphdef);
  SLIM_CHECK(!o.checkpoint_path.empty(),
             "--checkpoint_path is required: the exported model carries its "
             "weights (TF-Slim's graph-only export plus freeze_graph, in one "
             "step)");

  CheckVideoFlags(o);
  CheckQuantizeFlags(o);
  const DatasetSpec spec = ResolveDatasetSpec(o.dataset_name, o.dataset_dir);
  result.num_classes = NumNetClasses(spec, o.labels_offset);
  InputOptions input;
  input.use_grayscale = o.use_grayscale;
  std::shared_ptr<Net> net =
      CreateNet(o.model_name, NetOptions()
                                  .num_classes(result.num_classes)
                                  .input_channels(InputChannels(spec, input))
                                  .image_size(o.image_size)
                                  .num_frames(o.num_frames));
  result.num_frames = CheckVideoNet(o, *net);
  result.image_size =
      o.image_size > 0 ? o.image_size : net->default_image_size();
  net->CheckImageSize(result.image_size);
  RestoreWeights(o, *net, &result);

  const InferenceGraph graph =
      RecordInferenceGraph(*net, result.image_size, o.batch_size);
  result.nodes = graph.nodes.size();
  if (result.format == ExportFormat::kOnnx) {
    WriteOnnxModel(o.output_file, graph,
                   OnnxOptions().batch_size(o.batch_size));
  } else {
    WriteGraphDef(o.output_file, graph,
                  GraphDefOptions().batch_size(o.batch_size),
                  /*text=*/result.format == ExportFormat::kGraphDefText);
  }
  LOG(INFO) << "Exported " << o.model_name << " (" << result.num_classes
            << " classes, " << result.image_size << "x" << result.image_size
            << FramesNote(result.num_frames)
            << ", batch "
            << (o.batch_size > 0 ? std::to_string(o.batch_size) : "dynamic")
            << ") from " << result.checkpoint << " (step " << result.global_step
            << ") to " << o.output_file << " as "
            << (result.quantized ? "8-bit " : "") << FormatName(result.format);
  return result;
}

}  // namespace slimtorch
