// The flowers converter on archives built here in TF-Slim's layout: the
// split is Python's random.seed(0) / random.shuffle over the sorted photo
// list (CPython's permutation, tests/golden/python_random_goldens.inc),
// shards and keys as TF-Slim writes them, bad input named.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/python_random_goldens.h"
#include "export/python_engines.h"
#include "io/archive_test_util.h"
#include "io/io_test_util.h"
#include "io/test_jpeg.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/tfrecord.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using namespace testing_golden;  // NOLINT: golden tables

using testing::TempDir;
using testing_util::TarEntry;

const char* kClasses[5] = {"daisy", "dandelion", "roses", "sunflowers",
                           "tulips"};
constexpr int kPerClass[5] = {633, 898, 641, 699, 799};  // 3670, as TF-Slim's

// Photo k of the sorted list: a distinct tiny JPEG (its bytes identify it).
std::string PhotoName(int c, int k) {
  char name[64];
  std::snprintf(name, sizeof(name), "flower_photos/%s/%04d.jpg", kClasses[c], k);
  return name;
}

class FlowersTest : public ::testing::Test {
 protected:
  // The archive, photos in an unsorted member order; *index maps a photo's
  // bytes to its index in the sorted list.
  void WriteArchive(std::map<std::string, int>* index,
                    const std::vector<TarEntry>& extra = {}) {
    std::vector<TarEntry> entries = extra;
    entries.push_back({"flower_photos/LICENSE.txt", "licenses"});
    int sorted = 0;
    for (int c = 0; c < 5; ++c) {
      for (int k = 0; k < kPerClass[c]; ++k, ++sorted) {
        std::string jpeg = testing_io::TestJpeg(8 + k % 5, 8 + c, 3, 2, 2,
                                                static_cast<uint32_t>(sorted));
        (*index)[jpeg] = sorted;
        entries.push_back({PhotoName(c, k), jpeg});
      }
    }
    std::reverse(entries.begin() + 1, entries.end());
    testing_util::WriteTarGz(src_.Join("flower_photos.tgz"), entries);
  }

  ConvertOptions Options() {
    ConvertOptions o;
    o.dataset_dir = out_.path();
    o.source_url = "file://" + src_.path() + "/";
    o.num_threads = 2;
    return o;
  }

  static void Convert(const ConvertOptions& o) {
    GetConverterRegistry().Get("flowers")(o);
  }

  // The sorted-list indices of the records of `split`, in shard order.
  std::vector<int> Indices(const std::string& split,
                           const std::map<std::string, int>& index) {
    std::vector<int> out;
    const DatasetSpec spec = GetDatasetSpec("flowers");
    const std::vector<std::string> files = spec.SplitFiles(out_.path(), split);
    EXPECT_EQ(files.size(), 5u);
    for (const std::string& f : files) {
      TFRecordReader reader(f);
      std::string record;
      while (reader.Read(&record)) {
        ImageExample ex = DecodeImageExample(record, f);
        EXPECT_EQ(ex.format, "jpg");
        const int i = index.at(ex.encoded);
        out.push_back(i);
        // Label from the folder, size from the JPEG.
        int c = 0, first = 0;
        while (i >= first + kPerClass[c]) first += kPerClass[c++];
        EXPECT_EQ(ex.label, c);
        EXPECT_EQ(ex.height, 8 + (i - first) % 5);
        EXPECT_EQ(ex.width, 8 + c);
      }
    }
    return out;
  }

  TempDir src_, out_;
};

TEST_F(FlowersTest, SplitIsTfSlimsPythonShuffle) {
  std::map<std::string, int> index;
  WriteArchive(&index);
  Convert(Options());
  std::vector<int> validation = Indices("validation", index);
  std::vector<int> train = Indices("train", index);
  ASSERT_EQ(validation.size(), 350u);
  ASSERT_EQ(train.size(), 3320u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(validation[i], kShuffle0_3670.first[i]);
  std::vector<int> all = validation;
  all.insert(all.end(), train.begin(), train.end());
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int v : all) h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ULL;
  EXPECT_EQ(h, kShuffle0_3670.fnv);
  // TF-Slim's shard sizes: ceil(n / 5) per shard.
  TFRecordReader first(out_.Join("flowers_train_00000-of-00005.tfrecord"));
  std::string record;
  int n = 0;
  while (first.Read(&record)) ++n;
  EXPECT_EQ(n, 664);
  const auto labels = ReadLabelsFile(out_.Join("labels.txt"));
  EXPECT_EQ(labels.at(0), "daisy");
  EXPECT_EQ(labels.at(4), "tulips");
  // The archive is the user's (file://): kept.
  EXPECT_TRUE(PathExists(src_.Join("flower_photos.tgz")));
  // A second run with complete outputs does nothing (even without source).
  std::remove(src_.Join("flower_photos.tgz").c_str());
  Convert(Options());
}

