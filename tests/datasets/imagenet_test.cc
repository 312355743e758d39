#include "slimtorch/datasets/imagenet.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

// jpeglib.h needs <cstdio> first.
#include <jpeglib.h>

#include "export/python_engines.h"
#include "io/archive_test_util.h"
#include "io/io_test_util.h"
#include "io/test_http_server.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/proto/example.pb.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace {

#include "golden/imagenet_goldens.inc"

using testing_io::ScratchDir;
using testing_util::TarEntry;
using testing_util::TestHttpServer;

// ------------------------------------------------------------ test inputs

// A JPEG written by libjpeg itself (independent of the code under test):
// `components` 1 (gray), 3 (RGB) or 4 (CMYK, with libjpeg's Adobe marker).
std::string LibJpeg(const std::vector<uint8_t>& pixels, int h, int w,
                    int components, int quality = 90) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = components;
  c.in_color_space = components == 1   ? JCS_GRAYSCALE
                     : components == 3 ? JCS_RGB
                                       : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row =
        const_cast<JSAMPROW>(&pixels[c.next_scanline * w * components]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::string jpeg(reinterpret_cast<char*>(out), size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return jpeg;
}

// Smooth deterministic pixels, different per `seed`.
std::vector<uint8_t> Pixels(int h, int w, int channels, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(h) * w * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        p[(y * w + x) * channels + c] = static_cast<uint8_t>(
            (x * (3 + c) + y * (5 + seed) + 40 * c + 17 * seed) % 256);
      }
    }
  }
  return p;
}

// Gentle gradients (no wrap-around edges), for the images that are decoded
// and re-encoded, so that the re-encoding error stays small.
std::vector<uint8_t> Smooth(int h, int w, int channels) {
  std::vector<uint8_t> p(static_cast<size_t>(h) * w * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        p[(y * w + x) * channels + c] =
            static_cast<uint8_t>(20 + 3 * x + 2 * y + 25 * c);
      }
    }
  }
  return p;
}

std::string RgbJpeg(int h, int w, int seed) {
  return LibJpeg(Pixels(h, w, 3, seed), h, w, 3);
}

