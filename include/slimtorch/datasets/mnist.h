#pragma once
// MNIST and Fashion-MNIST: IDX file parsing and the converters behind
// download_and_convert_data --dataset_name=mnist|fashion_mnist.
//
// IDX files (big-endian, persisted format, do not change):
//   images: uint32 magic 0x00000803, uint32 count, uint32 rows,
//           uint32 cols, then count*rows*cols uint8 pixels, row-major;
//   labels: uint32 magic 0x00000801, uint32 count, then count uint8 labels.
//
// Registered datasets (datasets/mnist.py): "mnist" reads mnist_%s.tfrecord,
// "fashion_mnist" reads fashion_mnist_%s.tfrecord; splits train 60000 and
// test 10000, 10 classes, PNG 28x28x1.

#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/datasets/dataset.h"

namespace slimtorch {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
inline constexpr int kMnistImageSize = 28;
inline constexpr int kMnistNumClasses = 10;

struct IdxImages {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  // count * rows * cols bytes; image i starts at i * rows * cols.
  std::vector<uint8_t> pixels;
};

// Parses an uncompressed IDX image file held in `data`. Checks the magic,
// that rows x cols is expected_rows x expected_cols and that the payload is
// exactly count*rows*cols bytes. Errors name `name`, the expected and the
// actual value.
IdxImages ParseIdxImages(const std::string& data, const std::string& name,
                         int expected_rows = kMnistImageSize,
                         int expected_cols = kMnistImageSize);

// Parses an uncompressed IDX label file. Checks the magic, that the payload
// is exactly count bytes and that every label is in [0, num_classes) (the
// error names the file and the index of the first bad label).
std::vector<uint8_t> ParseIdxLabels(const std::string& data,
                                    const std::string& name,
                                    int num_classes = kMnistNumClasses);

// One split: images[i] has label labels[i].
struct IdxSplit {
  IdxImages images;
  std::vector<uint8_t> labels;
};

// Reads a pair of gzip-compressed IDX files (e.g. train-images-idx3-ubyte.gz
// and train-labels-idx1-ubyte.gz), 28x28 images, labels in [0, 10), and
// checks that both hold the same number of examples.
IdxSplit ReadIdxSplit(const std::string& images_gz_path,
                      const std::string& labels_gz_path);

// Writes `split` as a TFRecord file at `path` (atomically, see
// TFRecordWriter): record i is EncodeImageExample({PNG of image i, "png",
// labels[i], rows, cols}). PNGs are encoded by `num_threads` threads
// (0 = hardware concurrency, at most 8); the output does not depend on it.
void WriteIdxSplitTFRecord(const IdxSplit& split, const std::string& path,
                           int num_threads = 0);

// download_and_convert_mnist.run(): fetches the four IDX .gz files from
// options.source_url (default https://storage.googleapis.com/cvdf-datasets/
// mnist/; a file:// folder is read in place) into dataset_dir, and writes
// mnist_train.tfrecord, mnist_test.tfrecord and labels.txt (zero..nine).
// Does nothing when all three exist. Throws slimtorch::Error; never leaves a
// partial file under a final name.
void ConvertMnist(const ConvertOptions& options);

// As ConvertMnist for Fashion-MNIST (default mirror
// http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/): writes
// fashion_mnist_{train,test}.tfrecord and labels.txt (T-shirt/top ...
// Ankle boot).
void ConvertFashionMnist(const ConvertOptions& options);

}  // namespace slimtorch
