// download_and_convert_data: downloads a dataset and writes it as TFRecords
// plus labels.txt, as TF-Slim's download_and_convert_data.py.
//
//   download_and_convert_data --dataset_name=mnist --dataset_dir=/tmp/mnist

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <exception>
#include <string>

#include "slimtorch/core/error.h"
#include "slimtorch/datasets/dataset.h"
#include "tool_common.h"

DEFINE_string(dataset_name, "",
              "The name of the dataset to convert, one of the registered "
              "converters (mnist, fashion_mnist, ...).");
DEFINE_string(dataset_dir, "",
              "The directory where the output TFRecords and temporary files "
              "are saved.");
DEFINE_string(source_url, "",
              "Where to fetch the source files from: an http(s):// mirror or "
              "a file:///folder/ holding them (read in place). Empty = the "
              "dataset's default URL.");
DEFINE_bool(keep_downloads, false,
            "Keep the downloaded archives in --dataset_dir after conversion.");
DEFINE_string(cifar100_label_mode, "fine",
              "For --dataset_name=cifar100 only: 'fine' writes the 100 fine "
              "labels (read as dataset cifar100), 'coarse' the 20 superclass "
              "labels and their names in labels.txt (read as dataset "
              "cifar100_coarse; same cifar100_*.tfrecord file names, so use "
              "its own --dataset_dir).");
DEFINE_bool(skip_bad_images, false,
            "Photo datasets (flowers, imagenet, image_folder): skip a corrupt, "
            "empty or unknown-format image and list every skipped one at the "
            "end, instead of stopping at the first (ours).");
DEFINE_int32(num_threads, 0,
             "Threads that read, check and encode images and write shards "
             "(0: the dataset's default; imagenet: build_imagenet_data's 8).");
// build_imagenet_data.py's flags, for --dataset_name=imagenet only.
DEFINE_string(train_directory, "",
              "For --dataset_name=imagenet: ILSVRC2012_img_train.tar (a tar "
              "of <synset>.tar), or a folder (or uncompressed tar) of "
              "<synset>/*.JPEG.");
DEFINE_string(validation_directory, "",
              "For --dataset_name=imagenet: ILSVRC2012_img_val.tar (flat "
              "ILSVRC2012_val_*.JPEG, labelled by --validation_labels_file), "
              "or a folder (or uncompressed tar) of <synset>/*.JPEG.");
DEFINE_string(bounding_box_file, "",
              "For --dataset_name=imagenet: the boxes, as "
              "ILSVRC2012_bbox_train_v2.tar.gz, its extracted folder of "
              "<synset>/*.xml, or process_bounding_boxes.py's CSV. Empty: "
              "records without boxes.");
DEFINE_string(labels_file, "",
              "For --dataset_name=imagenet: imagenet_lsvrc_2015_synsets.txt "
              "(a path or URL; empty: from --source_url, else TF-Slim's copy "
              "on GitHub). Labels 1..N follow its order.");
DEFINE_string(imagenet_metadata_file, "",
              "For --dataset_name=imagenet: imagenet_metadata.txt (synset "
              "<TAB> name; a path or URL; empty: as --labels_file).");
DEFINE_string(validation_labels_file, "",
              "For --dataset_name=imagenet: "
              "imagenet_2012_validation_synset_labels.txt, read when the "
              "validation images are flat (a path or URL; empty: as "
              "--labels_file).");
DEFINE_int32(train_shards, 1024,
             "For --dataset_name=imagenet: number of train-NNNNN-of-NNNNN "
             "shards; a multiple of --num_threads. For image_folder: train "
             "shards (unset: one per ~64 MiB).");
DEFINE_int32(validation_shards, 128,
             "For --dataset_name=imagenet: number of validation-NNNNN-of-"
             "NNNNN shards; a multiple of --num_threads. For image_folder: "
             "shards of each other split (unset: one per ~64 MiB).");
// --dataset_name=image_folder (ours; retrain.py's percentage flags).
DEFINE_string(image_dir, "",
              "For --dataset_name=image_folder: a folder of <class>/ "
              "sub-folders of images (.jpg .jpeg .png .bmp .gif, any case), "
              "or of train/ and validation/ (and test/) folders of <class>/ "
              "sub-folders.");