TEST_F(FlowersTest, BadPhotosAreNamedOrSkipped) {
  std::map<std::string, int> index;
  WriteArchive(&index, {{"flower_photos/roses/zzz_empty.jpg", ""},
                        {"flower_photos/tulips/zzz_corrupt.jpg",
                         testing_io::TestJpeg(30, 30, 3, 2, 2, 1).substr(0, 90)},
                        {"flower_photos/daisy/.DS_Store", "junk"}});
  EXPECT_ERROR_CONTAINS(Convert(Options()), "flower_photos.tgz' member '",
                        "flower_photos/roses/zzz_empty.jpg' is empty (0 bytes)",
                        "(and 1 more)", "--skip_bad_images");
  EXPECT_FALSE(PathExists(out_.Join("flowers_train_00000-of-00005.tfrecord")));
  ConvertOptions o = Options();
  o.skip_bad_images = true;
  Convert(o);  // the 3670 good photos: TF-Slim's split again
  std::vector<int> validation = Indices("validation", index);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(validation[i], kShuffle0_3670.first[i]);
}

TEST_F(FlowersTest, UnsafeOrTruncatedArchivesFailCleanly) {
  std::map<std::string, int> index;
  WriteArchive(&index, {{"flower_photos/../evil.jpg", "x"}});
  EXPECT_ERROR_CONTAINS(Convert(Options()), "flower_photos.tgz",
                        "../evil.jpg");
  index.clear();
  WriteArchive(&index);
  const std::string whole = ReadFileToString(src_.Join("flower_photos.tgz"));
  WriteFileAtomically(src_.Join("flower_photos.tgz"),
                      whole.substr(0, whole.size() / 2));
  EXPECT_ERROR_CONTAINS(Convert(Options()), "flower_photos.tgz",
                        "truncated or corrupt");
  EXPECT_FALSE(PathExists(out_.Join("labels.txt")));
  EXPECT_TRUE(Glob(out_.Join("flowers_*")).empty());
}

// TensorFlow reads the records with TF-Slim's own flowers decoder and gets
// the labels, sizes and pixels ours do.
TEST_F(FlowersTest, TfSlimsDecoderReadsTheRecords) {
  const char* python = "/opt/tfenv/bin/python";
  if (!testing_export::HavePythonModules("tensorflow, tf_slim")) {
    GTEST_SKIP() << "no TensorFlow + tf_slim in /opt/tfenv";
  }
  std::map<std::string, int> index;
  WriteArchive(&index);
  Convert(Options());
  const std::string report = out_.Join("tf.txt");
  const std::string cmd = StrCat(
      python, " ", SLIMTORCH_TEST_DATA_DIR,
      "/../scripts/golden/check_flowers_records.py ", out_.path(),
      " validation > ", report, " 2>", out_.Join("tf.err"));
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << ReadFileToString(out_.Join("tf.err"));
  std::string ours;
  const DatasetSpec spec = GetDatasetSpec("flowers");
  for (const std::string& f : spec.SplitFiles(out_.path(), "validation")) {
    TFRecordReader reader(f);
    std::string record;
    while (reader.Read(&record)) {
      const ImageExample ex = DecodeImageExample(record, f);
      const Image image = DecodeImage(ex.encoded, 3, f);
      int64_t sum = 0;
      for (uint8_t v : image.pixels) sum += v;
      ours += StrCat(ex.label, " ", ex.height, " ", ex.width, " ", sum, "\n");
    }
  }
  EXPECT_EQ(ReadFileToString(report), ours);
}

TEST_F(FlowersTest, SpecIsTfSlims) {
  const DatasetSpec spec = GetDatasetSpec("flowers");
  EXPECT_EQ(spec.SplitSize("train"), 3320);
  EXPECT_EQ(spec.SplitSize("validation"), 350);
  EXPECT_EQ(spec.num_classes, 5);
}

}  // namespace
}  // namespace slimtorch