// An archive in memory: `gzip` = tar.gz, else a plain (pax) tar.
std::string TarBytes(const std::vector<TarEntry>& entries, bool gzip = false) {
  std::string out;
  archive* a = archive_write_new();
  if (gzip) archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_in_last_block(a, 1);
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* data, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(data)->append(static_cast<const char*>(buf),
                                                n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const TarEntry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.path.c_str());
    archive_entry_set_perm(entry, 0644);
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_size(entry, static_cast<la_int64_t>(e.data.size()));
    EXPECT_EQ(archive_write_header(a, entry), ARCHIVE_OK);
    if (!e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

const std::vector<std::string> kSynsets = {"n01440764", "n01443537",
                                           "n01484850"};

// An annotation XML as in ILSVRC2012_bbox_train_v2 (first <name> decides).
std::string Xml(const std::string& name, int width, int height,
                const std::vector<std::vector<int>>& boxes) {
  std::string x =
      "<annotation>\n\t<folder>x</folder>\n\t<filename>%s</filename>"
      "\n\t<source>\n\t\t<database>ImageNet database</database>\n\t"
      "</source>\n\t<size>\n\t\t<width>" +
      std::to_string(width) + "</width>\n\t\t<height>" +
      std::to_string(height) + "</height>\n\t\t<depth>3</depth>\n\t</size>\n";
  for (const auto& b : boxes) {
    x += "\t<object>\n\t\t<name>" + name +
         "</name>\n\t\t<bndbox>\n\t\t\t<xmin>" + std::to_string(b[0]) +
         "</xmin>\n\t\t\t<ymin>" + std::to_string(b[1]) +
         "</ymin>\n\t\t\t<xmax>" + std::to_string(b[2]) +
         "</xmax>\n\t\t\t<ymax>" + std::to_string(b[3]) +
         "</ymax>\n\t\t</bndbox>\n\t</object>\n";
  }
  return x + "</annotation>\n";
}

// The ILSVRC-2012 files in miniature: member name → bytes per synset
// (train), flat validation images, and the text files.
struct MiniImageNet {
  std::map<std::string, std::map<std::string, std::string>> train;
  std::map<std::string, std::string> val;  // ILSVRC2012_val_*.JPEG → bytes
  std::vector<std::string> val_labels;
  std::map<std::string, std::string> xmls;  // "<synset>/<name>.xml" → XML
  std::string cmyk_name = "n01440764_4.JPEG";
  std::string png_name = "n01443537_10.JPEG";
  std::string cmyk, png;  // their bytes

  MiniImageNet() {
    cmyk = LibJpeg(Smooth(20, 28, 4), 20, 28, 4);
    png = EncodePng(Smooth(18, 22, 3).data(), 18, 22, 3);
    train["n01440764"] = {{"n01440764_1.JPEG", RgbJpeg(30, 40, 1)},
                          {"n01440764_2.JPEG", RgbJpeg(32, 24, 2)},
                          {"n01440764_3.JPEG", RgbJpeg(16, 16, 3)},
                          {cmyk_name, cmyk}};
    train["n01443537"] = {{"n01443537_1.JPEG", RgbJpeg(24, 36, 4)},
                          {"n01443537_2.JPEG", RgbJpeg(20, 20, 5)},
                          {png_name, png},
                          {"readme.txt", "not an image"},
                          {".n01443537_9.JPEG", "hidden, not globbed"}};
    train["n01484850"] = {
        {"n01484850_1.JPEG", RgbJpeg(26, 30, 6)},
        {"n01484850_2.JPEG", LibJpeg(Pixels(22, 18, 1, 7), 22, 18, 1)},
        {"n01484850_3.JPEG", RgbJpeg(12, 44, 8)},
        {"n01484850_4.JPEG", RgbJpeg(28, 14, 9)}};
    train["n09999999"] = {{"n09999999_1.JPEG", RgbJpeg(10, 10, 10)}};
    val_labels = {"n01443537", "n01440764", "n09999999", "n01484850",
                  "n01440764", "n01484850", "n01443537", "n01443537"};
    for (int i = 0; i < 9; ++i) {  // image 9 has no label
      val[ImageNetValidationFilename(i)] = RgbJpeg(14 + i, 20 + i, 20 + i);
    }
    xmls["n01440764/n01440764_1.xml"] =
        Xml("n01440764", 400, 300, {{12, 30, 388, 310}, {300, 200, 100, 60}});
    xmls["n01440764/n01440764_2.xml"] =
        Xml("n01443537", 100, 100, {{1, 1, 50, 50}});
    xmls["n01443537/n01443537_1.xml"] =
        Xml("Scottish_deerhound", 300, 300, {{0, 0, 100, 200}, {5, 5, 5, 9}});
    xmls["n09999999/n09999999_1.xml"] =
        Xml("n09999999", 10, 10, {{0, 0, 5, 5}});
  }

  // ILSVRC2012_img_train.tar: a tar of <synset>.tar.
  std::string TrainTar() const {
    std::vector<TarEntry> outer;
    for (const auto& [synset, files] : train) {
      std::vector<TarEntry> inner;
      for (const auto& [name, data] : files) inner.push_back({name, data});
      outer.push_back({synset + ".tar", TarBytes(inner)});
    }
    return TarBytes(outer);
  }
  std::string ValTar() const {
    std::vector<TarEntry> entries;
    for (const auto& [name, data] : val) entries.push_back({name, data});
    return TarBytes(entries);
  }
  std::string BoxTarGz() const {
    std::vector<TarEntry> entries;
    for (const auto& [name, data] : xmls) entries.push_back({name, data});
    return TarBytes(entries, /*gzip=*/true);
  }
  std::string SynsetsFile() const {
    std::string s;
    for (const std::string& x : kSynsets) s += x + "\n";
    return s;
  }
  std::string MetadataFile() const {
    return "n01440764\ttench, Tinca tinca\nn01443537\tgoldfish, Carassius "
           "auratus\nn01484850\tgreat white shark\nn09999999\tnot in the "
           "challenge\n";
  }
  std::string ValLabelsFile() const {
    std::string s;
    for (const std::string& x : val_labels) s += x + "\n";
    return s;
  }

  // Writes the archives and text files into `dir`; returns options that
  // convert them into `out`.
  ConvertOptions WriteArchives(const std::string& dir,
                               const std::string& out) const {
    WriteFile(dir + "/ILSVRC2012_img_train.tar", TrainTar());
    WriteFile(dir + "/ILSVRC2012_img_val.tar", ValTar());
    WriteFile(dir + "/ILSVRC2012_bbox_train_v2.tar.gz", BoxTarGz());
    WriteFile(dir + "/imagenet_lsvrc_2015_synsets.txt", SynsetsFile());
    WriteFile(dir + "/imagenet_metadata.txt", MetadataFile());
    WriteFile(dir + "/imagenet_2012_validation_synset_labels.txt",
              ValLabelsFile());
    ConvertOptions o;
    o.dataset_dir = out;
    o.source_url = "file://" + dir + "/";  // the three text files
    o.num_threads = 2;
    o.imagenet.train_directory = dir + "/ILSVRC2012_img_train.tar";
    o.imagenet.validation_directory = dir + "/ILSVRC2012_img_val.tar";
    o.imagenet.bounding_box_file = dir + "/ILSVRC2012_bbox_train_v2.tar.gz";
    o.imagenet.train_shards = 2;
    o.imagenet.validation_shards = 2;
    return o;
  }

  // The same inputs extracted, as TF's scripts expect them (flat val).
  ConvertOptions WriteTrees(const std::string& dir,
                            const std::string& out) const {
    for (const auto& [synset, files] : train) {
      for (const auto& [name, data] : files) {
        WriteFile(dir + "/train/" + synset + "/" + name, data);
      }
    }
    for (const auto& [name, data] : val) WriteFile(dir + "/val/" + name, data);
    for (const auto& [name, data] : xmls)
      WriteFile(dir + "/bbox/" + name, data);
    WriteFile(dir + "/synsets.txt", SynsetsFile());
    WriteFile(dir + "/metadata.txt", MetadataFile());
    WriteFile(dir + "/val_labels.txt", ValLabelsFile());
    ConvertOptions o;
    o.dataset_dir = out;
    o.num_threads = 2;
    o.imagenet.train_directory = dir + "/train";
    o.imagenet.validation_directory = dir + "/val";
    o.imagenet.bounding_box_file = dir + "/bbox";
    o.imagenet.labels_file = dir + "/synsets.txt";
    o.imagenet.imagenet_metadata_file = dir + "/metadata.txt";
    o.imagenet.validation_labels_file = dir + "/val_labels.txt";
    o.imagenet.train_shards = 2;
    o.imagenet.validation_shards = 2;
    return o;
  }
};

void Convert(const ConvertOptions& o) {
  GetConverterRegistry().Get("imagenet")(o);
}

std::vector<std::string> ReadRecords(const std::string& path) {
  std::vector<std::string> out;
  TFRecordReader reader(path);
  std::string r;
  while (reader.Read(&r)) out.push_back(r);
  return out;
}

// Every record of a split, shard by shard.
std::vector<std::vector<ImageNetExample>> ReadSplit(const std::string& dir,
                                                    const std::string& split,
                                                    int shards) {
  std::vector<std::vector<ImageNetExample>> out;
  for (int s = 0; s < shards; ++s) {
    const std::string path = JoinPath(dir, ImageNetShardName(split, s, shards));
    out.emplace_back();
    for (const std::string& r : ReadRecords(path)) {
      out.back().push_back(DecodeImageNetExample(r, path));
    }
  }
  return out;
}

const std::vector<int64_t>& GoldenShuffle(int64_t n) {
  for (const ShuffleGolden& g : ImageNetShuffleGoldens()) {
    if (g.n == n) return g.head;
  }
  ADD_FAILURE() << "no shuffle golden for n=" << n;
  static const std::vector<int64_t> none;
  return none;
}

const ShardGolden& FindShardGolden(int64_t n, int threads, int shards) {
  for (const ShardGolden& g : ImageNetShardGoldens()) {
    if (g.n == n && g.threads == threads && g.shards == shards) return g;
  }
  ADD_FAILURE() << "no shard golden for " << n;
  static const ShardGolden none{};
  return none;
}

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ------------------------------------------------------------ unit tests

TEST(ImageNetExampleTest, EncodesEveryBuildImageNetDataKey) {
  ImageNetExample ex;
  ex.encoded = "\xff\xd8\xff jpeg";
  ex.label = 7;
  ex.synset = "n01440764";
  ex.text = "tench, Tinca tinca";
  ex.filename = "n01440764_1.JPEG";
  ex.height = 300;
  ex.width = 400;
  ex.boxes = {{0.1f, 0.2f, 0.9f, 0.8f}, {0.0f, 0.5f, 1.0f, 0.75f}};
  proto::Example parsed;
  ASSERT_TRUE(parsed.ParseFromString(EncodeImageNetExample(ex)));
  std::set<std::string> keys;
  for (const auto& kv : parsed.features().feature()) keys.insert(kv.first);
  EXPECT_EQ(keys,
            (std::set<std::string>{
                "image/height", "image/width", "image/colorspace",
                "image/channels", "image/class/label", "image/class/synset",
                "image/class/text", "image/object/bbox/xmin",
                "image/object/bbox/xmax", "image/object/bbox/ymin",
                "image/object/bbox/ymax", "image/object/bbox/label",
                "image/format", "image/filename", "image/encoded"}));
  const auto& f = parsed.features().feature();
  EXPECT_EQ(f.at("image/format").bytes_list().value(0), "JPEG");
  EXPECT_EQ(f.at("image/colorspace").bytes_list().value(0), "RGB");
  EXPECT_EQ(f.at("image/channels").int64_list().value(0), 3);
  EXPECT_EQ(f.at("image/object/bbox/xmin").float_list().value(1), 0.5f);
  ASSERT_EQ(f.at("image/object/bbox/label").int64_list().value_size(), 2);
  EXPECT_EQ(f.at("image/object/bbox/label").int64_list().value(1), 7);

  const ImageNetExample back =
      DecodeImageNetExample(EncodeImageNetExample(ex), "rt");
  EXPECT_EQ(back.encoded, ex.encoded);
  EXPECT_EQ(back.text, ex.text);
  EXPECT_EQ(back.filename, ex.filename);
  EXPECT_EQ(back.label, 7);
  EXPECT_EQ(back.height, 300);
  EXPECT_EQ(back.boxes, ex.boxes);
  EXPECT_EQ(DecodeBoundingBoxes(EncodeImageNetExample(ex), "rt"), ex.boxes);
}

TEST(ImageNetExampleTest, NoBoxesGiveEmptyListsAndBadListsThrow) {
  ImageNetExample ex;
  ex.encoded = "x";
  ex.label = 1;
  const std::string rec = EncodeImageNetExample(ex);
  proto::Example parsed;
  ASSERT_TRUE(parsed.ParseFromString(rec));
  EXPECT_TRUE(parsed.features()
                  .feature()
                  .at("image/object/bbox/ymin")
                  .has_float_list());
  EXPECT_TRUE(DecodeBoundingBoxes(rec, "r").empty());
  // TF-Slim's five keys only: no boxes.
  ImageExample plain{"x", "jpeg", 3, 2, 2};
  EXPECT_TRUE(DecodeBoundingBoxes(EncodeImageExample(plain), "r").empty());
  ExampleBuilder b;
  b.AddFloatList("image/object/bbox/ymin", {0.1f, 0.2f})
      .AddFloatList("image/object/bbox/xmin", {0.1f});
  EXPECT_NE(ErrorOf([&] {
              DecodeBoundingBoxes(b.Serialize(), "rec 3");
            }).find("rec 3: bounding box lists differ"),
            std::string::npos);
}

TEST(ImageNetMetadataTest, ParsesTheTextFiles) {
  EXPECT_EQ(ParseImageNetSynsets("n1\n n2 \r\nn3", "s"),
            (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_NE(ErrorOf([] {
              ParseImageNetSynsets("n1\n\nn2\n", "syn.txt");
            }).find("'syn.txt' line 2 is empty"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf([] { ParseImageNetSynsets("n1\nn1\n", "s"); }).find("repeats"),
      std::string::npos);
  const auto meta = ParseImageNetMetadata("n1\tred fox, Vulpes\nn2\tb\n", "m");
  EXPECT_EQ(meta.at("n1"), "red fox, Vulpes");
  EXPECT_NE(ErrorOf([] {
              ParseImageNetMetadata("n1 no tab\n", "meta.txt");
            }).find("'meta.txt' line 1"),
            std::string::npos);
  EXPECT_EQ(ImageNetValidationFilename(0), "ILSVRC2012_val_00000001.JPEG");
  EXPECT_EQ(ImageNetValidationFilename(49999), "ILSVRC2012_val_00050000.JPEG");
  EXPECT_EQ(ParseImageNetValidationLabels("n2\nn1\n", "v"),
            (std::vector<std::string>{"n2", "n1"}));
  const auto names = ImageNetLabelNames({"n2", "n1"}, meta);
  EXPECT_EQ(names, (std::map<int64_t, std::string>{
                       {0, "background"}, {1, "b"}, {2, "red fox, Vulpes"}}));
  EXPECT_NE(ErrorOf([&] { ImageNetLabelNames({"n3"}, meta); }).find("'n3'"),
            std::string::npos);
}

TEST(ImageNetBoxesTest, XmlBoxesAsProcessBoundingBoxes) {
  const std::set<std::string> synsets(kSynsets.begin(), kSynsets.end());
  BoundingBoxStats stats;
  // Hand-worked: 400x300 image; box 1 = (12,30)-(388,310): x 0.03..0.97,
  // y 0.1..1.0333 → clamped to 1; box 2 reversed (300,200)-(100,60):
  // x 0.25..0.75, y 0.2..0.6667 → "%.4f" 0.6667.
  auto boxes = ParseBoundingBoxXml(
      Xml("n01440764", 400, 300, {{12, 30, 388, 310}, {300, 200, 100, 60}}),
      "n01440764", synsets, "a.xml", &stats);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0], (BoundingBox{0.1f, 0.03f, 1.0f, 0.97f}));
  EXPECT_EQ(boxes[1], (BoundingBox{0.2f, 0.25f, 0.6667f, 0.75f}));
  // Another challenge synset's name: every box dropped.
  EXPECT_TRUE(ParseBoundingBoxXml(Xml("n01443537", 10, 10, {{1, 1, 5, 5}}),
                                  "n01440764", synsets, "b.xml", &stats)
                  .empty());
  // A non-synset name is kept; an empty box is dropped.
  boxes = ParseBoundingBoxXml(
      Xml("Scottish_deerhound", 300, 300, {{0, 0, 100, 200}, {5, 5, 5, 9}}),
      "n01443537", synsets, "c.xml", &stats);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0], (BoundingBox{0.0f, 0.0f, 0.6667f, 0.3333f}));
  // A folder outside the challenge: file skipped without parsing.
  EXPECT_TRUE(ParseBoundingBoxXml("not xml", "n0999", synsets, "d.xml", &stats)
                  .empty());
  EXPECT_EQ(stats.xml_files, 4);
  EXPECT_EQ(stats.saved_files, 2);
  EXPECT_EQ(stats.skipped_files, 2);
  EXPECT_EQ(stats.saved_boxes, 3);
  EXPECT_EQ(stats.skipped_boxes, 2);
  EXPECT_NE(ErrorOf([&] {
              ParseBoundingBoxXml("<a><xmin>1</a>", "n01440764", synsets,
                                  "bad.xml", &stats);
            }).find("bad.xml: malformed XML"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              ParseBoundingBoxXml("<a><xmin>1.5</xmin></a>", "n01440764",
                                  synsets, "f.xml", &stats);
            }).find("expected an integer"),
            std::string::npos);
}

