#include "slimtorch/io/checkpoint_average.h"

#include <torch/torch.h>

#include <memory>

#include "slimtorch/core/error.h"
#include "slimtorch/io/checkpoint.h"

namespace slimtorch {
namespace {

// The mean of `name` over `ckpts` (floating), in float64, cast back.
torch::Tensor Mean(const std::vector<OpenedCheckpoint>& ckpts,
                   const std::string& name, const torch::Tensor& newest) {
  torch::Tensor sum = newest.to(torch::kFloat64);
  for (size_t i = 0; i + 1 < ckpts.size(); ++i) {
    const OpenedCheckpoint& c = ckpts[i];
    bool found = false;
    for (const TfTensorInfo& t : c.tensors()) found = found || t.name == name;
    SLIM_CHECK(found, "cannot average: ", c.path(), " has no tensor '", name,
               "' (the newest, ", ckpts.back().path(),
               ", has it); average "
               "checkpoints of one run");
    const torch::Tensor t = c.Read(name);
    SLIM_CHECK(t.sizes() == newest.sizes(), "cannot average: '", name, "' is ",
               t.sizes(), " in ", c.path(), " but ", newest.sizes(), " in ",
               ckpts.back().path());
    sum += t.to(torch::kFloat64);
  }
  return sum.div_(static_cast<double>(ckpts.size())).to(newest.scalar_type());
}

}  // namespace

AverageResult AverageCheckpoints(const std::vector<std::string>& inputs,
                                 const std::string& output) {
  SLIM_CHECK(!inputs.empty(), "no checkpoint to average");
  SLIM_CHECK(!output.empty(), "no output path for the averaged checkpoint");
  std::vector<OpenedCheckpoint> ckpts;
  for (const std::string& path : inputs) ckpts.push_back(OpenCheckpoint(path));
  AverageResult r;
  r.tensorflow = ckpts.back().tensorflow();
  for (const OpenedCheckpoint& c : ckpts) {
    SLIM_CHECK(c.tensorflow() == r.tensorflow, "cannot average ",
               c.tensorflow() ? "the TensorFlow checkpoint "
                              : "the "
                                "safetensors checkpoint ",
               c.path(), " with ", r.tensorflow ? "TensorFlow" : "safetensors",
               " checkpoints");
  }
  const OpenedCheckpoint& newest = ckpts.back();
  NamedTensors tensors;
  for (const TfTensorInfo& info : newest.tensors()) {
    SLIM_CHECK(info.supported, "cannot average: ", newest.path(), " holds '",
               info.name, "' of dtype ", TfDtypeName(info.tf_dtype),
               ", which slimtorch does not read");
    const torch::Tensor t = newest.Read(info.name);
    if (t.is_floating_point()) {
      tensors.push_back({info.name, Mean(ckpts, info.name, t)});
      ++r.averaged;
    } else {
      tensors.push_back({info.name, t});
      ++r.copied;
    }
  }
  if (r.tensorflow) {
    SaveTfCheckpoint(output, tensors);
    return r;
  }
  CheckpointData data;
  data.metadata = newest.data().metadata;
  data.metadata.erase("slimtorch/crc32c");  // SaveCheckpoint writes its own
  std::string from;
  for (const OpenedCheckpoint& c : ckpts) {
    from += (from.empty() ? "" : ",") + c.path();
  }
  data.metadata["slimtorch/averaged_from"] = from;
  // In the newest file's order, as CheckpointData keeps it.
  for (const NamedTensor& t : newest.data().tensors) {
    for (const NamedTensor& a : tensors) {
      if (a.name == t.name) data.tensors.push_back(a);
    }
  }
  SaveCheckpoint(output, data);
  return r;
}

std::vector<std::string> LastCheckpoints(const std::string& dir, int count) {
  SLIM_CHECK(count >= 1,
             "the number of checkpoints to average must be >= 1, "
             "got ",
             count);
  const std::vector<std::string> listed = ListedCheckpoints(dir);
  SLIM_CHECK(static_cast<int>(listed.size()) >= count,
             "cannot average the "
             "last ",
             count, " checkpoints of ", dir, ": its index lists ",
             listed.size(), " (--max_checkpoints_to_keep keeps that many)");
  std::vector<std::string> last(listed.end() - count, listed.end());
  for (const std::string& path : last) {
    SLIM_CHECK(CheckpointExists(path), "cannot average: ", path,
               ", which the index of ", dir, " lists, is gone");
  }
  return last;
}

}  // namespace slimtorch