DEFINE_double(validation_percentage, 10,
              "For --dataset_name=image_folder without split folders: the "
              "percentage of images for the validation split, chosen by a "
              "hash of each file name (stable when files are added), as "
              "retrain.py.");
DEFINE_double(testing_percentage, 0,
              "For --dataset_name=image_folder without split folders: the "
              "percentage of images for a test split (0: no test split).");
// TF-Slim's visualwakewords flags, accepted for command-line compatibility.
DEFINE_double(small_object_area_threshold, 0.005,
              "For --dataset_name=visualwakewords only. Threshold of fraction "
              "of image area below which small objects are filtered. "
              "(not supported yet)");
DEFINE_string(foreground_class_of_interest, "person",
              "For --dataset_name=visualwakewords only. Build a binary "
              "classifier based on the presence or absence of this object in "
              "the scene (default is person). (not supported yet)");
DEFINE_string(coco_dirname, "coco_dataset",
              "For visualwakewords: the subdirectory of --dataset_dir to "
              "download COCO into. (not supported yet)");
DEFINE_string(coco_train_url,
              "http://images.cocodataset.org/zips/train2014.zip",
              "For visualwakewords: the COCO training images URL. (not "
              "supported yet)");
DEFINE_string(coco_validation_url,
              "http://images.cocodataset.org/zips/val2014.zip",
              "For visualwakewords: the COCO validation images URL. (not "
              "supported yet)");
DEFINE_string(coco_annotations_url,
              "http://images.cocodataset.org/annotations/"
              "annotations_trainval2014.zip",
              "For visualwakewords: the COCO annotations URL. (not supported "
              "yet)");

// --help's groups of the flags above (tools/tool_common.h), each flag in
// one.
const slimtorch::tools::FlagGroups kFlagGroups = {
    {"Dataset",
     {"dataset_name", "dataset_dir", "source_url", "keep_downloads",
      "skip_bad_images", "num_threads"}},
    {"CIFAR-100", {"cifar100_label_mode"}},
    {"ImageNet (build_imagenet_data.py's flags)",
     {"train_directory", "validation_directory", "bounding_box_file",
      "labels_file", "imagenet_metadata_file", "validation_labels_file",
      "train_shards", "validation_shards"}},
    {"Your own photos (--dataset_name=image_folder)",
     {"image_dir", "validation_percentage", "testing_percentage"}},
    {"Visual Wake Words (not supported yet)",
     {"small_object_area_threshold", "foreground_class_of_interest",
      "coco_dirname", "coco_train_url", "coco_validation_url",
      "coco_annotations_url"}},
};

