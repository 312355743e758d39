// The imagenet dataset and its converter, build_imagenet_data.py's output
// from the archives a user holds (see imagenet.h).

#include "slimtorch/datasets/imagenet.h"

#include <glog/logging.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "convert_util.h"
#include "imagenet_image.h"
#include "imagenet_sources.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace {

// Where TF-Slim keeps the text files (imagenet_lsvrc_2015_synsets.txt,
// imagenet_metadata.txt, imagenet_2012_validation_synset_labels.txt).
constexpr const char* kDefaultTextUrl =
    "https://raw.githubusercontent.com/tensorflow/models/master/research/"
    "slim/datasets/";
constexpr const char* kSynsetsName = "imagenet_lsvrc_2015_synsets.txt";
constexpr const char* kMetadataName = "imagenet_metadata.txt";
constexpr const char* kValLabelsName =
    "imagenet_2012_validation_synset_labels.txt";
constexpr int kDefaultThreads = 8;  // build_imagenet_data's --num_threads

DatasetSpec ImageNetSpec() {
  DatasetSpec spec;
  spec.name = "imagenet";
  spec.splits_to_sizes = {{"train", kImageNetTrainSize},
                          {"validation", kImageNetValidationSize}};
  spec.num_classes = kImageNetNumClasses;
  spec.file_pattern = "%s-*";
  spec.image_height = 0;
  spec.image_width = 0;
  spec.image_channels = 3;
  spec.default_format = "jpeg";  // imagenet.py's keys_to_features default
  return spec;
}

// The synset of each flat validation image by its basename: label i names
// ImageNetValidationFilename(i).
std::map<std::string, std::string> ValidationLabelsByFile(
    const std::vector<std::string>& validation_labels) {
  std::map<std::string, std::string> by_file;
  for (size_t i = 0; i < validation_labels.size(); ++i) {
    by_file[ImageNetValidationFilename(static_cast<int64_t>(i))] =
        validation_labels[i];
  }
  return by_file;
}

// One record to write: the image and its label (1..1000).
struct Item {
  internal::ImageNetImage image;
  int64_t label = 0;
};

// A split's records in build_imagenet_data's shuffled order.
struct Split {
  std::string name;
  int num_shards = 0;
  std::vector<Item> items;
};

class ImageNetConverter {
 public:
  explicit ImageNetConverter(const ConvertOptions& options)
      : options_(options),
        imagenet_(options.imagenet),
        dir_(options.dataset_dir),
        num_threads_(options.num_threads > 0 ? options.num_threads
                                             : kDefaultThreads) {}

  void Run();

 private:
  void CheckOptions() const;
  bool OutputsComplete() const;
  std::string FetchText(const std::string& value, const char* default_name);
  void LoadMetadata();
  Split ListSplit(const std::string& name, const std::string& source,
                  int num_shards);
  void WriteSplit(const Split& split);
  void WriteShard(const Split& split, int shard,
                  std::pair<int64_t, int64_t> range);
  std::string MakeRecord(const Item& item) const;
  void ReportBadImages() const;

  const ConvertOptions& options_;
  const ImageNetConvertOptions& imagenet_;
  const std::string dir_;
  const int num_threads_;
  std::vector<std::string> downloaded_;
  std::vector<std::string> synsets_;
  std::map<std::string, int64_t> synset_label_;
  std::map<std::string, std::string> metadata_;
  ImageNetBoxes boxes_;
  std::mutex bad_mu_;
  std::vector<std::string> bad_images_;  // guarded by bad_mu_
};

void ImageNetConverter::CheckOptions() const {
  SLIM_CHECK(!imagenet_.train_directory.empty(),
             "imagenet: set --train_directory to ILSVRC2012_img_train.tar or "
             "a folder of <synset>/*.JPEG (ImageNet cannot be downloaded "
             "without an image-net.org account)");
  SLIM_CHECK(!imagenet_.validation_directory.empty(),
             "imagenet: set --validation_directory to ILSVRC2012_img_val.tar "
             "or a folder of <synset>/*.JPEG");
  for (int shards : {imagenet_.train_shards, imagenet_.validation_shards}) {
    SLIM_CHECK(shards >= 1 && shards % num_threads_ == 0,
               "imagenet: --train_shards (", imagenet_.train_shards,
               ") and --validation_shards (", imagenet_.validation_shards,
               ") must be multiples of --num_threads (", num_threads_,
               "), as build_imagenet_data.py requires");
  }
}

