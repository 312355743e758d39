// export_inference_graph: TF-Slim's export_inference_graph.py in C++, with
// freeze_graph's step built in: the net and its checkpoint's weights in one
// ONNX file or frozen TensorFlow GraphDef (.pb, .pbtxt).

#include <gflags/gflags.h>

#include "slimtorch/export/export.h"
#include "calibration_flags.h"
#include "tool_common.h"

DEFINE_string(model_name, "inception_v3",
              "The name of the architecture to save.");
DEFINE_bool(is_training, false,
            "Whether to save out a training-focused version of the model.");
DEFINE_int32(
    image_size, 0,
    "The image size to use, otherwise use the model default_image_size "
    "(0).");
DEFINE_int32(batch_size, 0,
             "Batch size for the exported model. Defaulted to \"None\" (0) so "
             "batch size can be specified at model runtime.");
DEFINE_string(dataset_name, "imagenet",
              "The name of the dataset to use with the model.");
DEFINE_int32(labels_offset, 0,
             "An offset for the labels in the dataset. This flag is primarily "
             "used to evaluate the VGG and ResNet architectures which do not "
             "use a background class for the ImageNet dataset.");
DEFINE_string(output_file, "", "Where to save the resulting file to.");
DEFINE_string(dataset_dir, "",
              "Directory to save intermediate dataset files to");
DEFINE_bool(quantize, false, "whether to use quantized graph or not.");
DEFINE_bool(quantize_per_channel, false,
            "With --quantize: weights quantized per output channel (as "
            "trained with train_image_classifier --quantize_per_channel, or "
            "for calibration) (ours).");
DEFINE_string(preprocessing_name, "",
              "The calibration images' preprocessing; empty: the model's "
              "(ours).");
DEFINE_bool(is_video_model, false,
            "whether to use 5-D inputs for video model.");
DEFINE_int32(
    num_frames, 0,
    "The number of frames to use. Only used if is_video_model is True.");
DEFINE_bool(write_text_graphdef, false,
            "Whether to write a text version of graphdef.");
DEFINE_bool(use_grayscale, false,
            "Whether to convert input images to grayscale.");
DEFINE_string(checkpoint_path, "",
              "The checkpoint whose weights the file carries: a file, a "
              "TensorFlow checkpoint, or a directory's latest (ours; TF-Slim "
              "needed freeze_graph for this).");
DEFINE_double(moving_average_decay, 0.0,
              "Non-zero: export the moving averages of the variables, as "
              "eval_image_classifier evaluates them (ours).");

// --help's groups of the flags above (tools/tool_common.h), each flag in
// one.
const slimtorch::tools::FlagGroups kFlagGroups = {
    {"Model",
     {"model_name", "dataset_name", "labels_offset", "dataset_dir",
      "image_size", "batch_size", "use_grayscale", "is_training", "quantize",
      "is_video_model", "num_frames"}},
    {"Weights",
     {"checkpoint_path", "moving_average_decay"}},
    {"Output",
     {"output_file", "write_text_graphdef"}},
    {"8-bit (with --quantize)",
     {"quantize_per_channel", "calibration_dataset_dir",
      "calibration_dataset_name", "calibration_split_name",
      "calibration_batches", "calibration_batch_size", "calibration_method",
      "calibration_percentile", "preprocessing_name"}},
};

namespace {

// --calibration_*: the calibration, with --preprocessing_name.
slimtorch::CalibrationRun CalibrationFlags() {
  slimtorch::CalibrationRun run = slimtorch::tools::CalibrationFromFlags();
  run.preprocessing_name = FLAGS_preprocessing_name;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(
      argc, argv,
      "Writes a net of the zoo with its checkpoint's weights as an ONNX file "
      "(input 'input', NHWC float, as TF-Slim's placeholder; outputs "
      "'<Scope>/Logits' and '<Scope>/Predictions'), or as a frozen "
      "TensorFlow GraphDef when --output_file ends in .pb or .pbtxt (outputs "
      "'<Scope>/Logits' and '<Scope>/Predictions/Reshape_1'). The video "
      "nets (i3d, s3dg) take --is_video_model --num_frames=N: input [batch, "
      "N, size, size, channels].\nExample:\n"
      "  export_inference_graph --model_name=inception_v3 "
      "--checkpoint_path=/tmp/checkpoints/inception_v3.ckpt "
      "--output_file=/tmp/inception_v3.onnx",
      kFlagGroups, [] {
        slimtorch::tools::LogKernelSwitches();
        slimtorch::tools::FailIfSet({"is_training"});
        slimtorch::ExportOptions o;
        o.model_name = FLAGS_model_name;
        o.image_size = FLAGS_image_size;
        o.batch_size = FLAGS_batch_size;
        o.dataset_name = FLAGS_dataset_name;
        o.dataset_dir = FLAGS_dataset_dir;
        o.labels_offset = FLAGS_labels_offset;
        o.use_grayscale = FLAGS_use_grayscale;
        o.checkpoint_path = FLAGS_checkpoint_path;
        o.moving_average_decay = FLAGS_moving_average_decay;
        o.output_file = FLAGS_output_file;
        o.write_text_graphdef = FLAGS_write_text_graphdef;
        o.is_video_model = FLAGS_is_video_model;
        o.num_frames = FLAGS_num_frames;
        o.quantize = FLAGS_quantize;
        o.quantize_per_channel = FLAGS_quantize_per_channel;
        o.calibration = CalibrationFlags();
        slimtorch::ExportInferenceGraph(o);
      });
}
