#pragma once
// Dataset descriptors, as TF-Slim's datasets/<name>.py get_split(): a file
// pattern per split, hard-coded split sizes (they drive LR decay and the
// evaluation pass), the number of classes and the stored image shape.
//
// Registered by name with SLIM_REGISTER_DATASET in the dataset's .cc.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "slimtorch/core/registry.h"

namespace slimtorch {

struct DatasetSpec {
  std::string name;
  // Split name → number of examples (TF-Slim's SPLITS_TO_SIZES).
  std::map<std::string, int64_t> splits_to_sizes;
  int64_t num_classes = 0;
  // File pattern relative to dataset_dir; "%s" is replaced by the split name
  // ("mnist_%s.tfrecord", "flowers_%s_*.tfrecord"). Shell globs allowed.
  std::string file_pattern;
  // Stored image shape; 0 where it varies between examples.
  int image_height = 0;
  int image_width = 0;
  int image_channels = 3;
  // image/format assumed when a record lacks the key.
  std::string default_format = "png";

  // Number of examples in `split`; throws listing the valid splits.
  int64_t SplitSize(const std::string& split) const;
  // The files of `split` under `dataset_dir`, sorted. Throws when the split
  // is unknown or no file matches (naming the pattern and directory).
  std::vector<std::string> SplitFiles(const std::string& dataset_dir,
                                      const std::string& split) const;
};

using DatasetRegistry = Registry<std::function<DatasetSpec()>>;
DatasetRegistry& GetDatasetRegistry();

// The spec registered under `name`; throws listing the valid names.
DatasetSpec GetDatasetSpec(const std::string& name);

// A dataset that describes itself: download_and_convert_data
// --dataset_name=image_folder writes <dataset_dir>/dataset_description.txt
// (also writable by hand for any TFRecords of image Examples), "key: value"
// lines, '#' comments:
//   name: image_folder
//   file_pattern: image_folder_%s_*.tfrecord
//   num_classes: 5
//   image_channels: 3
//   image_height: 0            (0: sizes vary; optional)
//   image_width: 0             (optional)
//   split: train 3320          (one line per split)
//   split: validation 350
inline constexpr const char* kDatasetDescriptionFilename =
    "dataset_description.txt";
// The dataset name the image_folder converter writes, and the name that
// reads any described --dataset_dir.
inline constexpr const char* kImageFolderDatasetName = "image_folder";

// Throws TF-Slim's "You must supply the dataset directory with
// --dataset_dir" when `dataset_dir` is empty: every reader and converter of
// a dataset directory checks it here first.
void CheckDatasetDir(const std::string& dataset_dir);

// Writes `spec` as <dataset_dir>/dataset_description.txt, atomically.
void WriteDatasetDescription(const DatasetSpec& spec,
                             const std::string& dataset_dir);

// Reads <dataset_dir>/dataset_description.txt; throws naming the file and
// line for an unknown key, a bad number, a missing required key (name,
// file_pattern, num_classes, a split) or a repeated split.
DatasetSpec ReadDatasetDescription(const std::string& dataset_dir);

// The spec that --dataset_name and --dataset_dir select: a dataset_dir with a
// description is read by its own name or by "image_folder" (any other name is
// an error saying which name to use); otherwise the registered spec of
// `name` ("image_folder" without a description is an error naming the
// missing file and the converter command).
DatasetSpec ResolveDatasetSpec(const std::string& name,
                               const std::string& dataset_dir);

// The inputs of the imagenet converter (build_imagenet_data.py's flags).
struct ImageNetConvertOptions {
  // ILSVRC2012_img_train.tar (a tar of <synset>.tar), an uncompressed tar of
  // <synset>/*.JPEG, or a folder of <synset>/*.JPEG (--train_directory).
  // Required.
  std::string train_directory;
  // ILSVRC2012_img_val.tar (flat ILSVRC2012_val_*.JPEG, labelled by
  // validation_labels_file) or a folder or tar of <synset>/*.JPEG
  // (--validation_directory). Required.
  std::string validation_directory;
  // Boxes: imagenet_2012_bounding_boxes.csv, ILSVRC2012_bbox_train_v2.tar.gz
  // or its extracted folder of <synset>/*.xml (--bounding_box_file).
  // "" = records without boxes.
  std::string bounding_box_file;
  // Text inputs: a local path or URL; "" = the file of that name from
  // ConvertOptions::source_url, else from TF-Slim's datasets folder on
  // GitHub (--labels_file, --imagenet_metadata_file,
  // --validation_labels_file). The validation labels are read only when the
  // validation images are flat.
  std::string labels_file;
  std::string imagenet_metadata_file;
  std::string validation_labels_file;
  // Shards per split (--train_shards 1024, --validation_shards 128); each
  // must be a multiple of ConvertOptions::num_threads (default 8), which
  // fixes the shard boundaries as build_imagenet_data.py's threads do.
  int train_shards = 1024;
  int validation_shards = 128;
};

// The inputs of the image_folder converter.
struct ImageFolderConvertOptions {
  // A folder of <class>/ sub-folders of images (any depth below the class
  // folder), or of train/ and validation/ (and optionally test/) folders
  // that each hold <class>/ sub-folders (--image_dir). Required.
  std::string image_dir;
  // Class-folder layout only: the percentage of images that go to the
  // validation (and test) split, chosen by the SHA-1 of each file's name as
  // TensorFlow's retrain.py does, so a file keeps its split when others
  // are added (--validation_percentage 10, --testing_percentage 0).
  double validation_percentage = 10;
  double testing_percentage = 0;
  // Shards of the train split and of each other split; 0 = one per ~64 MiB
  // of images (--train_shards, --validation_shards when set).
  int train_shards = 0;
  int validation_shards = 0;
};

// retrain.py's which_set() percentage of a file: SHA-1 of its base name
// with any "_nohash_..." suffix cut, low 27 bits, scaled to [0, 100]. The
// file goes to validation when below --validation_percentage, to test when
// below that plus --testing_percentage, else to train.
double ImageFolderSplitPercentage(const std::string& file_name);

// What download_and_convert_data needs to convert one dataset.
struct ConvertOptions {
  // Where TFRecords + labels.txt (and temporary downloads) are written.
  std::string dataset_dir;
  // Mirror to download from: "" = the dataset's default URL; http(s)://...
  // or file:///folder/ (e.g. a Debian dataset package's folder).
  std::string source_url;
  // Keep the downloaded archives after conversion (TF-Slim deletes them).
  bool keep_downloads = false;
  // Check that each split holds exactly the number of examples of the
  // dataset's spec (CIFAR: 50000 train / 10000 test). false accepts any
  // count the source files hold consistently (tests, subsets). Default true.
  bool check_split_sizes = true;
  // cifar100 only: which label the records and labels.txt carry, "fine"
  // (100 classes, dataset "cifar100") or "coarse" (20 superclasses, read it
  // as dataset "cifar100_coarse"). Default "fine".
  std::string cifar100_label_mode = "fine";
  // Photo datasets (flowers, imagenet, image_folder): a corrupt, empty or
  // unknown-format image is skipped (and listed at the end) instead of
  // failing the conversion (--skip_bad_images). Default false.
  bool skip_bad_images = false;
  // Threads that read, check and encode images and write shards
  // (--num_threads); 0 = the converter's default.
  int num_threads = 0;
  // --dataset_name=imagenet only.
  ImageNetConvertOptions imagenet;
  // --dataset_name=image_folder only.
  ImageFolderConvertOptions image_folder;
};

// A converter (SLIM_REGISTER_DATASET_CONVERTER) runs through
// ConvertDataset, which has checked its options' dataset_dir.
using ConverterRegistry = Registry<std::function<void(const ConvertOptions&)>>;
ConverterRegistry& GetConverterRegistry();

// download_and_convert_data's work: dataset `name`'s records, labels.txt
// and description written into options.dataset_dir by its registered
// converter. Throws before converting on an empty dataset_dir or an unknown
// name (listing the converters).
void ConvertDataset(const std::string& name, const ConvertOptions& options);

}  // namespace slimtorch

// Registers a DatasetSpec factory: SLIM_REGISTER_DATASET("mnist", MnistSpec);
#define SLIM_REGISTER_DATASET(name, spec_fn) \
  SLIM_STATIC_REGISTRATION(                  \
      [] { ::slimtorch::GetDatasetRegistry().Register(name, spec_fn); })

// Registers a converter: SLIM_REGISTER_DATASET_CONVERTER("mnist",
// ConvertMnist);
#define SLIM_REGISTER_DATASET_CONVERTER(name, fn) \
  SLIM_STATIC_REGISTRATION(                       \
      [] { ::slimtorch::GetConverterRegistry().Register(name, fn); })
