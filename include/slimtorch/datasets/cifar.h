#pragma once
// CIFAR-10 and CIFAR-100 from the binary archives, and the converters behind
// download_and_convert_data --dataset_name=cifar10|cifar100.
//
// Sources (https://www.cs.toronto.edu/~kriz/, persisted formats, do not
// change):
//   cifar-10-binary.tar.gz: cifar-10-batches-bin/data_batch_{1..5}.bin
//     (train), test_batch.bin (test), batches.meta.txt (10 class names, one
//     a line); record = 1 label byte + 3072 pixel bytes.
//   cifar-100-binary.tar.gz: cifar-100-binary/train.bin, test.bin,
//     fine_label_names.txt (100), coarse_label_names.txt (20); record =
//     coarse label byte + fine label byte + 3072 pixel bytes.
// Pixels are depth-major: 1024 R, 1024 G, 1024 B bytes, each 32x32
// row-major. The TFRecords store them as 32x32x3 HWC PNGs.
//
// Registered datasets (datasets/cifar10.py): "cifar10" reads
// cifar10_%s.tfrecord (10 classes), "cifar100" reads cifar100_%s.tfrecord
// (100 fine classes) and "cifar100_coarse" reads the same files written with
// ConvertOptions::cifar100_label_mode = "coarse" (20 classes). Splits train
// 50000 and test 10000, PNG 32x32x3.

#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/datasets/dataset.h"

namespace slimtorch {

inline constexpr int kCifarImageSize = 32;
inline constexpr int kCifarImageBytes = 3 * 32 * 32;
inline constexpr int64_t kCifarTrainSize = 50000;
inline constexpr int64_t kCifarTestSize = 10000;

// Examples of one split, in file order.
struct CifarSplit {
  // labels.size() * kCifarImageBytes bytes, depth-major (CHW) as stored.
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Appends the records of one CIFAR binary file held in `data` to *split.
// A record is label_classes.size() label bytes (label byte k must be in
// [0, label_classes[k])) followed by kCifarImageBytes pixel bytes; the label
// kept is byte `label_index`. Checks that data.size() is a multiple of the
// record size and every label byte is in range; errors name `name`, the
// record index and the expected value.
void AppendCifarRecords(const std::string& data, const std::string& name,
                        const std::vector<int>& label_classes, int label_index,
                        CifarSplit* split);

// Parses a CIFAR label-name file (batches.meta.txt, *_label_names.txt): one
// name a line, surrounding whitespace trimmed, empty lines skipped. Throws
// naming `name` unless exactly `expected` names are found.
std::vector<std::string> ParseCifarLabelNames(const std::string& data,
                                              const std::string& name,
                                              int expected);

// Writes `split` as a TFRecord file at `path` (atomically): record i is
// EncodeImageExample({PNG 32x32x3 HWC of image i, "png", labels[i], 32, 32}).
// `num_threads` as WritePngExamplesTFRecord (0 = hardware concurrency).
void WriteCifarSplitTFRecord(const CifarSplit& split, const std::string& path,
                             int num_threads = 0);

// download_and_convert_cifar10.run() on the binary archive: fetches
// cifar-10-binary.tar.gz from options.source_url (default
// https://www.cs.toronto.edu/~kriz/; a file:// folder is read in place) into
// dataset_dir, reads its members in memory (no extraction), validates both
// splits and writes cifar10_train.tfrecord, cifar10_test.tfrecord and
// labels.txt (names from batches.meta.txt). Does nothing when all three
// exist. Throws slimtorch::Error; never leaves a partial file under a final
// name. The downloaded archive is removed unless options.keep_downloads.
void ConvertCifar10(const ConvertOptions& options);

// As ConvertCifar10 for cifar-100-binary.tar.gz: writes
// cifar100_{train,test}.tfrecord and labels.txt with the fine (100) or
// coarse (20) labels, per options.cifar100_label_mode. When the files exist
// but labels.txt has the other mode's class count, throws instead of
// skipping.
void ConvertCifar100(const ConvertOptions& options);

}  // namespace slimtorch
