// inspect_checkpoint: TensorFlow's inspect_checkpoint.py in C++, for
// TensorFlow checkpoints (V1, V2) and slimtorch's safetensors checkpoints.

#include <gflags/gflags.h>
#include <torch/torch.h>

#include <iostream>
#include <sstream>

#include "slimtorch/core/error.h"
#include "slimtorch/io/checkpoint.h"
#include "tool_common.h"

DEFINE_string(file_name, "",
              "Checkpoint filename. Note, if using Checkpoint V2 format, "
              "file_name is the shared prefix between all files in the "
              "checkpoint.");
DEFINE_string(tensor_name, "", "Name of the tensor to inspect");
DEFINE_bool(all_tensors, false,
            "If True, print the names and values of all the tensors.");
DEFINE_bool(all_tensor_names, false,
            "If True, print the names of all the tensors.");

// --help's groups of the flags above (tools/tool_common.h), each flag in
// one.
const slimtorch::tools::FlagGroups kFlagGroups = {
    {"Checkpoint",
     {"file_name"}},
    {"What to print",
     {"tensor_name", "all_tensor_names", "all_tensors"}},
};

namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(c));
  return s;
}

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? "," : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

void PrintTensor(const std::string& name, const torch::Tensor& t) {
  std::cout << "tensor_name:  " << name << "\n" << t << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(
      argc, argv,
      "Prints the tensors of a checkpoint, as TensorFlow's "
      "inspect_checkpoint.py: their names, dtypes and shapes, or values.\n"
      "Example:\n"
      "  inspect_checkpoint --file_name=inception_v3.ckpt\n"
      "  inspect_checkpoint --file_name=/tmp/train/model.ckpt-1000 "
      "--tensor_name=InceptionV3/Logits/Conv2d_1c_1x1/biases",
      kFlagGroups, [] {
        SLIM_CHECK(!FLAGS_file_name.empty(),
                   "Usage: inspect_checkpoint --file_name=checkpoint_file_name "
                   "[--tensor_name=tensor_to_print] [--all_tensors] "
                   "[--all_tensor_names]");
        const bool values = FLAGS_all_tensors;
        const bool names_only = FLAGS_all_tensor_names && !values;
        const slimtorch::OpenedCheckpoint ckpt =
            slimtorch::OpenCheckpoint(FLAGS_file_name);
        if (!FLAGS_tensor_name.empty() && !values && !names_only) {
          PrintTensor(FLAGS_tensor_name, ckpt.Read(FLAGS_tensor_name));
          return;
        }
        for (const auto& t : ckpt.tensors()) {
          if (names_only) {
            std::cout << "tensor_name:  " << t.name << "\n";
          } else if (values && t.supported) {
            PrintTensor(t.name, ckpt.Read(t.name));
          } else {
            std::cout << t.name << " (DT_"
                      << Upper(slimtorch::TfDtypeName(t.tf_dtype)) << ") "
                      << Shape(t.shape) << "\n";
          }
        }
      });
}
