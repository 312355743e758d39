// The image_folder converter and described datasets: a folder of class
// folders becomes TFRecords + labels.txt + dataset_description.txt; the split
// is retrain.py's SHA-1 rule (tests/golden/image_folder_split_goldens.inc,
// computed by Python), stable when files are added; bad input is named, or
// skipped and listed, and leaves nothing that looks complete.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/test_bmp.h"
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

#include "golden/image_folder_split_goldens.inc"

namespace fs = std::filesystem;
using testing::TempDir;
using testing_io::ErrorMessage;

void WriteFile(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

std::string Png(int h, int w, int c, uint8_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(h) * w * c);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7 + seed);
  return EncodePng(px.data(), h, w, c);
}

std::string Jpeg(int h, int w, uint32_t seed) {
  return testing_io::TestJpeg(h, w, 3, 2, 2, seed);
}

struct Record {
  ImageExample ex;
  std::string split;
};

class ImageFolderTest : public ::testing::Test {
 protected:
  ConvertOptions Options() {
    ConvertOptions o;
    o.dataset_dir = out_.path();
    o.image_folder.image_dir = src_.path();
    o.num_threads = 2;
    return o;
  }
  static void Convert(const ConvertOptions& o) {
    GetConverterRegistry().Get("image_folder")(o);
  }
  // Every record of every described split, keyed by its encoded bytes.
  std::map<std::string, Record> Records() {
    std::map<std::string, Record> out;
    const DatasetSpec spec = ResolveDatasetSpec("image_folder", out_.path());
    for (const auto& kv : spec.splits_to_sizes) {
      int64_t n = 0;
      for (const std::string& f : spec.SplitFiles(out_.path(), kv.first)) {
        TFRecordReader reader(f);
        std::string record;
        while (reader.Read(&record)) {
          out[DecodeImageExample(record, f).encoded] = {
              DecodeImageExample(record, f), kv.first};
          ++n;
        }
      }
      EXPECT_EQ(n, kv.second) << kv.first;
    }
    return out;
  }
  std::string ExpectedSplit(const std::string& name, double v = 10,
                            double t = 0) {
    const double p = ImageFolderSplitPercentage(name);
    return p < v ? "validation" : p < v + t ? "test" : "train";
  }

  TempDir src_, out_;
};

TEST(ImageFolderSplitTest, PercentageIsRetrainPys) {
  for (const SplitGolden& g : kSplitGoldens) {
    EXPECT_DOUBLE_EQ(ImageFolderSplitPercentage(g.name), g.percentage)
        << "'" << g.name << "'";
    EXPECT_EQ(ImageFolderSplitPercentage(g.name), g.percentage) << g.name;
  }
  // "_nohash_" groups files: the part after it does not count.
  EXPECT_EQ(ImageFolderSplitPercentage("0af2c4_nohash_0.png"),
            ImageFolderSplitPercentage("0af2c4_nohash_1.png"));
}

