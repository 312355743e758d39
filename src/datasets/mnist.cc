#include "slimtorch/datasets/mnist.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "convert_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/gzip.h"
#include "slimtorch/io/labels_file.h"

namespace slimtorch {
namespace {

constexpr size_t kImagesHeaderSize = 16;
constexpr size_t kLabelsHeaderSize = 8;

uint32_t ReadBigEndian32(const std::string& data, size_t offset) {
  const auto* p = reinterpret_cast<const uint8_t*>(data.data()) + offset;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// What distinguishes MNIST from Fashion-MNIST (same files, same format).
struct MnistVariant {
  const char* name;         // dataset name and TFRecord prefix
  const char* default_url;  // mirror folder, ends with '/'
  std::vector<std::string> class_names;
};

// Persisted label names: do not change. TF-Slim's list spells 6 as 'size';
// we write 'six'.
const MnistVariant& Mnist() {
  static const MnistVariant v{
      "mnist",
      "https://storage.googleapis.com/cvdf-datasets/mnist/",
      {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
       "nine"}};
  return v;
}

const MnistVariant& FashionMnist() {
  static const MnistVariant v{
      "fashion_mnist",
      "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
      {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
       "Sneaker", "Bag", "Ankle boot"}};
  return v;
}

DatasetSpec MnistLikeSpec(const MnistVariant& v) {
  DatasetSpec spec;
  spec.name = v.name;
  spec.splits_to_sizes = {{"train", 60000}, {"test", 10000}};
  spec.num_classes = kMnistNumClasses;
  spec.file_pattern = std::string(v.name) + "_%s.tfrecord";
  spec.image_height = kMnistImageSize;
  spec.image_width = kMnistImageSize;
  spec.image_channels = 1;
  spec.default_format = "raw";  // mnist.py's keys_to_features default
  return spec;
}

// File names on the mirrors (persisted, do not change).
constexpr const char* kTrainImages = "train-images-idx3-ubyte.gz";
constexpr const char* kTrainLabels = "train-labels-idx1-ubyte.gz";
constexpr const char* kTestImages = "t10k-images-idx3-ubyte.gz";
constexpr const char* kTestLabels = "t10k-labels-idx1-ubyte.gz";

void ConvertMnistLike(const MnistVariant& v, const ConvertOptions& options) {
  const std::string& dir = options.dataset_dir;
  MakeDirs(dir);
  const std::string train_path =
      JoinPath(dir, std::string(v.name) + "_train.tfrecord");
  const std::string test_path =
      JoinPath(dir, std::string(v.name) + "_test.tfrecord");
  const std::string labels_path = JoinPath(dir, kLabelsFilename);
  if (PathExists(train_path) && PathExists(test_path) &&
      PathExists(labels_path)) {
    LOG(INFO) << "Dataset files already exist in '" << dir
              << "'. Exiting without re-creating them.";
    return;
  }

  const std::string base =
      internal::SourceBaseUrl(options.source_url, v.default_url);
  // Local paths of the four files, and the ones we downloaded into `dir`.
  std::map<std::string, std::string> local;
  std::vector<std::string> downloaded;
  for (const char* file :
       {kTrainImages, kTrainLabels, kTestImages, kTestLabels}) {
    local[file] = internal::FetchSourceFile(base, file, dir, &downloaded);
  }

  // Validate both splits before writing anything.
  IdxSplit train = ReadIdxSplit(local[kTrainImages], local[kTrainLabels]);
  IdxSplit test = ReadIdxSplit(local[kTestImages], local[kTestLabels]);
  WriteIdxSplitTFRecord(train, train_path);
  LOG(INFO) << "Wrote " << train.images.count << " examples to '" << train_path
            << "'";
  WriteIdxSplitTFRecord(test, test_path);
  LOG(INFO) << "Wrote " << test.images.count << " examples to '" << test_path
            << "'";

  std::map<int64_t, std::string> labels;
  for (size_t i = 0; i < v.class_names.size(); ++i) {
    labels[static_cast<int64_t>(i)] = v.class_names[i];
  }
  WriteLabelsFile(labels, dir);

  if (!options.keep_downloads) {
    for (const std::string& path : downloaded) std::remove(path.c_str());
  }
  LOG(INFO) << "Finished converting the " << v.name << " dataset!";
}

DatasetSpec MnistSpec() { return MnistLikeSpec(Mnist()); }
DatasetSpec FashionMnistSpec() { return MnistLikeSpec(FashionMnist()); }

// The bytes an IDX header of `header_size` bytes claims: its dimensions
// (after the magic) multiplied, plus the header; 2^62 for anything larger.
uint64_t ClaimedIdxBytes(const std::string& header, size_t header_size) {
  constexpr uint64_t kCap = uint64_t{1} << 62;
  uint64_t bytes = 1;
  for (size_t at = 4; at + 4 <= header_size; at += 4) {
    const uint64_t d = ReadBigEndian32(header, at);
    bytes = d != 0 && bytes > kCap / d ? kCap : bytes * d;
  }
  return bytes + header_size;
}

// Decompresses an IDX .gz file after checking that the size its header
// claims is within ResourceLimits::max_member_bytes; a header that is not
// `magic`'s is left to the parser to name.
std::string ReadIdxFile(const std::string& path, uint32_t magic,
                        size_t header_size) {
  const std::string compressed = ReadFileToString(path);
  const std::string header = GunzipPrefix(compressed, path, header_size);
  if (header.size() == header_size && ReadBigEndian32(header, 0) == magic) {
    const uint64_t claimed = ClaimedIdxBytes(header, header_size);
    const uint64_t limit = GetResourceLimits().max_member_bytes;
    SLIM_CHECK(claimed <= limit, "'", path, "' header says ",
               ReadBigEndian32(header, 4), " items (", claimed,
               " bytes decompressed), more than a file may hold (",
               LimitHint(limit, "bytes", "SLIMTORCH_MAX_MEMBER_BYTES"), ")");
  }
  return GunzipString(compressed, path);
}

}  // namespace

IdxImages ParseIdxImages(const std::string& data, const std::string& name,
                         int expected_rows, int expected_cols) {
  uint32_t magic = data.size() >= 4 ? ReadBigEndian32(data, 0) : 0;
  SLIM_CHECK(magic == kIdxImagesMagic, "'", name,
             "' is not an IDX image file: expected magic ",
             Hex32(kIdxImagesMagic), ", got ",
             data.size() >= 4 ? Hex32(magic)
                              : StrCat("a ", data.size(), "-byte file"));
  SLIM_CHECK(data.size() >= kImagesHeaderSize, "'", name,
             "' is too short for an IDX image header: expected at least ",
             kImagesHeaderSize, " bytes, got ", data.size());
  IdxImages images;
  images.count = ReadBigEndian32(data, 4);
  uint32_t rows = ReadBigEndian32(data, 8);
  uint32_t cols = ReadBigEndian32(data, 12);
  SLIM_CHECK(rows == static_cast<uint32_t>(expected_rows) &&
                 cols == static_cast<uint32_t>(expected_cols),
             "'", name, "' has ", rows, "x", cols, " images, expected ",
             expected_rows, "x", expected_cols);
  images.rows = expected_rows;
  images.cols = expected_cols;
  uint64_t expected = static_cast<uint64_t>(images.count) * rows * cols;
  uint64_t actual = data.size() - kImagesHeaderSize;
  SLIM_CHECK(actual == expected, "'", name, "' header says ", images.count,
             " images of ", rows, "x", cols, " (", expected,
             " pixel bytes) but the file holds ", actual, " pixel bytes");
  images.pixels.assign(data.begin() + kImagesHeaderSize, data.end());
  return images;
}

std::vector<uint8_t> ParseIdxLabels(const std::string& data,
                                    const std::string& name, int num_classes) {
  uint32_t magic = data.size() >= 4 ? ReadBigEndian32(data, 0) : 0;
  SLIM_CHECK(magic == kIdxLabelsMagic, "'", name,
             "' is not an IDX label file: expected magic ",
             Hex32(kIdxLabelsMagic), ", got ",
             data.size() >= 4 ? Hex32(magic)
                              : StrCat("a ", data.size(), "-byte file"));
  SLIM_CHECK(data.size() >= kLabelsHeaderSize, "'", name,
             "' is too short for an IDX label header: expected at least ",
             kLabelsHeaderSize, " bytes, got ", data.size());
  uint32_t count = ReadBigEndian32(data, 4);
  uint64_t actual = data.size() - kLabelsHeaderSize;
  SLIM_CHECK(actual == count, "'", name, "' header says ", count,
             " labels but the file holds ", actual, " label bytes");
  std::vector<uint8_t> labels(data.begin() + kLabelsHeaderSize, data.end());
  for (size_t i = 0; i < labels.size(); ++i) {
    SLIM_CHECK(labels[i] < num_classes, "'", name, "' label at index ", i,
               " is ", static_cast<int>(labels[i]),
               ", expected a class id in [0, ", num_classes, ")");
  }
  return labels;
}

IdxSplit ReadIdxSplit(const std::string& images_gz_path,
                      const std::string& labels_gz_path) {
  IdxSplit split;
  split.images =
      ParseIdxImages(ReadIdxFile(images_gz_path, kIdxImagesMagic,
                                 kImagesHeaderSize),
                     images_gz_path);
  split.labels = ParseIdxLabels(
      ReadIdxFile(labels_gz_path, kIdxLabelsMagic, kLabelsHeaderSize),
      labels_gz_path);
  SLIM_CHECK(static_cast<uint64_t>(split.images.count) == split.labels.size(),
             "'", images_gz_path, "' holds ", split.images.count,
             " images but '", labels_gz_path, "' holds ", split.labels.size(),
             " labels; expected the same count");
  return split;
}

void WriteIdxSplitTFRecord(const IdxSplit& split, const std::string& path,
                           int num_threads) {
  const IdxImages& images = split.images;
  SLIM_CHECK(static_cast<uint64_t>(images.count) == split.labels.size() &&
                 images.pixels.size() == static_cast<size_t>(images.count) *
                                             images.rows * images.cols,
             "WriteIdxSplitTFRecord('", path, "'): inconsistent split (",
             images.count, " images, ", split.labels.size(), " labels, ",
             images.pixels.size(), " pixel bytes)");
  const size_t image_bytes = static_cast<size_t>(images.rows) * images.cols;
  std::vector<int64_t> labels(split.labels.begin(), split.labels.end());
  internal::WritePngExamplesTFRecord(
      path, images.rows, images.cols, 1, labels,
      [&](int64_t i, uint8_t* hwc) {
        std::copy_n(images.pixels.data() + i * image_bytes, image_bytes, hwc);
      },
      num_threads);
}

void ConvertMnist(const ConvertOptions& options) {
  ConvertMnistLike(Mnist(), options);
}

void ConvertFashionMnist(const ConvertOptions& options) {
  ConvertMnistLike(FashionMnist(), options);
}

SLIM_REGISTER_DATASET("mnist", MnistSpec);
SLIM_REGISTER_DATASET("fashion_mnist", FashionMnistSpec);
SLIM_REGISTER_DATASET_CONVERTER("mnist", ConvertMnist);
SLIM_REGISTER_DATASET_CONVERTER("fashion_mnist", ConvertFashionMnist);

}  // namespace slimtorch
