#include "slimtorch/datasets/cifar.h"

#include <glog/logging.h>

#include <cstdio>
#include <map>

#include "convert_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/strings.h"
#include "slimtorch/io/archive.h"
#include "slimtorch/io/labels_file.h"

namespace slimtorch {
namespace {

// What distinguishes the two archives (persisted names, do not change).
struct CifarVariant {
  const char* name;     // converter name and TFRecord prefix
  const char* title;    // for messages
  const char* archive;  // file name on the mirror
  const char* folder;   // top-level folder inside the archive
  std::vector<std::string> train_files;
  std::vector<std::string> test_files;
  // Label bytes per record and the number of classes of each.
  std::vector<int> label_classes;
};

constexpr const char* kDefaultUrl = "https://www.cs.toronto.edu/~kriz/";

const CifarVariant& Cifar10() {
  static const CifarVariant v{
      "cifar10",
      "CIFAR-10",
      "cifar-10-binary.tar.gz",
      "cifar-10-batches-bin",
      {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
       "data_batch_4.bin", "data_batch_5.bin"},
      {"test_batch.bin"},
      {10}};
  return v;
}

const CifarVariant& Cifar100() {
  static const CifarVariant v{
      "cifar100",         "CIFAR-100",   "cifar-100-binary.tar.gz",
      "cifar-100-binary", {"train.bin"}, {"test.bin"},
      {20, 100}};
  return v;
}

DatasetSpec CifarSpec(const std::string& name, const std::string& prefix,
                      int64_t num_classes) {
  DatasetSpec spec;
  spec.name = name;
  spec.splits_to_sizes = {{"train", kCifarTrainSize}, {"test", kCifarTestSize}};
  spec.num_classes = num_classes;
  spec.file_pattern = prefix + "_%s.tfrecord";
  spec.image_height = kCifarImageSize;
  spec.image_width = kCifarImageSize;
  spec.image_channels = 3;
  spec.default_format = "png";  // cifar10.py's keys_to_features default
  return spec;
}

DatasetSpec Cifar10Spec() { return CifarSpec("cifar10", "cifar10", 10); }
DatasetSpec Cifar100Spec() { return CifarSpec("cifar100", "cifar100", 100); }
DatasetSpec Cifar100CoarseSpec() {
  return CifarSpec("cifar100_coarse", "cifar100", 20);
}

std::string Member(const CifarVariant& v, const std::string& file) {
  return std::string(v.folder) + "/" + file;
}

// Reads the members of `v` from `archive_path`; a lacking member of an
// archive that holds the other variant's folder says so.
std::map<std::string, std::string> ReadCifarArchive(
    const CifarVariant& v, const std::string& archive_path,
    const std::string& labels_file) {
  std::vector<std::string> wanted;
  for (const auto* files : {&v.train_files, &v.test_files}) {
    for (const std::string& f : *files) wanted.push_back(Member(v, f));
  }
  wanted.push_back(Member(v, labels_file));
  try {
    return ReadArchiveMembers(archive_path, wanted);
  } catch (const Error& e) {
    const CifarVariant& other = &v == &Cifar10() ? Cifar100() : Cifar10();
    std::string what = e.what();
    if (what.find(StrCat("'", other.folder, "'")) != std::string::npos) {
      SLIM_FAIL(what, "; this is the ", other.title,
                " archive: use --dataset_name=", other.name);
    }
    throw;
  }
}

CifarSplit ReadSplit(const CifarVariant& v, const std::string& archive_path,
                     const std::map<std::string, std::string>& members,
                     const std::vector<std::string>& files, int label_index,
                     const char* split_name, int64_t expected_size,
                     bool check_size) {
  CifarSplit split;
  for (const std::string& f : files) {
    const std::string member = Member(v, f);
    AppendCifarRecords(members.at(member), StrCat(archive_path, ":", member),
                       v.label_classes, label_index, &split);
  }
  if (check_size) {
    SLIM_CHECK(split.size() == expected_size, "'", archive_path, "' holds ",
               split.size(), " ", split_name, " examples, expected ",
               expected_size, " (", v.title, ")");
  }
  return split;
}

// Which label of a record (CIFAR-100 has a coarse one, then a fine one) and
// the member with its names.
struct LabelChoice {
  int label_index = 0;
  std::string labels_file = "batches.meta.txt";
};

LabelChoice ChooseLabels(const CifarVariant& v, const ConvertOptions& options) {
  LabelChoice choice;
  if (&v == &Cifar100()) {
    const std::string& mode = options.cifar100_label_mode;
    SLIM_CHECK(mode == "fine" || mode == "coarse",
               "cifar100_label_mode must be 'fine' or 'coarse', got '", mode,
               "'");
    choice.label_index = mode == "fine" ? 1 : 0;
    choice.labels_file =
        mode == "fine" ? "fine_label_names.txt" : "coarse_label_names.txt";
  }
  return choice;
}

// True when both TFRecords and labels.txt are there; throws when that
// labels.txt has another class count (the other label mode's conversion).
bool IsConverted(const CifarVariant& v, const std::string& dir,
                 int num_classes, const std::string& train_path,
                 const std::string& test_path) {
  const std::string labels_path = JoinPath(dir, kLabelsFilename);
  if (!PathExists(train_path) || !PathExists(test_path) ||
      !PathExists(labels_path)) {
    return false;
  }
  const size_t have = ReadLabelsFile(labels_path).size();
  SLIM_CHECK(have == static_cast<size_t>(num_classes), "'", dir,
             "' already holds ", v.name, " TFRecords with ", have,
             " classes in labels.txt, expected ", num_classes,
             " for these options; convert into another --dataset_dir");
  return true;
}

// The archive's splits and class names, all validated.
struct CifarContents {
  CifarSplit train, test;
  std::vector<std::string> names;
};

CifarContents ReadCifarContents(const CifarVariant& v,
                                const std::string& archive_path,
                                const LabelChoice& choice, int num_classes,
                                bool check_split_sizes) {
  const std::map<std::string, std::string> members =
      ReadCifarArchive(v, archive_path, choice.labels_file);
  CifarContents out;
  out.train = ReadSplit(v, archive_path, members, v.train_files,
                        choice.label_index, "train", kCifarTrainSize,
                        check_split_sizes);
  out.test = ReadSplit(v, archive_path, members, v.test_files,
                       choice.label_index, "test", kCifarTestSize,
                       check_split_sizes);
  const std::string member = Member(v, choice.labels_file);
  out.names = ParseCifarLabelNames(
      members.at(member), StrCat(archive_path, ":", member), num_classes);
  return out;
}

void ConvertCifarLike(const CifarVariant& v, const ConvertOptions& options) {
  const std::string& dir = options.dataset_dir;
  const LabelChoice choice = ChooseLabels(v, options);
  const int num_classes = v.label_classes[choice.label_index];
  MakeDirs(dir);
  const std::string train_path =
      JoinPath(dir, std::string(v.name) + "_train.tfrecord");
  const std::string test_path =
      JoinPath(dir, std::string(v.name) + "_test.tfrecord");
  if (IsConverted(v, dir, num_classes, train_path, test_path)) {
    LOG(INFO) << "Dataset files already exist in '" << dir
              << "'. Exiting without re-creating them.";
    return;
  }

  const std::string base =
      internal::SourceBaseUrl(options.source_url, kDefaultUrl);
  std::vector<std::string> downloaded;
  const std::string archive_path =
      internal::FetchSourceFile(base, v.archive, dir, &downloaded);

  // Validate everything before writing anything.
  const CifarContents contents = ReadCifarContents(
      v, archive_path, choice, num_classes, options.check_split_sizes);
  WriteCifarSplitTFRecord(contents.train, train_path);
  LOG(INFO) << "Wrote " << contents.train.size() << " examples to '"
            << train_path << "'";
  WriteCifarSplitTFRecord(contents.test, test_path);
  LOG(INFO) << "Wrote " << contents.test.size() << " examples to '"
            << test_path << "'";

  std::map<int64_t, std::string> labels;
  for (size_t i = 0; i < contents.names.size(); ++i) {
    labels[static_cast<int64_t>(i)] = contents.names[i];
  }
  WriteLabelsFile(labels, dir);

  if (!options.keep_downloads) {
    for (const std::string& path : downloaded) std::remove(path.c_str());
  }
  LOG(INFO) << "Finished converting the " << v.name << " dataset!";
}

}  // namespace

void AppendCifarRecords(const std::string& data, const std::string& name,
                        const std::vector<int>& label_classes, int label_index,
                        CifarSplit* split) {
  SLIM_CHECK(
      label_index >= 0 && label_index < static_cast<int>(label_classes.size()),
      "AppendCifarRecords('", name, "'): label_index ", label_index,
      " out of range");
  const size_t label_bytes = label_classes.size();
  const size_t record = label_bytes + kCifarImageBytes;
  SLIM_CHECK(data.size() % record == 0, "'", name, "' holds ", data.size(),
             " bytes, not a whole number of ", record, "-byte records (",
             label_bytes, " label byte", label_bytes == 1 ? "" : "s", " + ",
             kCifarImageBytes, " pixel bytes)");
  const size_t n = data.size() / record;
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  split->pixels.reserve(split->pixels.size() + n * kCifarImageBytes);
  split->labels.reserve(split->labels.size() + n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* r = p + i * record;
    for (size_t k = 0; k < label_bytes; ++k) {
      SLIM_CHECK(r[k] < label_classes[k], "'", name, "' record ", i,
                 " has label byte ", k, " = ", static_cast<int>(r[k]),
                 ", expected a class id in [0, ", label_classes[k], ")");
    }
    split->labels.push_back(r[label_index]);
    split->pixels.insert(split->pixels.end(), r + label_bytes, r + record);
  }
}

std::vector<std::string> ParseCifarLabelNames(const std::string& data,
                                              const std::string& name,
                                              int expected) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos <= data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    std::string line = Trim(data.substr(pos, end - pos));
    if (!line.empty()) names.push_back(line);
    pos = end + 1;
  }
  SLIM_CHECK(names.size() == static_cast<size_t>(expected), "'", name,
             "' holds ", names.size(), " class names, expected ", expected);
  return names;
}