namespace {

// Throws when a flag of a not yet supported feature is set to anything but
// its default.
void CheckUnsupportedFlags() {
  for (const char* name :
       {"small_object_area_threshold", "foreground_class_of_interest",
        "coco_dirname", "coco_train_url", "coco_validation_url",
        "coco_annotations_url"}) {
    gflags::CommandLineFlagInfo info =
        gflags::GetCommandLineFlagInfoOrDie(name);
    SLIM_CHECK(info.current_value == info.default_value, "--", name,
               " is not supported yet");
  }
}

// Throws when a flag of another dataset than --dataset_name is set.
bool IsDefault(const char* name) {
  return gflags::GetCommandLineFlagInfoOrDie(name).is_default;
}

void CheckDatasetFlags() {
  const bool imagenet = FLAGS_dataset_name == "imagenet";
  const bool folder = FLAGS_dataset_name == "image_folder";
  for (const char* name :
       {"train_directory", "validation_directory", "bounding_box_file",
        "labels_file", "imagenet_metadata_file", "validation_labels_file"}) {
    SLIM_CHECK(imagenet || IsDefault(name), "--", name,
               " applies to --dataset_name=imagenet only");
  }
  for (const char* name : {"train_shards", "validation_shards"}) {
    SLIM_CHECK(imagenet || folder || IsDefault(name), "--", name,
               " applies to --dataset_name=imagenet and image_folder only");
  }
  for (const char* name :
       {"image_dir", "validation_percentage", "testing_percentage"}) {
    SLIM_CHECK(folder || IsDefault(name), "--", name,
               " applies to --dataset_name=image_folder only");
  }
}

void Run() {
  SLIM_CHECK(!FLAGS_dataset_name.empty(),
             "You must supply the dataset name with --dataset_name");
  CheckUnsupportedFlags();
  CheckDatasetFlags();
  // An unknown name fails before the other flags' checks.
  slimtorch::GetConverterRegistry().Get(FLAGS_dataset_name);
  slimtorch::ConvertOptions options;
  options.dataset_dir = FLAGS_dataset_dir;
  options.source_url = FLAGS_source_url;
  options.keep_downloads = FLAGS_keep_downloads;
  SLIM_CHECK(FLAGS_cifar100_label_mode == "fine" ||
                 FLAGS_cifar100_label_mode == "coarse",
             "--cifar100_label_mode must be 'fine' or 'coarse', got '",
             FLAGS_cifar100_label_mode, "'");
  SLIM_CHECK(
      FLAGS_cifar100_label_mode == "fine" || FLAGS_dataset_name == "cifar100",
      "--cifar100_label_mode applies to --dataset_name=cifar100 only");
  options.cifar100_label_mode = FLAGS_cifar100_label_mode;
  SLIM_CHECK(FLAGS_num_threads >= 0, "--num_threads must be >= 0, got ",
             FLAGS_num_threads);
  options.skip_bad_images = FLAGS_skip_bad_images;
  options.num_threads = FLAGS_num_threads;
  slimtorch::ImageNetConvertOptions& imagenet = options.imagenet;
  imagenet.train_directory = FLAGS_train_directory;
  imagenet.validation_directory = FLAGS_validation_directory;
  imagenet.bounding_box_file = FLAGS_bounding_box_file;
  imagenet.labels_file = FLAGS_labels_file;
  imagenet.imagenet_metadata_file = FLAGS_imagenet_metadata_file;
  imagenet.validation_labels_file = FLAGS_validation_labels_file;
  imagenet.train_shards = FLAGS_train_shards;
  imagenet.validation_shards = FLAGS_validation_shards;
  slimtorch::ImageFolderConvertOptions& folder = options.image_folder;
  folder.image_dir = FLAGS_image_dir;
  folder.validation_percentage = FLAGS_validation_percentage;
  folder.testing_percentage = FLAGS_testing_percentage;
  folder.train_shards = IsDefault("train_shards") ? 0 : FLAGS_train_shards;
  folder.validation_shards =
      IsDefault("validation_shards") ? 0 : FLAGS_validation_shards;
  SLIM_CHECK(folder.train_shards >= 0 && folder.validation_shards >= 0,
             "--train_shards and --validation_shards must be positive");
  slimtorch::ConvertDataset(FLAGS_dataset_name, options);
}

}  // namespace

int main(int argc, char** argv) {
  static const std::string usage =
      "Downloads a dataset and converts it to TFRecords + labels.txt, as "
      "TF-Slim's download_and_convert_data.py.\n\n"
      "Usage:\n"
      "  download_and_convert_data --dataset_name=<name> "
      "--dataset_dir=<dir> [--source_url=<url>] [--keep_downloads] "
      "[--cifar100_label_mode=fine|coarse]\n\n"
      "Datasets: " +
      slimtorch::GetConverterRegistry().JoinedNames() +
      "\n"
      "Writes <dataset_dir>/<name>_train.tfrecord, <name>_test.tfrecord and "
      "labels.txt; does nothing when they already exist.\n"
      "Example:\n"
      "  download_and_convert_data --dataset_name=fashion_mnist "
      "--dataset_dir=/tmp/fashion_mnist "
      "--source_url=file:///usr/share/datasets/fashion-mnist/\n"
      "Your own photos (a folder of <class>/ sub-folders):\n"
      "  download_and_convert_data --dataset_name=image_folder "
      "--image_dir=/photos --dataset_dir=/tmp/photos_data "
      "[--validation_percentage=10]\n"
      "  then train_image_classifier --dataset_name=image_folder "
      "--dataset_dir=/tmp/photos_data ...";
  return slimtorch::tools::RunTool(argc, argv, usage.c_str(), kFlagGroups, Run);
}
