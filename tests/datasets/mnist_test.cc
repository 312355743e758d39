#include "slimtorch/datasets/mnist.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/test_http_server.h"
#include "memory_cap.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/gzip.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/tfrecord.h"
#include "test_util.h"

namespace slimtorch {
namespace {
namespace fs = std::filesystem;

void PutBigEndian32(std::string* s, uint32_t v) {
  s->push_back(static_cast<char>(v >> 24));
  s->push_back(static_cast<char>(v >> 16));
  s->push_back(static_cast<char>(v >> 8));
  s->push_back(static_cast<char>(v));
}

// An IDX image file (uncompressed) with `count` images of rows x cols.
std::string IdxImagesBytes(uint32_t count, uint32_t rows, uint32_t cols,
                           const std::vector<uint8_t>& pixels,
                           uint32_t magic = kIdxImagesMagic) {
  std::string s;
  PutBigEndian32(&s, magic);
  PutBigEndian32(&s, count);
  PutBigEndian32(&s, rows);
  PutBigEndian32(&s, cols);
  s.append(pixels.begin(), pixels.end());
  return s;
}

std::string IdxLabelsBytes(const std::vector<uint8_t>& labels,
                           uint32_t magic = kIdxLabelsMagic) {
  std::string s;
  PutBigEndian32(&s, magic);
  PutBigEndian32(&s, static_cast<uint32_t>(labels.size()));
  s.append(labels.begin(), labels.end());
  return s;
}

// Deterministic, distinct pixels for image `i`.
std::vector<uint8_t> SyntheticPixels(int count, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(count) * 28 * 28);
  for (size_t j = 0; j < p.size(); ++j) {
    p[j] = static_cast<uint8_t>((j * 7 + seed * 13 + j / 784 * 31) % 256);
  }
  return p;
}

template <typename Fn>
void ExpectErrorContains(Fn fn, const std::string& what) {
  try {
    fn();
    FAIL() << "expected an error containing: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() /
            (std::string("slimtorch_") + info->test_suite_name() + "_" +
             info->name() + "_" + std::to_string(::getpid())))
               .string();
    testing::RemoveTree(dir_);
    MakeDirs(dir_);
  }
  void TearDown() override { testing::RemoveTree(dir_); }
  std::string Path(const std::string& name) const {
    return JoinPath(dir_, name);
  }
  std::string dir_;
};

// ---------------------------------------------------------------- IDX

using IdxTest = TempDirTest;

TEST_F(IdxTest, ParsesGoodFiles) {
  std::vector<uint8_t> pixels = SyntheticPixels(3, 1);
  IdxImages images =
      ParseIdxImages(IdxImagesBytes(3, 28, 28, pixels), "images");
  EXPECT_EQ(images.count, 3);
  EXPECT_EQ(images.rows, 28);
  EXPECT_EQ(images.cols, 28);
  EXPECT_EQ(images.pixels, pixels);
  std::vector<uint8_t> labels = {0, 9, 4};
  EXPECT_EQ(ParseIdxLabels(IdxLabelsBytes(labels), "labels"), labels);
}

TEST_F(IdxTest, WrongMagic) {
  ExpectErrorContains(
      [] {
        ParseIdxImages(
            IdxImagesBytes(1, 28, 28, SyntheticPixels(1, 0), kIdxLabelsMagic),
            "imgs.idx");
      },
      "'imgs.idx' is not an IDX image file: expected magic 0x00000803, got "
      "0x00000801");
  ExpectErrorContains(
      [] { ParseIdxLabels(IdxLabelsBytes({1}, 0x12345678), "lbl.idx"); },
      "'lbl.idx' is not an IDX label file: expected magic 0x00000801, got "
      "0x12345678");
}

TEST_F(IdxTest, WrongDims) {
  ExpectErrorContains(
      [] {
        ParseIdxImages(IdxImagesBytes(1, 27, 28, std::vector<uint8_t>(27 * 28)),
                       "f");
      },
      "'f' has 27x28 images, expected 28x28");
}

TEST_F(IdxTest, TruncatedPayload) {
  std::vector<uint8_t> pixels = SyntheticPixels(3, 0);
  pixels.resize(pixels.size() - 1);
  ExpectErrorContains(
      [&] { ParseIdxImages(IdxImagesBytes(3, 28, 28, pixels), "f"); },
      "'f' header says 3 images of 28x28 (2352 pixel bytes) but the file "
      "holds 2351 pixel bytes");
  std::string labels = IdxLabelsBytes({1, 2, 3});
  labels.pop_back();
  ExpectErrorContains([&] { ParseIdxLabels(labels, "l"); },
                      "'l' header says 3 labels but the file holds 2");
  ExpectErrorContains(
      [] { ParseIdxImages(std::string("\x00\x00\x08\x03\x00", 5), "short"); },
      "'short' is too short for an IDX image header: expected at least 16 "
      "bytes, got 5");
  ExpectErrorContains([] { ParseIdxLabels(std::string("\x00\x00", 2), "l"); },
                      "'l' is not an IDX label file: expected magic "
                      "0x00000801, got a 2-byte file");
}

