#include "slimtorch/datasets/dataset.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/strings.h"

namespace slimtorch {

int64_t DatasetSpec::SplitSize(const std::string& split) const {
  auto it = splits_to_sizes.find(split);
  if (it == splits_to_sizes.end()) {
    std::string valid;
    for (const auto& kv : splits_to_sizes) {
      valid += (valid.empty() ? "" : ", ") + kv.first;
    }
    SLIM_FAIL("split name '", split, "' was not recognized for dataset '", name,
              "'; valid splits: ", valid);
  }
  return it->second;
}

void CheckDatasetDir(const std::string& dataset_dir) {
  SLIM_CHECK(!dataset_dir.empty(),
             "You must supply the dataset directory with --dataset_dir");
}

std::vector<std::string> DatasetSpec::SplitFiles(
    const std::string& dataset_dir, const std::string& split) const {
  SplitSize(split);  // validates the split name
  CheckDatasetDir(dataset_dir);
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

namespace {

// A whole decimal integer >= min, or throws naming `where`.
int64_t ParseCount(const std::string& text, int64_t min,
                   const std::string& where) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  SLIM_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0 &&
                 v >= min,
             where, ": expected an integer >= ", min, ", got '", text, "'");
  return v;
}

}  // namespace

void WriteDatasetDescription(const DatasetSpec& spec,
                             const std::string& dataset_dir) {
  std::ostringstream out;
  out << "# slimtorch dataset description: train_image_classifier,\n"
      << "# eval_image_classifier and export_inference_graph read it from\n"
      << "# --dataset_dir (--dataset_name=" << spec.name << ").\n"
      << "name: " << spec.name << "\n"
      << "file_pattern: " << spec.file_pattern << "\n"
      << "num_classes: " << spec.num_classes << "\n"
      << "image_channels: " << spec.image_channels << "\n"
      << "image_height: " << spec.image_height << "\n"
      << "image_width: " << spec.image_width << "\n";
  for (const auto& kv : spec.splits_to_sizes) {
    out << "split: " << kv.first << " " << kv.second << "\n";
  }
  WriteFileAtomically(JoinPath(dataset_dir, kDatasetDescriptionFilename),
                      out.str());
}

DatasetSpec ReadDatasetDescription(const std::string& dataset_dir) {
  const std::string path = JoinPath(dataset_dir, kDatasetDescriptionFilename);
  std::istringstream in(ReadFileToString(path));
  DatasetSpec spec;
  spec.name.clear();
  spec.num_classes = -1;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = StrCat(path, ":", number);
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    SLIM_CHECK(colon != std::string::npos, where,
               ": expected 'key: value', got '", line, "'");
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "name") {
      SLIM_CHECK(!value.empty(), where, ": empty name");
      spec.name = value;
    } else if (key == "file_pattern") {
      SLIM_CHECK(!value.empty(), where, ": empty file_pattern");
      spec.file_pattern = value;
    } else if (key == "num_classes") {
      spec.num_classes = ParseCount(value, 1, where);
    } else if (key == "image_channels") {
      spec.image_channels = static_cast<int>(ParseCount(value, 1, where));
      SLIM_CHECK(spec.image_channels == 1 || spec.image_channels == 3, where,
                 ": image_channels must be 1 or 3, got ", value);
    } else if (key == "image_height") {
      spec.image_height = static_cast<int>(ParseCount(value, 0, where));
    } else if (key == "image_width") {
      spec.image_width = static_cast<int>(ParseCount(value, 0, where));
    } else if (key == "split") {
      const size_t space = value.find_first_of(" \t");
      SLIM_CHECK(space != std::string::npos, where,
                 ": expected 'split: <name> <size>', got '", value, "'");
      const std::string split = value.substr(0, space);
      const int64_t size = ParseCount(Trim(value.substr(space)), 0, where);
      SLIM_CHECK(spec.splits_to_sizes.emplace(split, size).second, where,
                 ": split '", split, "' is described twice");
    } else {
      SLIM_FAIL(where, ": unknown key '", key,
                "' (expected name, file_pattern, num_classes, image_channels, "
                "image_height, image_width or split)");
    }
  }
  SLIM_CHECK(!spec.name.empty(), path, ": missing 'name:'");
  SLIM_CHECK(!spec.file_pattern.empty(), path, ": missing 'file_pattern:'");
  SLIM_CHECK(spec.num_classes > 0, path, ": missing 'num_classes:'");
  SLIM_CHECK(!spec.splits_to_sizes.empty(), path,
             ": no 'split: <name> <size>' line");
  SLIM_CHECK((spec.image_height > 0) == (spec.image_width > 0), path,
             ": image_height and image_width must both be 0 (sizes vary) or "
             "both be set, got ",
             spec.image_height, "x", spec.image_width);
  return spec;
}

DatasetSpec ResolveDatasetSpec(const std::string& name,
                               const std::string& dataset_dir) {
  const bool described =
      !dataset_dir.empty() &&
      PathExists(JoinPath(dataset_dir, kDatasetDescriptionFilename));
  if (described) {
    DatasetSpec spec = ReadDatasetDescription(dataset_dir);
    SLIM_CHECK(name == spec.name || name == kImageFolderDatasetName,
               "--dataset_dir '", dataset_dir, "' holds dataset '", spec.name,
               "' (", kDatasetDescriptionFilename, "), not '", name,
               "': use --dataset_name=", spec.name);
    return spec;
  }
  SLIM_CHECK(name != kImageFolderDatasetName, "--dataset_name=", name,
             " reads the dataset that --dataset_dir describes, but '",
             JoinPath(dataset_dir.empty() ? "<--dataset_dir>" : dataset_dir,
                      kDatasetDescriptionFilename),
             "' does not exist; write it with download_and_convert_data "
             "--dataset_name=image_folder --image_dir=<folder> "
             "--dataset_dir=<dir>");
  return GetDatasetSpec(name);
}

ConverterRegistry& GetConverterRegistry() {
  static ConverterRegistry registry("dataset converter");
  return registry;
}

void ConvertDataset(const std::string& name, const ConvertOptions& options) {
  CheckDatasetDir(options.dataset_dir);
  GetConverterRegistry().Get(name)(options);
}

}  // namespace slimtorch