TEST(ImageNetBoxesTest, XmlWithDeclarationCommentsAttributesAndEntities) {
  const std::set<std::string> synsets(kSynsets.begin(), kSynsets.end());
  BoundingBoxStats stats;
  // width "4&#48;" is 40; <pose/> is empty; '>' inside an attribute value.
  const std::string xml =
      "<?xml version=\"1.0\"?>\n<!-- made by hand -->\n"
      "<annotation verified=\"a>b\"><size><width>4&#48;</width>"
      "<height> 20 </height></size><object><name>n01440764</name><pose/>"
      "<bndbox><xmin>4</xmin><ymin>5</ymin><xmax>20</xmax><ymax>15</ymax>"
      "</bndbox></object></annotation>\n";
  const auto boxes =
      ParseBoundingBoxXml(xml, "n01440764", synsets, "e.xml", &stats);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0], (BoundingBox{0.25f, 0.1f, 0.75f, 0.5f}));
  EXPECT_NE(ErrorOf([&] {
              ParseBoundingBoxXml("<a></a><b></b>", "n01440764", synsets,
                                  "two.xml", &stats);
            }).find("more than one root"),
            std::string::npos);
}

TEST(ImageNetBoxesTest, SortsAsTheCsvAndParsesIt) {
  ImageNetBoxes boxes;
  boxes["a.JPEG"] = {{0.5f, 0.2f, 0.9f, 0.8f},
                     {0.1f, 0.2f, 0.6f, 0.7f},
                     {0.0f, 0.1f, 1.0f, 0.9f}};
  SortImageNetBoxes(&boxes);  // by "xmin,ymin,xmax,ymax" text
  EXPECT_EQ(boxes["a.JPEG"][0].xmin, 0.1f);
  EXPECT_EQ(boxes["a.JPEG"][1].ymin, 0.1f);
  EXPECT_EQ(boxes["a.JPEG"][2].ymin, 0.5f);
  const ImageNetBoxes csv = ParseImageNetBoxesCsv(
      "n1_2.JPEG,0.0060,0.2620,0.7545,0.9940\nn1_2.JPEG,0.1,0.2,0.3,0.4\n",
      "b.csv");
  ASSERT_EQ(csv.at("n1_2.JPEG").size(), 2u);
  EXPECT_EQ(csv.at("n1_2.JPEG")[0],
            (BoundingBox{0.262f, 0.006f, 0.994f, 0.7545f}));
  EXPECT_NE(ErrorOf([] {
              ParseImageNetBoxesCsv("x,1,2\n", "b.csv");
            }).find("'b.csv' line 1"),
            std::string::npos);
}

