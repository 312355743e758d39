#pragma once
// What a training run and an evaluation run share (train/trainer.h,
// eval/evaluator.h): the options of a dataset's input, the net and how it
// runs, embedded in both TrainOptions and EvalOptions; and the set-up both
// do with them: the input resolved and the net built on its device.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "slimtorch/data/input.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/precision.h"

namespace slimtorch {

// The input (InputOptions: the split, its preprocessing, batches, where
// they are handed out), the dataset it belongs to and the net it feeds.
struct RunOptions : InputOptions {
  std::string dataset_name = "imagenet";
  std::string model_name = "inception_v3";
  // The net's memory order (ResolveDataFormat).
  DataFormat data_format = DataFormat::kAuto;
  // The forward pass autocast to it (fp16: GPUs only), variables and
  // losses float32.
  Precision precision = Precision::kFloat32;
  // Set: an 8-bit net (Net::EnableQuantization) — train's --quantize_delay,
  // eval's --quantize.
  c10::optional<nets::QuantizeOptions> quantize;
};

// The run's input: `o`'s InputOptions with the preprocessing resolved (""
// = the model's). The caller sets what only it decides (training, batch
// shards, the start position).
InputOptions ResolveRunInput(const RunOptions& o);

// Throws unless `model_name` is an image net: the video nets (i3d, s3dg, or
// any net whose num_frames is > 0) take clips, which train and eval (image
// datasets) cannot feed. Called before any work, and on the built net.
void CheckImageNet(const std::string& model_name, int64_t num_frames = 0);

// The run's net for `spec`: `net` (the caller's own options, such as the
// weight decay) with the classes, input channels and image size of `o` and
// `*input`, checked for o.precision on o.device, moved there in its memory
// order, in training or evaluation mode; sets input->image_size (0: the
// net's default_image_size) and checks it. Throws on a bad name or size.
std::shared_ptr<Net> BuildRunNet(const DatasetSpec& spec, const RunOptions& o,
                                 NetOptions net, bool training,
                                 InputOptions* input);

}  // namespace slimtorch