void WriteCifarSplitTFRecord(const CifarSplit& split, const std::string& path,
                             int num_threads) {
  SLIM_CHECK(split.pixels.size() ==
                 static_cast<size_t>(split.size()) * kCifarImageBytes,
             "WriteCifarSplitTFRecord('", path, "'): inconsistent split (",
             split.size(), " labels, ", split.pixels.size(), " pixel bytes)");
  constexpr int kPlane = kCifarImageSize * kCifarImageSize;
  internal::WritePngExamplesTFRecord(
      path, kCifarImageSize, kCifarImageSize, 3, split.labels,
      [&](int64_t i, uint8_t* hwc) {
        const uint8_t* chw = split.pixels.data() + i * kCifarImageBytes;
        for (int c = 0; c < 3; ++c) {
          for (int j = 0; j < kPlane; ++j) hwc[j * 3 + c] = chw[c * kPlane + j];
        }
      },
      num_threads);
}

void ConvertCifar10(const ConvertOptions& options) {
  ConvertCifarLike(Cifar10(), options);
}

void ConvertCifar100(const ConvertOptions& options) {
  ConvertCifarLike(Cifar100(), options);
}

SLIM_REGISTER_DATASET("cifar10", Cifar10Spec);
SLIM_REGISTER_DATASET("cifar100", Cifar100Spec);
SLIM_REGISTER_DATASET("cifar100_coarse", Cifar100CoarseSpec);
SLIM_REGISTER_DATASET_CONVERTER("cifar10", ConvertCifar10);
SLIM_REGISTER_DATASET_CONVERTER("cifar100", ConvertCifar100);

}  // namespace slimtorch