TEST(ImageNetOrderTest, ShuffleIsPython2RandomShuffle) {
  for (const ShuffleGolden& g : ImageNetShuffleGoldens()) {
    std::vector<int64_t> got = Python2ShuffledRange(g.n);
    ASSERT_EQ(got.size(), static_cast<size_t>(g.n));
    got.resize(g.head.size());
    EXPECT_EQ(got, g.head) << "n=" << g.n;
  }
}

TEST(ImageNetOrderTest, ShardRangesAreNumpyLinspace) {
  for (const ShardGolden& g : ImageNetShardGoldens()) {
    EXPECT_EQ(ImageNetShardRanges(g.n, g.threads, g.shards), g.ranges)
        << g.n << " " << g.threads << " " << g.shards;
  }
  EXPECT_NE(ErrorOf([] { ImageNetShardRanges(10, 3, 4); }).find("multiple"),
            std::string::npos);
  EXPECT_EQ(ImageNetShardName("train", 2, 1024), "train-00002-of-01024");
}

TEST(ImageNetSpecTest, MatchesTfSlim) {
  const DatasetSpec spec = GetDatasetSpec("imagenet");
  EXPECT_EQ(spec.SplitSize("train"), 1281167);
  EXPECT_EQ(spec.SplitSize("validation"), 50000);
  EXPECT_EQ(spec.num_classes, 1001);
  EXPECT_EQ(spec.file_pattern, "%s-*");
  EXPECT_EQ(spec.default_format, "jpeg");
}

