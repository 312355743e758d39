// inspect_checkpoint: TensorFlow's inspect_checkpoint.py in C++, for
// TensorFlow checkpoints (V1, V2) and slimtorch's safetensors checkpoints.

#include <iostream>
#include <sstream>

#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/tf_checkpoint.h"
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

// TensorFlow's DataType spelling of a LibTorch dtype (safetensors files).
std::string DtName(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return "DT_FLOAT";
    case torch::kDouble:
      return "DT_DOUBLE";
    case torch::kHalf:
      return "DT_HALF";
    case torch::kBFloat16:
      return "DT_BFLOAT16";
    case torch::kInt:
      return "DT_INT32";
    case torch::kLong:
      return "DT_INT64";
    case torch::kShort:
      return "DT_INT16";
    case torch::kChar:
      return "DT_INT8";
    case torch::kByte:
      return "DT_UINT8";
    case torch::kBool:
      return "DT_BOOL";
    default:
      return c10::toString(t);
  }
}

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
        if (slimtorch::FindTfCheckpoint(FLAGS_file_name)) {
          const slimtorch::TfCheckpointReader reader(FLAGS_file_name);
          if (!FLAGS_tensor_name.empty() && !values && !names_only) {
            PrintTensor(FLAGS_tensor_name, reader.Read(FLAGS_tensor_name));
            return;
          }
          for (const auto& t : reader.tensors()) {
            if (names_only) {
              std::cout << "tensor_name:  " << t.name << "\n";
            } else if (values && t.supported) {
              PrintTensor(t.name, reader.Read(t.name));
            } else {
              std::cout << t.name << " (DT_"
                        << Upper(slimtorch::TfDtypeName(t.tf_dtype)) << ") "
                        << Shape(t.shape) << "\n";
            }
          }
          return;
        }
        const slimtorch::CheckpointData ckpt = slimtorch::LoadCheckpoint(
            slimtorch::ResolveCheckpointPath(FLAGS_file_name));
        if (!FLAGS_tensor_name.empty() && !values && !names_only) {
          const torch::Tensor t = ckpt.Find(FLAGS_tensor_name);
          SLIM_CHECK(t.defined(), "checkpoint '", FLAGS_file_name,
                     "' has no tensor '", FLAGS_tensor_name, "'");
          PrintTensor(FLAGS_tensor_name, t);
          return;
        }
        std::vector<slimtorch::NamedTensor> sorted = ckpt.tensors;
        std::sort(sorted.begin(), sorted.end(),
                  [](const auto& a, const auto& b) { return a.name < b.name; });
        for (const auto& t : sorted) {
          if (names_only) {
            std::cout << "tensor_name:  " << t.name << "\n";
          } else if (values) {
            PrintTensor(t.name, t.tensor);
          } else {
            std::cout << t.name << " (" << DtName(t.tensor.scalar_type())
                      << ") " << Shape(t.tensor.sizes().vec()) << "\n";
          }
        }
      });
}