TEST_F(IdxTest, LabelOutOfRange) {
  ExpectErrorContains(
      [] {
        ParseIdxLabels(IdxLabelsBytes({3, 10, 2}), "l.idx");
      },
      "'l.idx' label at index 1 is 10, expected a class id in [0, 10)");
}

TEST_F(IdxTest, TruncatedGz) {
  std::string gz = GzipString(IdxImagesBytes(2, 28, 28, SyntheticPixels(2, 0)));
  WriteFileAtomically(Path("i.gz"), gz.substr(0, gz.size() - 20));
  WriteFileAtomically(Path("l.gz"), GzipString(IdxLabelsBytes({1, 2})));
  ExpectErrorContains(
      [&] { ReadIdxSplit(Path("i.gz"), Path("l.gz")); },
      "'" + Path("i.gz") + "' is truncated: gzip stream ended early");
}

TEST_F(IdxTest, ImageLabelCountMismatch) {
  WriteFileAtomically(Path("i.gz"), GzipString(IdxImagesBytes(
                                        3, 28, 28, SyntheticPixels(3, 0))));
  WriteFileAtomically(Path("l.gz"), GzipString(IdxLabelsBytes({1, 2})));
  ExpectErrorContains([&] { ReadIdxSplit(Path("i.gz"), Path("l.gz")); },
                      "'" + Path("i.gz") + "' holds 3 images but '" +
                          Path("l.gz") + "' holds 2 labels");
}

// A header claiming 2^31 images of 28x28 (1.7 TB) over 100 MiB of zeros
// (a 100 KB gzip bomb): refused from the header, before decompressing, in
// a child that may map only 64 MiB more (tests/memory_cap.h).
TEST_F(IdxTest, HugeCountRefusedBeforeDecompressing) {
  std::string gz = GzipString(IdxImagesBytes(uint32_t{1} << 31, 28, 28, {}));
  const std::string zeros = GzipString(std::string(1 << 20, '\0'), 9);
  for (int i = 0; i < 100; ++i) gz += zeros;  // gzip members concatenate
  WriteFileAtomically(Path("i.gz"), gz);
  WriteFileAtomically(Path("l.gz"), GzipString(IdxLabelsBytes({1, 2})));
  const std::string msg = testing::ErrorWithinMemory(
      [&] { ReadIdxSplit(Path("i.gz"), Path("l.gz")); }, size_t{64} << 20);
  for (const std::string& part :
       {"'" + Path("i.gz") + "' header says 2147483648 items " +
            "(1683627180048 bytes decompressed)",
        std::string("the limit is 4294967296 bytes"),
        std::string("set SLIMTORCH_MAX_MEMBER_BYTES to raise it")}) {
    EXPECT_NE(msg.find(part), std::string::npos) << msg << "\nmissing: "
                                                 << part;
  }
}

// ---------------------------------------------------------------- specs

TEST(MnistSpecTest, RegisteredSpecs) {
  for (const char* name : {"mnist", "fashion_mnist"}) {
    DatasetSpec spec = GetDatasetSpec(name);
    EXPECT_EQ(spec.name, name);
    EXPECT_EQ(spec.SplitSize("train"), 60000);
    EXPECT_EQ(spec.SplitSize("test"), 10000);
    EXPECT_EQ(spec.num_classes, 10);
    EXPECT_EQ(spec.file_pattern, std::string(name) + "_%s.tfrecord");
    EXPECT_EQ(spec.image_height, 28);
    EXPECT_EQ(spec.image_width, 28);
    EXPECT_EQ(spec.image_channels, 1);
    EXPECT_TRUE(GetConverterRegistry().Has(name));
  }
}

// ---------------------------------------------------------------- converter

struct SyntheticSplit {
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;
};

class MnistConvertTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    src_ = Path("src");
    out_ = Path("out");
    MakeDirs(src_);
    train_ = {SyntheticPixels(5, 1), {5, 0, 4, 1, 9}};
    test_ = {SyntheticPixels(3, 2), {7, 2, 6}};
    files_ = {
        {"train-images-idx3-ubyte.gz",
         GzipString(IdxImagesBytes(5, 28, 28, train_.pixels))},
        {"train-labels-idx1-ubyte.gz",
         GzipString(IdxLabelsBytes(train_.labels))},
        {"t10k-images-idx3-ubyte.gz",
         GzipString(IdxImagesBytes(3, 28, 28, test_.pixels))},
        {"t10k-labels-idx1-ubyte.gz", GzipString(IdxLabelsBytes(test_.labels))},
    };
    WriteSources();
  }

  void WriteSources() {
    for (const auto& kv : files_) {
      WriteFileAtomically(JoinPath(src_, kv.first), kv.second);
    }
  }

  ConvertOptions Options() const {
    ConvertOptions options;
    options.dataset_dir = out_;
    options.source_url = "file://" + src_ + "/";
    return options;
  }

  // Reads `path` back and checks every record against `split`.
  void ExpectTFRecordMatches(const std::string& path,
                             const SyntheticSplit& split) {
    TFRecordReader reader(path);
    std::string record;
    size_t i = 0;
    while (reader.Read(&record)) {
      ASSERT_LT(i, split.labels.size());
      std::string context = path + " record " + std::to_string(i);
      ImageExample ex = DecodeImageExample(record, context);
      EXPECT_EQ(ex.format, "png");
      EXPECT_EQ(ex.label, split.labels[i]);
      EXPECT_EQ(ex.height, 28);
      EXPECT_EQ(ex.width, 28);
      Image img = DecodeImage(ex.encoded, 1, context);
      ASSERT_EQ(img.height, 28);
      ASSERT_EQ(img.width, 28);
      ASSERT_EQ(img.channels, 1);
      std::vector<uint8_t> expected(split.pixels.begin() + i * 784,
                                    split.pixels.begin() + (i + 1) * 784);
      EXPECT_EQ(img.pixels, expected) << context;
      ++i;
    }
    EXPECT_EQ(i, split.labels.size());
  }

  std::string src_;
  std::string out_;
  SyntheticSplit train_;
  SyntheticSplit test_;
  std::map<std::string, std::string> files_;
};

TEST_F(MnistConvertTest, RoundTripsPixelsAndLabelsFromFileUrl) {
  ConvertMnist(Options());
  ExpectTFRecordMatches(JoinPath(out_, "mnist_train.tfrecord"), train_);
  ExpectTFRecordMatches(JoinPath(out_, "mnist_test.tfrecord"), test_);
  EXPECT_EQ(ReadFileToString(JoinPath(out_, "labels.txt")),
            "0:zero\n1:one\n2:two\n3:three\n4:four\n5:five\n6:six\n7:seven\n"
            "8:eight\n9:nine\n");
  // file:// sources are read in place: nothing copied, nothing deleted.
  EXPECT_TRUE(PathExists(JoinPath(src_, "train-images-idx3-ubyte.gz")));
  EXPECT_FALSE(PathExists(JoinPath(out_, "train-images-idx3-ubyte.gz")));
  EXPECT_TRUE(Glob(JoinPath(out_, "*.tmp.*")).empty());
  // The registered spec finds the files.
  EXPECT_EQ(GetDatasetSpec("mnist").SplitFiles(out_, "train").size(), 1u);
}

TEST_F(MnistConvertTest, FashionMnistNamesAndLabels) {
  GetConverterRegistry().Get("fashion_mnist")(Options());
  ExpectTFRecordMatches(JoinPath(out_, "fashion_mnist_train.tfrecord"), train_);
  ExpectTFRecordMatches(JoinPath(out_, "fashion_mnist_test.tfrecord"), test_);
  EXPECT_EQ(ReadFileToString(JoinPath(out_, "labels.txt")),
            "0:T-shirt/top\n1:Trouser\n2:Pullover\n3:Dress\n4:Coat\n"
            "5:Sandal\n6:Shirt\n7:Sneaker\n8:Bag\n9:Ankle boot\n");
}

TEST_F(MnistConvertTest, SecondRunSkips) {
  ConvertMnist(Options());
  std::string train_bytes =
      ReadFileToString(JoinPath(out_, "mnist_train.tfrecord"));
  testing::RemoveTree(src_);  // a second conversion would fail now
  ConvertMnist(Options());
  EXPECT_EQ(ReadFileToString(JoinPath(out_, "mnist_train.tfrecord")),
            train_bytes);
}

TEST_F(MnistConvertTest, FailureLeavesNoFinalTFRecord) {
  std::string& labels = files_["t10k-labels-idx1-ubyte.gz"];
  labels = labels.substr(0, labels.size() - 5);
  WriteSources();
  ExpectErrorContains([&] { ConvertMnist(Options()); },
                      "t10k-labels-idx1-ubyte.gz' is truncated");
  EXPECT_FALSE(PathExists(JoinPath(out_, "mnist_train.tfrecord")));
  EXPECT_FALSE(PathExists(JoinPath(out_, "mnist_test.tfrecord")));
  EXPECT_FALSE(PathExists(JoinPath(out_, "labels.txt")));
  EXPECT_TRUE(Glob(JoinPath(out_, "*.tmp.*")).empty());
}