// ------------------------------------------------------------ converter

class ImageNetConvertTest : public ::testing::Test {
 protected:
  MiniImageNet net_;
  ScratchDir tmp_;
};

// The expected records of a split: synsets in file order, basenames sorted,
// shuffled by Python 2's shuffle, cut by numpy's linspace.
std::vector<std::vector<std::string>> ExpectedShards(
    const std::vector<std::string>& ordered, int threads, int shards) {
  const auto& perm = GoldenShuffle(static_cast<int64_t>(ordered.size()));
  const ShardGolden& cuts =
      FindShardGolden(static_cast<int64_t>(ordered.size()), threads, shards);
  std::vector<std::vector<std::string>> out;
  for (const auto& [b, e] : cuts.ranges) {
    out.emplace_back();
    for (int64_t i = b; i < e; ++i) out.back().push_back(ordered[perm[i]]);
  }
  return out;
}

TEST_F(ImageNetConvertTest, WritesBuildImageNetDataRecordsFromTheArchives) {
  const std::string out = tmp_.File("out");
  const ConvertOptions o = net_.WriteArchives(tmp_.File("src"), out);
  Convert(o);

  // Train: 4 + 3 + 4 images of the three synsets (not n09999999's, not the
  // .txt or the hidden file), in the golden order.
  std::vector<std::string> train_order;
  for (const std::string& s : kSynsets) {
    for (const auto& [name, data] : net_.train.at(s)) {
      if (name[0] != '.' && name.size() > 5 &&
          name.compare(name.size() - 5, 5, ".JPEG") == 0) {
        train_order.push_back(name);
      }
    }
  }
  ASSERT_EQ(train_order.size(), 11u);
  const auto train = ReadSplit(out, "train", 2);
  const auto expected = ExpectedShards(train_order, 2, 2);
  ASSERT_EQ(train.size(), expected.size());
  const std::map<std::string, std::string> text = {
      {"n01440764", "tench, Tinca tinca"},
      {"n01443537", "goldfish, Carassius auratus"},
      {"n01484850", "great white shark"}};
  for (size_t s = 0; s < train.size(); ++s) {
    ASSERT_EQ(train[s].size(), expected[s].size()) << "shard " << s;
    for (size_t i = 0; i < train[s].size(); ++i) {
      const ImageNetExample& ex = train[s][i];
      EXPECT_EQ(ex.filename, expected[s][i]);
      const std::string synset = ex.filename.substr(0, 9);
      EXPECT_EQ(ex.synset, synset);
      EXPECT_EQ(ex.label,
                1 + std::find(kSynsets.begin(), kSynsets.end(), synset) -
                    kSynsets.begin());
      EXPECT_EQ(ex.text, text.at(synset));
      EXPECT_EQ(ex.format, "JPEG");
      EXPECT_EQ(ex.colorspace, "RGB");
      EXPECT_EQ(ex.channels, 3);
      const std::string& source = net_.train.at(synset).at(ex.filename);
      const Image img = DecodeImage(ex.encoded, 3, ex.filename);
      EXPECT_EQ(ex.height, img.height);
      EXPECT_EQ(ex.width, img.width);
      if (ex.filename == net_.cmyk_name || ex.filename == net_.png_name) {
        // Re-encoded as an RGB JPEG of the same pixels (quality 100).
        EXPECT_NE(ex.encoded, source);
        ASSERT_EQ(static_cast<uint8_t>(ex.encoded[0]), 0xFF);
        const Image want = DecodeImage(source, 3, "source");
        ASSERT_EQ(want.pixels.size(), img.pixels.size());
        double err = 0;
        for (size_t k = 0; k < img.pixels.size(); ++k) {
          err += std::abs(int(img.pixels[k]) - int(want.pixels[k]));
        }
        EXPECT_LT(err / img.pixels.size(), 3.0) << ex.filename;
      } else {
        EXPECT_EQ(ex.encoded, source) << ex.filename;  // byte for byte
      }
      // Boxes: only the two XML files with kept boxes.
      if (ex.filename == "n01440764_1.JPEG") {
        EXPECT_EQ(ex.boxes,
                  (std::vector<BoundingBox>{{0.1f, 0.03f, 1.0f, 0.97f},
                                            {0.2f, 0.25f, 0.6667f, 0.75f}}));
      } else if (ex.filename == "n01443537_1.JPEG") {
        EXPECT_EQ(ex.boxes.size(), 1u);
      } else {
        EXPECT_TRUE(ex.boxes.empty()) << ex.filename;
      }
    }
  }

  // Validation: the 7 labelled images of challenge synsets.
  std::vector<std::string> val_order;
  for (const std::string& s : kSynsets) {
    for (size_t i = 0; i < net_.val_labels.size(); ++i) {
      if (net_.val_labels[i] == s) {
        val_order.push_back(
            ImageNetValidationFilename(static_cast<int64_t>(i)));
      }
    }
  }
  const auto val = ReadSplit(out, "validation", 2);
  const auto val_expected = ExpectedShards(val_order, 2, 2);
  for (size_t s = 0; s < val.size(); ++s) {
    ASSERT_EQ(val[s].size(), val_expected[s].size());
    for (size_t i = 0; i < val[s].size(); ++i) {
      EXPECT_EQ(val[s][i].filename, val_expected[s][i]);
      EXPECT_EQ(val[s][i].encoded, net_.val.at(val[s][i].filename));
      const int64_t idx = std::stoll(val[s][i].filename.substr(15, 8)) - 1;
      EXPECT_EQ(val[s][i].synset, net_.val_labels[idx]);
    }
  }

  const auto labels = ReadLabelsFile(JoinPath(out, kLabelsFilename));
  EXPECT_EQ(labels,
            (std::map<int64_t, std::string>{{0, "background"},
                                            {1, "tench, Tinca tinca"},
                                            {2, "goldfish, Carassius auratus"},
                                            {3, "great white shark"}}));
}