bool ImageNetConverter::OutputsComplete() const {
  if (!PathExists(JoinPath(dir_, kLabelsFilename))) return false;
  for (const auto& [split, shards] :
       {std::pair<const char*, int>{"train", imagenet_.train_shards},
        {"validation", imagenet_.validation_shards}}) {
    for (int s = 0; s < shards; ++s) {
      if (!PathExists(JoinPath(dir_, ImageNetShardName(split, s, shards)))) {
        return false;
      }
    }
  }
  return true;
}

std::string ImageNetConverter::FetchText(const std::string& value,
                                         const char* default_name) {
  if (value.empty()) {
    return internal::FetchSourceFile(
        internal::SourceBaseUrl(options_.source_url, kDefaultTextUrl),
        default_name, dir_, &downloaded_);
  }
  if (value.find("://") != std::string::npos) {
    const size_t slash = value.rfind('/');
    return internal::FetchSourceFile(value.substr(0, slash + 1),
                                     value.substr(slash + 1), dir_,
                                     &downloaded_);
  }
  SLIM_CHECK(PathExists(value), "'", value, "' does not exist (expected ",
             default_name, ")");
  return value;
}

void ImageNetConverter::LoadMetadata() {
  const std::string synsets_path =
      FetchText(imagenet_.labels_file, kSynsetsName);
  synsets_ = ParseImageNetSynsets(ReadFileToString(synsets_path), synsets_path);
  for (size_t i = 0; i < synsets_.size(); ++i) {
    synset_label_[synsets_[i]] = static_cast<int64_t>(i) + 1;
  }
  if (synsets_.size() != 1000) {
    LOG(WARNING) << "'" << synsets_path << "' lists " << synsets_.size()
                 << " synsets, not ILSVRC-2012's 1000";
  }
  const std::string meta_path =
      FetchText(imagenet_.imagenet_metadata_file, kMetadataName);
  metadata_ = ParseImageNetMetadata(ReadFileToString(meta_path), meta_path);
  ImageNetLabelNames(synsets_, metadata_);  // every synset has a name
  if (imagenet_.bounding_box_file.empty()) {
    LOG(WARNING) << "No --bounding_box_file: the records hold no boxes";
    return;
  }
  BoundingBoxStats stats;
  const std::set<std::string> challenge(synsets_.begin(), synsets_.end());
  boxes_ = ReadImageNetBoxes(imagenet_.bounding_box_file, challenge, &stats);
  int64_t total = 0;
  for (const auto& kv : boxes_) total += static_cast<int64_t>(kv.second.size());
  LOG(INFO) << "Read " << total << " bounding boxes across " << boxes_.size()
            << " images from '" << imagenet_.bounding_box_file << "' ("
            << stats.xml_files << " XML files, " << stats.skipped_files
            << " skipped; " << stats.skipped_boxes << " boxes skipped)";
}

Split ImageNetConverter::ListSplit(const std::string& name,
                                   const std::string& source, int num_shards) {
  int64_t unlabeled = 0;
  auto by_synset = internal::ListImageNetImages(source, {}, &unlabeled);
  std::vector<std::string> val_labels;
  if (unlabeled > 0) {  // flat ILSVRC2012_val_*.JPEG images
    const std::string path =
        FetchText(imagenet_.validation_labels_file, kValLabelsName);
    val_labels = ParseImageNetValidationLabels(ReadFileToString(path), path);
    by_synset = internal::ListImageNetImages(
        source, ValidationLabelsByFile(val_labels), &unlabeled);
    if (unlabeled > 0) {
      LOG(WARNING) << "'" << source << "': " << unlabeled
                   << " flat images have no label in '" << path
                   << "' and are left out";
    }
  }
  Split split{name, num_shards, {}};
  std::set<std::string> found;
  for (const std::string& synset : synsets_) {
    auto it = by_synset.find(synset);
    if (it == by_synset.end()) continue;
    for (internal::ImageNetImage& image : it->second) {
      found.insert(image.basename);
      split.items.push_back(Item{std::move(image), synset_label_.at(synset)});
    }
  }
  for (size_t i = 0; i < val_labels.size(); ++i) {
    const std::string file =
        ImageNetValidationFilename(static_cast<int64_t>(i));
    SLIM_CHECK(!synset_label_.count(val_labels[i]) || found.count(file), "'",
               source, "' lacks ", file, ", which the validation labels list");
  }
  SLIM_CHECK(!split.items.empty(), "'", source,
             "' holds no <synset>/*.JPEG images of the listed synsets");
  const std::vector<int64_t> order =
      Python2ShuffledRange(static_cast<int64_t>(split.items.size()));
  std::vector<Item> shuffled;
  shuffled.reserve(order.size());
  for (int64_t i : order) shuffled.push_back(std::move(split.items[i]));
  split.items = std::move(shuffled);
  LOG(INFO) << "Found " << split.items.size() << " JPEG files across "
            << synsets_.size() << " labels inside '" << source << "'";
  return split;
}

