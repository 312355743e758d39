// average_checkpoints (ours): the mean of several checkpoints of
// one run, as fairseq's and timm's averaging scripts, for slimtorch's
// safetensors and TensorFlow's checkpoints (io/checkpoint_average.h).

#include <gflags/gflags.h>

#include <iostream>
#include <string>
#include <vector>

#include "slimtorch/io/checkpoint_average.h"
#include "slimtorch/core/error.h"
#include "slimtorch/train/variables.h"
#include "tool_common.h"

DEFINE_string(checkpoints, "",
              "The checkpoints to average, comma-separated, oldest first "
              "(files, TensorFlow prefixes, or directories for their "
              "latest).");
DEFINE_string(train_dir, "",
              "Or: the training directory whose last --num_checkpoints "
              "checkpoints (as its index lists them) are averaged.");
DEFINE_int32(num_checkpoints, 5,
             "With --train_dir: how many of its newest checkpoints.");
DEFINE_string(output_path, "",
              "Where the average goes: a .safetensors file, or a TensorFlow "
              "prefix when the inputs are TensorFlow checkpoints.");

const slimtorch::tools::FlagGroups kFlagGroups = {
    {"Checkpoints", {"checkpoints", "train_dir", "num_checkpoints"}},
    {"Output", {"output_path"}},
};

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(
      argc, argv,
      "Averages checkpoints of one run: every floating-point tensor becomes "
      "the inputs' mean, the rest (global step, ...) is the newest's.\n"
      "Example:\n"
      "  average_checkpoints --train_dir=/tmp/train --num_checkpoints=5 "
      "--output_path=/tmp/avg.safetensors\n"
      "  eval_image_classifier --checkpoint_path=/tmp/avg.safetensors ...",
      kFlagGroups, [] {
        SLIM_CHECK(FLAGS_checkpoints.empty() != FLAGS_train_dir.empty(),
                   "give the checkpoints to average with either "
                   "--checkpoints or --train_dir (and --num_checkpoints)");
        SLIM_CHECK(!FLAGS_output_path.empty(), "You must supply --output_path");
        const std::vector<std::string> inputs =
            FLAGS_train_dir.empty()
                ? slimtorch::SplitScopes(FLAGS_checkpoints)
                : slimtorch::LastCheckpoints(FLAGS_train_dir,
                                             FLAGS_num_checkpoints);
        const slimtorch::AverageResult r =
            slimtorch::AverageCheckpoints(inputs, FLAGS_output_path);
        std::cout << "averaged " << inputs.size() << " checkpoints ("
                  << r.averaged << " floating tensors; " << r.copied
                  << " others from the newest) into " << FLAGS_output_path
                  << std::endl;
      });
}