TEST_F(ImageNetConvertTest, ExtractedTreesGiveIdenticalShardsAndRerunIsNoOp) {
  const std::string out_a = tmp_.File("a"), out_b = tmp_.File("b");
  Convert(net_.WriteArchives(tmp_.File("src"), out_a));
  ConvertOptions trees = net_.WriteTrees(tmp_.File("tree"), out_b);
  Convert(trees);
  for (const auto& [split, n] :
       {std::pair<const char*, int>{"train", 2}, {"validation", 2}}) {
    for (int s = 0; s < n; ++s) {
      const std::string name = ImageNetShardName(split, s, n);
      EXPECT_EQ(ReadFileToString(JoinPath(out_a, name)),
                ReadFileToString(JoinPath(out_b, name)))
          << name;
    }
  }
  // The boxes as process_bounding_boxes.py | sort writes them (hand-worked
  // from the XML files) give the same records as the XML archive.
  const std::string out_c = tmp_.File("c");
  WriteFile(tmp_.File("boxes.csv"),
            "n01440764_1.JPEG,0.0300,0.1000,0.9700,1.0000\n"
            "n01440764_1.JPEG,0.2500,0.2000,0.7500,0.6667\n"
            "n01443537_1.JPEG,0.0000,0.0000,0.3333,0.6667\n");
  ConvertOptions csv = trees;
  csv.dataset_dir = out_c;
  csv.imagenet.bounding_box_file = tmp_.File("boxes.csv");
  Convert(csv);
  for (int s = 0; s < 2; ++s) {
    const std::string name = ImageNetShardName("train", s, 2);
    EXPECT_EQ(ReadFileToString(JoinPath(out_a, name)),
              ReadFileToString(JoinPath(out_c, name)))
        << name;
  }
  // A second run with complete outputs reads nothing (the inputs are gone).
  testing::RemoveTree(tmp_.File("tree"));
  const auto before = std::filesystem::last_write_time(
      JoinPath(out_b, ImageNetShardName("train", 0, 2)));
  EXPECT_NO_THROW(Convert(trees));
  EXPECT_EQ(before, std::filesystem::last_write_time(
                        JoinPath(out_b, ImageNetShardName("train", 0, 2))));
}