std::string ImageNetConverter::MakeRecord(const Item& item) const {
  const internal::CleanImage clean = internal::CleanImageNetImage(
      internal::ReadImageNetImage(item.image), item.image.where);
  if (!clean.converted.empty()) {
    LOG(INFO) << "Converted " << clean.converted
              << " to RGB JPEG: " << item.image.where;
  }
  ImageNetExample ex;
  ex.encoded = clean.jpeg;
  ex.label = item.label;
  ex.synset = item.image.synset;
  ex.text = metadata_.at(item.image.synset);
  ex.filename = item.image.basename;
  ex.height = clean.height;
  ex.width = clean.width;
  auto it = boxes_.find(item.image.basename);
  if (it != boxes_.end()) ex.boxes = it->second;
  return EncodeImageNetExample(ex);
}

void ImageNetConverter::WriteShard(const Split& split, int shard,
                                   std::pair<int64_t, int64_t> range) {
  const std::string path =
      JoinPath(dir_, ImageNetShardName(split.name, shard, split.num_shards));
  if (PathExists(path)) return;  // written completely by an earlier run
  TFRecordWriter writer(path);
  for (int64_t i = range.first; i < range.second; ++i) {
    std::string record;
    try {
      record = MakeRecord(split.items[i]);
    } catch (const Error& e) {
      if (!options_.skip_bad_images) throw;
      std::lock_guard<std::mutex> lock(bad_mu_);
      bad_images_.push_back(e.what());
      continue;
    }
    writer.Write(record);
  }
  writer.Close();
  LOG(INFO) << "Wrote " << writer.num_records() << " images to '" << path
            << "'";
}

void ImageNetConverter::WriteSplit(const Split& split) {
  const auto ranges = ImageNetShardRanges(
      static_cast<int64_t>(split.items.size()), num_threads_, split.num_shards);
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (;;) {
      const int shard = next.fetch_add(1);
      if (shard >= split.num_shards || failed.load()) return;
      try {
        WriteShard(split, shard, ranges[shard]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < num_threads_; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  LOG(INFO) << "Finished writing all " << split.items.size()
            << " images of the " << split.name << " split";
}

void ImageNetConverter::ReportBadImages() const {
  if (bad_images_.empty()) return;
  LOG(WARNING) << "Skipped " << bad_images_.size() << " bad images:";
  for (const std::string& why : bad_images_) LOG(WARNING) << "  " << why;
}

void ImageNetConverter::Run() {
  CheckOptions();
  if (OutputsComplete()) {
    LOG(INFO) << "Dataset files already exist in '" << dir_
              << "'. Exiting without re-creating them.";
    return;
  }
  MakeDirs(dir_);
  LoadMetadata();
  // build_imagenet_data's order: validation first, then train.
  WriteSplit(ListSplit("validation", imagenet_.validation_directory,
                       imagenet_.validation_shards));
  WriteSplit(
      ListSplit("train", imagenet_.train_directory, imagenet_.train_shards));
  ReportBadImages();
  WriteLabelsFile(ImageNetLabelNames(synsets_, metadata_), dir_);
  if (!options_.keep_downloads) {
    for (const std::string& path : downloaded_) std::remove(path.c_str());
  }
  LOG(INFO) << "Finished converting the ImageNet dataset!";
}

void ConvertImageNet(const ConvertOptions& options) {
  ImageNetConverter(options).Run();
}

}  // namespace

SLIM_REGISTER_DATASET("imagenet", ImageNetSpec);
SLIM_REGISTER_DATASET_CONVERTER("imagenet", ConvertImageNet);

}  // namespace slimtorch
