#pragma once
// export_inference_graph: a net of the zoo, its weights frozen in, written
// as a file that runs without LibTorch (TF-Slim's export_inference_graph.py
// followed by freeze_graph, in one step).

#include <cstdint>
#include <memory>
#include <string>

#include "slimtorch/eval/calibration.h"
#include "slimtorch/export/inference_graph.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {

enum class ExportFormat { kOnnx, kGraphDef, kGraphDefText };

struct ExportOptions {
  std::string model_name = "inception_v3";
  // Height = width of the input; 0: the net's default_image_size.
  int64_t image_size = 0;
  // Batch of the input; 0: dynamic.
  int64_t batch_size = 0;
  // Only for the number of classes (minus labels_offset), as TF-Slim.
  std::string dataset_name = "imagenet";
  std::string dataset_dir;
  int64_t labels_offset = 0;
  bool use_grayscale = false;
  // The weights: a checkpoint of either kind, or a directory's latest.
  std::string checkpoint_path;
  // Non-zero: export the moving averages (as eval uses them).
  double moving_average_decay = 0;
  std::string output_file;
  // ONNX unless the output file ends in .pb / .pbtxt (or this says so).
  bool write_text_graphdef = false;
  // Video nets (i3d, s3dg): --is_video_model must be set for them (and only
  // for them), with the frames of the exported input [batch, num_frames,
  // size, size, channels] (required, as TF-Slim requires it).
  bool is_video_model = false;
  int64_t num_frames = 0;
  // --quantize: the 8-bit graph (TF's eval rewrite, batch norm folded, the
  // weights and activations fake-quantized; ONNX in QDQ form), with the
  // checkpoint's ranges (quantization-aware training), or, with
  // calibration.dataset_dir set, ranges calibrated on that data
  // (post-training quantization; calibration.dataset_name "" = dataset_name).
  bool quantize = false;
  bool quantize_per_channel = false;
  CalibrationRun calibration;
};

// The format `output_file` asks for: ".onnx" (or any other name) → ONNX,
// ".pb" → GraphDef, ".pbtxt" or write_text_graphdef → text GraphDef.
ExportFormat ExportFormatFor(const std::string& output_file,
                             bool write_text_graphdef);

// Records `net`'s inference graph (eval mode) for `batch` x `size` x `size`
// images (a video net: clips of its num_frames() frames).
InferenceGraph RecordInferenceGraph(Net& net, int64_t size, int64_t batch);

struct ExportResult {
  std::string output_file;
  ExportFormat format = ExportFormat::kOnnx;
  std::string checkpoint;  // the checkpoint the weights came from
  int64_t global_step = 0;
  int64_t num_classes = 0;
  int64_t image_size = 0;
  int64_t num_frames = 0;  // video nets
  size_t nodes = 0;        // nodes of the recorded graph
  bool quantized = false;
  CalibrationResult calibration;  // when calibrated
};

// Builds the net, restores the checkpoint, records and writes. Errors name
// the flag, file or variables at fault; nothing is left under output_file
// when it fails.
ExportResult ExportInferenceGraph(const ExportOptions& options);

}  // namespace slimtorch