TEST_F(ImageNetConvertTest, BadImagesNameArchiveAndMemberOrAreSkipped) {
  net_.train["n01484850"]["n01484850_9.JPEG"] =
      RgbJpeg(30, 30, 3).substr(0, 200);  // truncated
  const std::string src = tmp_.File("src"), out = tmp_.File("out");
  ConvertOptions o = net_.WriteArchives(src, out);
  o.num_threads = 1;
  o.imagenet.train_shards = 1;
  o.imagenet.validation_shards = 1;
  const std::string err = ErrorOf([&] { Convert(o); });
  EXPECT_NE(err.find("archive '" + src +
                     "/ILSVRC2012_img_train.tar' member "
                     "'n01484850.tar/n01484850_9.JPEG'"),
            std::string::npos)
      << err;
  EXPECT_FALSE(PathExists(JoinPath(out, "train-00000-of-00001")));
  EXPECT_FALSE(PathExists(JoinPath(out, kLabelsFilename)));
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos);
  }
  o.skip_bad_images = true;
  Convert(o);
  const auto train = ReadSplit(out, "train", 1);
  EXPECT_EQ(train[0].size(), 11u);  // 12 images, the truncated one skipped
  for (const auto& ex : train[0]) EXPECT_NE(ex.filename, "n01484850_9.JPEG");
}

TEST_F(ImageNetConvertTest, EmptyFileAndCompressedOrTruncatedTarFail) {
  const std::string src = tmp_.File("src"), out = tmp_.File("out");
  net_.train["n01440764"]["n01440764_7.JPEG"] = "";
  ConvertOptions o = net_.WriteArchives(src, out);
  EXPECT_NE(ErrorOf([&] {
              Convert(o);
            }).find("member 'n01440764.tar/n01440764_7.JPEG' is empty"),
            std::string::npos);
  // A gzip-compressed train tar cannot be read by offset.
  WriteFile(src + "/train.tar.gz", TarBytes({{"n01440764.tar", "x"}}, true));
  o.imagenet.train_directory = src + "/train.tar.gz";
  EXPECT_NE(ErrorOf([&] { Convert(o); }).find("is not an uncompressed tar"),
            std::string::npos);
  // A train tar cut in the middle of a synset tar.
  const std::string tar = net_.TrainTar();
  WriteFile(src + "/cut.tar", tar.substr(0, tar.size() / 2));
  o.imagenet.train_directory = src + "/cut.tar";
  const std::string err = ErrorOf([&] { Convert(o); });
  EXPECT_NE(err.find("cut.tar"), std::string::npos) << err;
  EXPECT_FALSE(PathExists(JoinPath(out, kLabelsFilename)));
  // A member that would leave the folder.
  WriteFile(src + "/evil.tar",
            TarBytes({{"../n01440764_1.JPEG", RgbJpeg(8, 8, 1)}}));
  o.imagenet.train_directory = src + "/evil.tar";
  EXPECT_NE(ErrorOf([&] {
              Convert(o);
            }).find("entry '../n01440764_1.JPEG' has a '..'"),
            std::string::npos);
  // A malformed XML in the box archive names the archive and the member.
  WriteFile(
      src + "/boxes.tar.gz",
      TarBytes({{"n01440764/n01440764_1.xml", "<annotation><xmin>"}}, true));
  o.imagenet.bounding_box_file = src + "/boxes.tar.gz";
  EXPECT_NE(ErrorOf([&] { Convert(o); })
                .find("archive '" + src +
                      "/boxes.tar.gz' member "
                      "'n01440764/n01440764_1.xml': n01440764/n01440764_1.xml: "
                      "malformed XML"),
            std::string::npos);
}

