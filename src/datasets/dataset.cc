#include "slimtorch/datasets/dataset.h"

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {

int64_t DatasetSpec::SplitSize(const std::string& split) const {
  auto it = splits_to_sizes.find(split);
  if (it == splits_to_sizes.end()) {
    std::string valid;
    for (const auto& kv : splits_to_sizes) {
      valid += (valid.empty() ? "" : ", ") + kv.first;
    }
    SLIM_FAIL("split name '", split, "' was not recognized for dataset '",
              name, "'; valid splits: ", valid);
  }
  return it->second;
}

std::vector<std::string> DatasetSpec::SplitFiles(
    const std::string& dataset_dir, const std::string& split) const {
  SplitSize(split);  // validates the split name
  SLIM_CHECK(!dataset_dir.empty(),
             "You must supply the dataset directory with --dataset_dir");
  std::string pattern = file_pattern;
  size_t pos = pattern.find("%s");
  if (pos != std::string::npos) pattern.replace(pos, 2, split);
  std::string full = JoinPath(dataset_dir, pattern);
  std::vector<std::string> files = Glob(full);
  SLIM_CHECK(!files.empty(), "no files match '", full, "' for dataset '", name,
             "' split '", split,
             "'; run download_and_convert_data --dataset_name=", name,
             " --dataset_dir=", dataset_dir, " first");
  return files;
}

DatasetRegistry& GetDatasetRegistry() {
  static DatasetRegistry registry("dataset");
  return registry;
}

DatasetSpec GetDatasetSpec(const std::string& name) {
  return GetDatasetRegistry().Get(name)();
}

ConverterRegistry& GetConverterRegistry() {
  static ConverterRegistry registry("dataset converter");
  return registry;
}

}  // namespace slimtorch