TEST_F(MnistConvertTest, MissingSourceFileNamed) {
  fs::remove(JoinPath(src_, "t10k-images-idx3-ubyte.gz"));
  ExpectErrorContains(
      [&] { ConvertMnist(Options()); },
      JoinPath(src_, "t10k-images-idx3-ubyte.gz") + "' does not exist");
}

TEST_F(MnistConvertTest, DownloadsOverHttpAndDeletesDownloads) {
  std::map<std::string, std::string> served;
  for (const auto& kv : files_) served["/mnist/" + kv.first] = kv.second;
  testing_util::TestHttpServer server(served);
  ConvertOptions options = Options();
  options.source_url = server.Url("/mnist/");
  ConvertMnist(options);
  ExpectTFRecordMatches(JoinPath(out_, "mnist_train.tfrecord"), train_);
  ExpectTFRecordMatches(JoinPath(out_, "mnist_test.tfrecord"), test_);
  EXPECT_TRUE(Glob(JoinPath(out_, "*.gz*")).empty());
  EXPECT_EQ(server.num_requests(), 4);

  testing::RemoveTree(out_);
  options.keep_downloads = true;
  ConvertMnist(options);
  EXPECT_EQ(Glob(JoinPath(out_, "*-ubyte.gz")).size(), 4u);
}

TEST_F(MnistConvertTest, HttpNotFoundNamesUrl) {
  testing_util::TestHttpServer server({});
  ConvertOptions options = Options();
  options.source_url = server.Url("/nothing/");
  ExpectErrorContains(
      [&] { ConvertMnist(options); },
      server.Url("/nothing/train-images-idx3-ubyte.gz") + "': HTTP status 404");
  EXPECT_FALSE(PathExists(JoinPath(out_, "mnist_train.tfrecord")));
}

TEST(WriteIdxSplitTest, OutputDoesNotDependOnThreadCount) {
  IdxSplit split;
  split.images.count = 600;
  split.images.rows = 28;
  split.images.cols = 28;
  split.images.pixels = SyntheticPixels(600, 3);
  for (int i = 0; i < 600; ++i) split.labels.push_back(i % 10);
  std::string base = (fs::temp_directory_path() /
                      ("slimtorch_idx_threads_" + std::to_string(::getpid())))
                         .string();
  WriteIdxSplitTFRecord(split, base + "_1", 1);
  WriteIdxSplitTFRecord(split, base + "_4", 4);
  EXPECT_EQ(CountTFRecords(base + "_1"), 600u);
  EXPECT_EQ(ReadFileToString(base + "_1"), ReadFileToString(base + "_4"));
  fs::remove(base + "_1");
  fs::remove(base + "_4");
}

// ---------------------------------------------------------------- real data

TEST(FashionMnistRealDataTest, ConvertsDebianPackage) {
  const std::string src = "/usr/share/datasets/fashion-mnist";
  if (!PathExists(JoinPath(src, "train-images-idx3-ubyte.gz"))) {
    GTEST_SKIP() << src << " not installed (package dataset-fashion-mnist)";
  }
  std::string out = (fs::temp_directory_path() /
                     ("slimtorch_fashion_mnist_" + std::to_string(::getpid())))
                        .string();
  testing::RemoveTree(out);
  ConvertOptions options;
  options.dataset_dir = out;
  options.source_url = "file://" + src + "/";
  auto start = std::chrono::steady_clock::now();
  ConvertFashionMnist(options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  RecordProperty("conversion_seconds", std::to_string(seconds));
  std::cout << "[ INFO     ] Fashion-MNIST conversion took " << seconds
            << " s\n";
  const std::string train = JoinPath(out, "fashion_mnist_train.tfrecord");
  EXPECT_EQ(CountTFRecords(train), 60000u);
  EXPECT_EQ(CountTFRecords(JoinPath(out, "fashion_mnist_test.tfrecord")),
            10000u);

  IdxSplit idx = ReadIdxSplit(JoinPath(src, "train-images-idx3-ubyte.gz"),
                              JoinPath(src, "train-labels-idx1-ubyte.gz"));
  TFRecordReader reader(train);
  std::string record;
  ASSERT_TRUE(reader.Read(&record));
  ImageExample ex = DecodeImageExample(record, "record 0");
  EXPECT_EQ(ex.label, idx.labels[0]);
  Image img = DecodeImage(ex.encoded, 1, "record 0");
  EXPECT_EQ(img.pixels, std::vector<uint8_t>(idx.images.pixels.begin(),
                                             idx.images.pixels.begin() + 784));
  testing::RemoveTree(out);
}

}  // namespace
}  // namespace slimtorch