// A tar member larger than SLIMTORCH_MAX_MEMBER_BYTES is refused from its
// header, naming the archive, the member and the variable; at a limit no
// member exceeds, the same archives convert.
TEST_F(ImageNetConvertTest, MemberOverTheSizeLimitIsRefusedFromItsHeader) {
  const std::string src = tmp_.File("src"), out = tmp_.File("out");
  const ConvertOptions o = net_.WriteArchives(src, out);
  // A limit over every image and box file but under every synset tar (each
  // holds at least one image and its tar headers).
  size_t largest_file = 0;
  for (const auto& files : {net_.val, net_.xmls}) {
    for (const auto& kv : files)
      largest_file = std::max(largest_file, kv.second.size());
  }
  for (const auto& synset : net_.train) {
    for (const auto& kv : synset.second) {
      largest_file = std::max(largest_file, kv.second.size());
    }
  }
  ResourceLimits small = GetResourceLimits();
  small.max_member_bytes = largest_file;
  const ResourceLimits old = SetResourceLimits(small);
  const std::string err = ErrorOf([&] { Convert(o); });
  SetResourceLimits(old);
  EXPECT_NE(err.find("ILSVRC2012_img_train.tar"), std::string::npos) << err;
  EXPECT_NE(err.find(": member 'n01440764.tar' claims "), std::string::npos)
      << err;
  EXPECT_NE(err.find(StrCat(
                "more than a member may hold (the limit is ", largest_file,
                " bytes; set SLIMTORCH_MAX_MEMBER_BYTES to raise it)")),
            std::string::npos)
      << err;
  EXPECT_FALSE(PathExists(JoinPath(out, kLabelsFilename)));

  small.max_member_bytes = net_.TrainTar().size();  // no member is larger
  SetResourceLimits(small);
  const std::string ok = ErrorOf([&] { Convert(o); });
  SetResourceLimits(old);
  EXPECT_EQ(ok, "(no error)");
  EXPECT_TRUE(PathExists(JoinPath(out, kLabelsFilename)));
}

TEST_F(ImageNetConvertTest, FetchesTheTextFilesOverHttp) {
  TestHttpServer server(
      {{"/slim/imagenet_lsvrc_2015_synsets.txt", net_.SynsetsFile()},
       {"/slim/imagenet_metadata.txt", net_.MetadataFile()},
       {"/other/val.txt", net_.ValLabelsFile()}});
  const std::string base = StrCat("http://127.0.0.1:", server.port());
  const std::string out_file = tmp_.File("file"), out_http = tmp_.File("http");
  Convert(net_.WriteArchives(tmp_.File("src"), out_file));
  ConvertOptions o = net_.WriteArchives(tmp_.File("src"), out_http);
  o.source_url = base + "/slim/";
  o.imagenet.validation_labels_file = base + "/other/val.txt";
  Convert(o);
  for (const std::string& name :
       {std::string("labels.txt"), ImageNetShardName("train", 1, 2),
        ImageNetShardName("validation", 0, 2)}) {
    EXPECT_EQ(ReadFileToString(JoinPath(out_file, name)),
              ReadFileToString(JoinPath(out_http, name)))
        << name;
  }
  // The downloads are removed (no --keep_downloads).
  for (const char* f : {"imagenet_lsvrc_2015_synsets.txt",
                        "imagenet_metadata.txt", "val.txt"}) {
    EXPECT_FALSE(PathExists(JoinPath(out_http, f))) << f;
  }
}

TEST_F(ImageNetConvertTest, ThreadsMustDivideShards) {
  ConvertOptions o = net_.WriteArchives(tmp_.File("src"), tmp_.File("out"));
  o.num_threads = 3;
  EXPECT_NE(ErrorOf([&] { Convert(o); }).find("multiples of --num_threads (3)"),
            std::string::npos);
}

// TensorFlow reads the records with the keys of TF-Slim's imagenet.get_split.
TEST_F(ImageNetConvertTest, TensorFlowParsesTheRecords) {
  const char* python = "/opt/tfenv/bin/python";
  if (!testing_export::HavePythonModules("tensorflow, tf_slim")) {
    GTEST_SKIP() << "no TensorFlow + tf_slim in /opt/tfenv";
  }
  const std::string out = tmp_.File("out");
  Convert(net_.WriteArchives(tmp_.File("src"), out));
  const std::string report = tmp_.File("tf.txt");
  // The CMYK and PNG originals, for TF's own re-encoding of them.
  WriteFile(tmp_.File("orig/" + net_.cmyk_name), net_.cmyk);
  WriteFile(tmp_.File("orig/" + net_.png_name), net_.png);
  const std::string cmd =
      StrCat(python, " ", SLIMTORCH_TEST_DATA_DIR,
             "/../scripts/golden/check_imagenet_records.py ", out, " ",
             tmp_.File("orig"), " > ", report, " 2>", tmp_.File("tf.err"));
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << ReadFileToString(tmp_.File("tf.err"));
  // One line per record: "<filename> <label> <height> <width> <boxes>".
  std::string ours;
  for (const char* split : {"train", "validation"}) {
    for (const auto& shard : ReadSplit(out, split, 2)) {
      for (const auto& ex : shard) {
        ours += StrCat(ex.filename, " ", ex.label, " ", ex.height, " ",
                       ex.width, " ", ex.boxes.size(), "\n");
        if (ex.filename == net_.cmyk_name || ex.filename == net_.png_name) {
          // Byte-identical to build_imagenet_data's ImageCoder output.
          ours += StrCat("reencoded ", ex.filename, " same\n");
        }
      }
    }
  }
  EXPECT_EQ(ReadFileToString(report), ours);
}

}  // namespace
}  // namespace slimtorch