TEST_F(ImageFolderTest, ConvertsClassFoldersWithAStableHashSplit) {
  // Classes with spaces and non-ASCII letters; JPEG and PNG of any case;
  // hidden files skipped; a stray file at the top ignored.
  std::map<std::string, std::string> cls_of;  // bytes -> class
  std::map<std::string, std::string> name_of;
  const std::vector<std::string> classes = {"cr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e",
                                            "golden retriever", "tabby"};
  int k = 0;
  for (const std::string& c : classes) {
    for (int i = 0; i < 30; ++i, ++k) {
      const std::string name =
          StrCat("img_", k, i % 3 == 0 ? ".PNG" : i % 3 == 1 ? ".jpg" : ".JPEG");
      const std::string bytes = i % 3 == 0 ? Png(6 + i % 4, 7, 3, k) : Jpeg(9, 5 + i % 3, k);
      WriteFile(src_.Join(c + "/" + name), bytes);
      cls_of[bytes] = c;
      name_of[bytes] = name;
    }
  }
  WriteFile(src_.Join("tabby/.DS_Store"), "junk");
  WriteFile(src_.Join(".hidden/x.jpg"), Jpeg(8, 8, 999));
  WriteFile(src_.Join("README.txt"), "about these photos");
  Convert(Options());

  const auto labels = ReadLabelsFile(out_.Join("labels.txt"));
  ASSERT_EQ(labels.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(labels.at(i), classes[i]);
  const DatasetSpec spec = ResolveDatasetSpec("image_folder", out_.path());
  EXPECT_EQ(spec.num_classes, 3);
  EXPECT_EQ(spec.image_channels, 3);
  EXPECT_EQ(spec.image_height, 0);  // sizes vary
  const auto records = Records();
  ASSERT_EQ(records.size(), 90u);
  int validation = 0;
  for (const auto& kv : records) {
    const ImageExample& ex = kv.second.ex;
    const std::string& name = name_of.at(kv.first);  // bytes kept as they are
    EXPECT_EQ(labels.at(ex.label), cls_of.at(kv.first));
    EXPECT_EQ(ex.format, name.find(".PNG") != std::string::npos ? "png" : "jpeg");
    const Image image = DecodeImage(ex.encoded, 0, name);
    EXPECT_EQ(ex.height, image.height);
    EXPECT_EQ(ex.width, image.width);
    EXPECT_EQ(kv.second.split, ExpectedSplit(name)) << name;
    validation += kv.second.split == "validation";
  }
  EXPECT_GT(validation, 0);
  EXPECT_EQ(spec.SplitSize("validation"), validation);
  EXPECT_EQ(spec.SplitSize("train"), 90 - validation);

  // A second run with complete outputs does nothing.
  const auto before = fs::last_write_time(out_.Join(kDatasetDescriptionFilename));
  Convert(Options());
  EXPECT_EQ(fs::last_write_time(out_.Join(kDatasetDescriptionFilename)), before);

  // Files added later: every earlier file keeps its split.
  for (int i = 0; i < 20; ++i) {
    WriteFile(src_.Join(StrCat("tabby/new_", i, ".jpg")), Jpeg(8, 8, 500 + i));
  }
  fs::remove(out_.Join(kDatasetDescriptionFilename));
  Convert(Options());
  const auto grown = Records();
  EXPECT_EQ(grown.size(), 110u);
  for (const auto& kv : records) EXPECT_EQ(grown.at(kv.first).split, kv.second.split);
}

TEST_F(ImageFolderTest, SplitFoldersAndATestPercentage) {
  WriteFile(src_.Join("train/a/1.jpg"), Jpeg(8, 8, 1));
  WriteFile(src_.Join("train/b/2.jpg"), Jpeg(8, 8, 2));
  WriteFile(src_.Join("validation/a/3.jpg"), Jpeg(8, 8, 3));
  WriteFile(src_.Join("validation/b/4.png"), Png(8, 8, 3, 4));
  WriteFile(src_.Join("validation/b/5.png"), Png(8, 8, 3, 5));
  Convert(Options());
  DatasetSpec spec = ResolveDatasetSpec("image_folder", out_.path());
  EXPECT_EQ(spec.SplitSize("train"), 2);
  EXPECT_EQ(spec.SplitSize("validation"), 3);
  EXPECT_EQ(spec.image_height, 8);  // all 8x8
  EXPECT_EQ(spec.image_width, 8);
  // The split folders give the splits: percentages do not apply.
  TempDir other;
  ConvertOptions o = Options();
  o.dataset_dir = other.path();
  o.image_folder.validation_percentage = 20;
  EXPECT_NE(ErrorMessage([&] { Convert(o); }).find("do not apply"),
            std::string::npos);

  // A class layout with a test split: three splits by the hash.
  TempDir src2, out2;
  for (int i = 0; i < 60; ++i) {
    WriteFile(src2.Join(StrCat(i % 2 ? "x" : "y", "/g", i, ".png")), Png(4, 4, 1, i));
  }
  o = Options();
  o.dataset_dir = out2.path();
  o.image_folder.image_dir = src2.path();
  o.image_folder.validation_percentage = 20;
  o.image_folder.testing_percentage = 30;
  Convert(o);
  spec = ResolveDatasetSpec("image_folder", out2.path());
  EXPECT_EQ(spec.image_channels, 1);  // all gray
  std::map<std::string, int64_t> expected;
  for (int i = 0; i < 60; ++i) ++expected[ExpectedSplit(StrCat("g", i, ".png"), 20, 30)];
  EXPECT_EQ(spec.splits_to_sizes, expected);
  EXPECT_EQ(expected.size(), 3u);
}

// GIF written by Pillow (4x3, palette red, green, blue, (250,250,250));
// TensorFlow's decode_gif gives kGifPixels for it.
constexpr char kGifHex[] =
    "47494638376104000300810000ff000000ff000000fffafafa2c000000000400030000"
    "080f00010410304080c000030600101010003b";
const std::vector<uint8_t> kGifPalette = {255, 0, 0, 0, 255, 0, 0, 0, 255,
                                          250, 250, 250};
const std::vector<uint8_t> kGifIndices = {0, 1, 2, 3, 2, 0, 1, 1, 3, 3, 0, 2};

std::vector<uint8_t> Lookup(const std::vector<uint8_t>& palette,
                            const std::vector<uint8_t>& indices) {
  std::vector<uint8_t> out;
  for (uint8_t i : indices) {
    out.insert(out.end(), palette.begin() + 3 * i, palette.begin() + 3 * i + 3);
  }
  return out;
}

TEST_F(ImageFolderTest, BmpAndGifBecomePngsOfTheirColours) {
  std::string gif;
  for (size_t i = 0; kGifHex[i] && kGifHex[i + 1]; i += 2) {
    gif.push_back(static_cast<char>(
        std::stoi(std::string(kGifHex + i, 2), nullptr, 16)));
  }
  std::vector<uint8_t> rgb(5 * 3 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 17);
  const std::vector<uint8_t> palette = {9, 8, 7, 200, 100, 50, 0, 255, 0};
  const std::vector<uint8_t> indices = {2, 1, 0, 0, 1, 2};
  const std::vector<uint8_t> grays = {0, 0, 0, 128, 128, 128, 255, 255, 255};
  WriteFile(src_.Join("a/rgb.bmp"), testing_io::TestBmp(3, 5, 24, rgb));
  WriteFile(src_.Join("a/palette.BMP"),
            testing_io::TestBmp(3, 2, 8, indices, palette, 3));
  WriteFile(src_.Join("b/gray_palette.bmp"),
            testing_io::TestBmp(3, 2, 8, indices, grays, 3));
  WriteFile(src_.Join("b/pillow.gif"), gif);
  ConvertOptions o = Options();
  o.image_folder.validation_percentage = 0;
  Convert(o);

  std::map<std::string, std::vector<uint8_t>> expected = {
      {"rgb", rgb},
      {"palette", Lookup(palette, indices)},  // colours, not indices
      {"gray_palette", {255, 128, 0, 0, 128, 255}},  // one channel
      {"pillow", Lookup(kGifPalette, kGifIndices)},
  };
  const std::map<std::string, std::vector<int>> shapes = {
      {"rgb", {5, 3, 3}},
      {"palette", {2, 3, 3}},
      {"gray_palette", {2, 3, 1}},
      {"pillow", {3, 4, 3}}};
  int found = 0;
  for (const auto& kv : Records()) {
    const ImageExample& ex = kv.second.ex;
    EXPECT_EQ(ex.format, "png");
    const Image img = DecodeImage(ex.encoded, 0, "record");
    bool matched = false;
    for (const auto& want : expected) {
      const std::vector<int>& shape = shapes.at(want.first);
      if (img.pixels == want.second && img.height == shape[0] &&
          img.width == shape[1] && img.channels == shape[2]) {
        EXPECT_EQ(ex.height, shape[0]);
        EXPECT_EQ(ex.width, shape[1]);
        EXPECT_EQ(ex.label, want.first == "rgb" || want.first == "palette"
                                ? 0
                                : 1)
            << want.first;
        matched = true;
        ++found;
      }
    }
    EXPECT_TRUE(matched) << img.height << "x" << img.width << "x"
                         << img.channels;
  }
  EXPECT_EQ(found, 4);
  // A mix of gray and colour: three channels recorded.
  EXPECT_EQ(ResolveDatasetSpec("image_folder", out_.path()).image_channels, 3);
}

TEST_F(ImageFolderTest, BadInputIsNamedOrSkippedAndListed) {
  for (int i = 0; i < 12; ++i) WriteFile(src_.Join(StrCat("a/", i, ".jpg")), Jpeg(8, 8, i));
  WriteFile(src_.Join("b/good.png"), Png(5, 5, 3, 1));
  auto expect_error = [&](const std::string& what) {
    const std::string error = ErrorMessage([&] { Convert(Options()); });
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_NE(error.find("--skip_bad_images"), std::string::npos) << error;
    // Nothing that looks complete, no shard under a final name.
    EXPECT_FALSE(PathExists(out_.Join(kDatasetDescriptionFilename)));
    EXPECT_TRUE(Glob(out_.Join("image_folder_*")).empty());
  };
  WriteFile(src_.Join("b/empty.jpg"), "");
  expect_error("b/empty.jpg' is empty (0 bytes)");
  fs::remove(src_.Join("b/empty.jpg"));
  std::string truncated = Jpeg(16, 16, 77);
  truncated.resize(truncated.size() / 2);
  WriteFile(src_.Join("b/cut.JPG"), truncated);
  expect_error("b/cut.JPG'");
  fs::remove(src_.Join("b/cut.JPG"));
  WriteFile(src_.Join("b/notes.txt"), "text");
  expect_error("b/notes.txt' has an unknown image format");
  fs::remove(src_.Join("b/notes.txt"));
  WriteFile(src_.Join("b/fake.png"), "this is not a picture");
  expect_error("b/fake.png' is not a JPEG, PNG, BMP or GIF image");
  fs::remove(src_.Join("b/fake.png"));
  fs::create_directories(src_.Join("c_empty"));
  expect_error("class folder '" + src_.Join("c_empty") + "' holds no images");
  WriteFile(src_.Join("bad\tname/x.jpg"), Jpeg(8, 8, 3));
  WriteFile(src_.Join("b/empty.jpg"), "");

  // --skip_bad_images: skipped and listed; the rest converted.
  ConvertOptions o = Options();
  o.skip_bad_images = true;
  Convert(o);
  const auto labels = ReadLabelsFile(out_.Join("labels.txt"));
  ASSERT_EQ(labels.size(), 2u);  // a, b: the empty and the unnamable go
  EXPECT_EQ(Records().size(), 13u);
  EXPECT_TRUE(Glob(out_.Join(".image_folder-staging*")).empty());
}

// One class would train a constant loss: refused, naming the
// folder and the class, before anything is written.
TEST_F(ImageFolderTest, OneClassIsRefused) {
  for (int i = 0; i < 6; ++i) {
    WriteFile(src_.Join(StrCat("cats/", i, ".jpg")), Jpeg(8, 8, i));
  }
  const std::string error = ErrorMessage([&] { Convert(Options()); });
  EXPECT_NE(error.find("--image_dir '" + src_.path() +
                       "' holds one class folder with images, 'cats': a "
                       "classifier needs at least 2 classes"),
            std::string::npos)
      << error;
  EXPECT_FALSE(PathExists(out_.Join(kDatasetDescriptionFilename)));
  EXPECT_TRUE(Glob(out_.Join("image_folder_*")).empty());
  // Also when --skip_bad_images skips the other class's folder (empty: an
  // error of its own without the flag).
  fs::create_directories(src_.Join("dogs"));
  ConvertOptions o = Options();
  EXPECT_NE(ErrorMessage([&] { Convert(o); }).find("holds no images"),
            std::string::npos);
  o.skip_bad_images = true;
  EXPECT_NE(ErrorMessage([&] { Convert(o); }).find("'cats'"),
            std::string::npos);
  // And in the split-folder layout.
  TempDir split_src;
  WriteFile(split_src.Join("train/cats/1.jpg"), Jpeg(8, 8, 1));
  WriteFile(split_src.Join("validation/cats/2.jpg"), Jpeg(8, 8, 2));
  o = Options();
  o.image_folder.image_dir = split_src.path();
  EXPECT_NE(ErrorMessage([&] { Convert(o); }).find("one class folder"),
            std::string::npos);
}

TEST_F(ImageFolderTest, DescriptionIsReadAndCheckedByName) {
  const std::string dir = out_.path();
  EXPECT_NE(ErrorMessage([&] { ResolveDatasetSpec("image_folder", dir); })
                .find("dataset_description.txt' does not exist"),
            std::string::npos);
  EXPECT_EQ(ResolveDatasetSpec("flowers", dir).name, "flowers");
  WriteFile(out_.Join(kDatasetDescriptionFilename),
            "# mine\nname: pets\nfile_pattern: pets-%s-*.rec\nnum_classes: 37\n"
            "split: train 3680\nsplit: test 3669\n");
  const DatasetSpec spec = ResolveDatasetSpec("pets", dir);
  EXPECT_EQ(spec.num_classes, 37);
  EXPECT_EQ(spec.SplitSize("test"), 3669);
  EXPECT_EQ(spec.image_channels, 3);
  EXPECT_EQ(ResolveDatasetSpec("image_folder", dir).name, "pets");
  EXPECT_NE(ErrorMessage([&] { ResolveDatasetSpec("imagenet", dir); })
                .find("holds dataset 'pets' (dataset_description.txt), not "
                      "'imagenet': use --dataset_name=pets"),
            std::string::npos);
  WriteFile(out_.Join(kDatasetDescriptionFilename),
            "name: pets\nfile_pattern: p%s\nnum_classes: 3\nsplits: train 3\n");
  EXPECT_NE(ErrorMessage([&] { ResolveDatasetSpec("pets", dir); })
                .find("dataset_description.txt:4: unknown key 'splits'"),
            std::string::npos);
  WriteFile(out_.Join(kDatasetDescriptionFilename),
            "name: pets\nfile_pattern: p%s\nnum_classes: three\nsplit: train 3\n");
  EXPECT_NE(ErrorMessage([&] { ResolveDatasetSpec("pets", dir); })
                .find(":3: expected an integer >= 1, got 'three'"),
            std::string::npos);
  // Round trip.
  DatasetSpec in;
  in.name = "image_folder";
  in.file_pattern = "image_folder_%s_*.tfrecord";
  in.num_classes = 4;
  in.image_channels = 1;
  in.image_height = 28;
  in.image_width = 28;
  in.splits_to_sizes = {{"train", 10}, {"validation", 2}};
  WriteDatasetDescription(in, dir);
  const DatasetSpec back = ReadDatasetDescription(dir);
  EXPECT_EQ(back.name, in.name);
  EXPECT_EQ(back.file_pattern, in.file_pattern);
  EXPECT_EQ(back.num_classes, 4);
  EXPECT_EQ(back.image_channels, 1);
  EXPECT_EQ(back.image_height, 28);
  EXPECT_EQ(back.image_width, 28);
  EXPECT_EQ(back.splits_to_sizes, in.splits_to_sizes);
}

}  // namespace
}  // namespace slimtorch
