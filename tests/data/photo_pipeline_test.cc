// The photo path of the record pipeline (PipelineOptions::photo): the same
// batches as the generic per-image path, for JPEG, PNG and ImageNet-style
// records, and errors naming the record.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/test_jpeg.h"
#include "slimtorch/core/error.h"
#include "slimtorch/data/pipeline.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/proto/example.pb.h"
#include "slimtorch/io/tfrecord.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing::TempDir;

// An ImageNet-style record: the five keys plus object boxes.
std::string BoxedExample(const std::string& jpeg, int64_t label,
                         const std::vector<std::array<float, 4>>& boxes) {
  proto::Example example;
  auto& f = *example.mutable_features()->mutable_feature();
  f["image/encoded"].mutable_bytes_list()->add_value(jpeg);
  f["image/format"].mutable_bytes_list()->add_value("JPEG");
  f["image/class/label"].mutable_int64_list()->add_value(label);
  const char* keys[4] = {"image/object/bbox/ymin", "image/object/bbox/xmin",
                         "image/object/bbox/ymax", "image/object/bbox/xmax"};
  for (int k = 0; k < 4; ++k) {
    auto* list = f[keys[k]].mutable_float_list();
    for (const auto& b : boxes) list->add_value(b[k]);
  }
  return example.SerializeAsString();
}

class PhotoPipelineTest : public ::testing::Test {
 protected:
  // Two files: JPEGs of several sizes and samplings (one gray), a PNG, and
  // ImageNet-style records with boxes.
  void SetUp() override {
    std::mt19937 gen(3);
    for (int f = 0; f < 2; ++f) {
      TFRecordWriter w(dir_.Join("photos-" + std::to_string(f)));
      for (int i = 0; i < 9; ++i) {
        const int h = 60 + gen() % 140, wd = 60 + gen() % 140;
        const int comps = i == 4 ? 1 : 3;
        const std::string jpeg = testing_io::TestJpeg(
            h, wd, comps, 1 + i % 2, 1 + (i / 2) % 2, gen());
        ImageExample ex{jpeg, "jpg", i % 3, h, wd};
        if (i == 7) {
          const Image img = DecodeImage(jpeg, 3, "png source");
          ex.encoded = EncodePng(img.pixels.data(), h, wd, 3);
          ex.format = "png";
        }
        if (i == 8) {
          // Small corner boxes: most crops that cover 10% of the whole image
          // miss them, so the boxes change the crops.
          w.Write(BoxedExample(jpeg, 2, {{0.85f, 0.85f, 1.0f, 1.0f},
                                         {0.0f, 0.0f, 0.1f, 0.05f}}));
        } else {
          w.Write(EncodeImageExample(ex));
        }
      }
      w.Close();
      files_.push_back(dir_.Join("photos-" + std::to_string(f)));
    }
  }

  PipelineOptions Options(const std::string& name, bool training,
                          int64_t size) {
    PipelineOptions o;
    o.files = files_;
    o.batch_size = 5;
    o.training = training;
    o.num_readers = 2;
    o.num_preprocessing_threads = 2;
    o.seed = 11;
    o.num_classes = 3;
    o.default_format = "jpg";
    PreprocessingOptions pre;
    pre.output_height = pre.output_width = size;
    pre.is_training = training;
    o.preprocess = GetPreprocessing(name, pre);
    o.photo = PhotoPreprocessing::Create(name, pre);
    o.output_height = o.output_width = size;
    return o;
  }

  // The first `batches` batches of a pipeline.
  static std::vector<Batch> Take(PipelineOptions o, int batches) {
    Pipeline p(std::move(o));
    std::vector<Batch> out;
    for (int b = 0; b < batches; ++b) {
      auto batch = p.Next();
      if (!batch) break;
      out.push_back(std::move(*batch));
    }
    return out;
  }

  TempDir dir_;
  std::vector<std::string> files_;
};

TEST_F(PhotoPipelineTest, PhotoPathEqualsPerImagePath) {
  struct Case {
    const char* name;
    bool training;
    int64_t size;
  };
  for (const Case& c : {Case{"inception", true, 64}, Case{"inception", false, 48},
                        Case{"vgg_16", true, 56}, Case{"vgg_16", false, 40}}) {
    SCOPED_TRACE(std::string(c.name) + (c.training ? " train" : " eval"));
    PipelineOptions photo = Options(c.name, c.training, c.size);
    ASSERT_NE(photo.photo, nullptr);
    PipelineOptions generic = photo;
    generic.photo = nullptr;
    // No boxes for the generic path: compare with boxes off, then check
    // that boxes change only the boxed records.
    photo.use_bounding_boxes = false;
    const int n = c.training ? 8 : 4;  // training: beyond one epoch (18)
    std::vector<Batch> a = Take(photo, n), b = Take(generic, n);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(torch::equal(a[i].labels, b[i].labels)) << "batch " << i;
      EXPECT_TRUE(torch::equal(a[i].images, b[i].images))
          << "batch " << i << " max diff "
          << (a[i].images - b[i].images).abs().max().item<float>();
    }
  }
}

TEST_F(PhotoPipelineTest, BoxesChangeOnlyTheBoxedRecordsCrops) {
  PipelineOptions with = Options("inception", true, 64);
  PipelineOptions without = with;
  without.use_bounding_boxes = false;
  std::vector<Batch> a = Take(with, 4), b = Take(without, 4);
  int differ = 0, total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (int64_t k = 0; k < a[i].size(); ++k) {
      ++total;
      if (!torch::equal(a[i].images[k], b[i].images[k])) {
        ++differ;
        EXPECT_EQ(a[i].labels[k].item<int64_t>(), 2);  // the boxed records
      }
    }
  }
  EXPECT_EQ(total, 20);
  EXPECT_GT(differ, 0);
}

TEST_F(PhotoPipelineTest, BadRecordsAreNamed) {
  TFRecordWriter w(dir_.Join("bad"));
  const std::string jpeg = testing_io::TestJpeg(50, 60, 3, 2, 2, 9);
  w.Write(EncodeImageExample({jpeg.substr(0, jpeg.size() / 3), "jpg", 0, 50, 60}));
  w.Write(EncodeImageExample({jpeg, "jpg", 7, 50, 60}));
  w.Write("not a tf.train.Example");
  w.Write(BoxedExample(jpeg, 1, {{0.1f, 0.2f, 1.5f, 0.9f}}));
  w.Close();
  const std::string messages[] = {
      "bad record 0: cannot decode JPEG", "bad record 1: label 7 is outside [0, 3)",
      "bad record 2: not a valid tf.train.Example",
      "bad record 3: bounding box coordinates must be in [0, 1], got 1.5"};
  for (int r = 0; r < 4; ++r) {
    TFRecordWriter one(dir_.Join("one"));
    TFRecordReader reader(dir_.Join("bad"));
    std::string record;
    for (int i = 0; i <= r; ++i) ASSERT_TRUE(reader.Read(&record));
    one.Write(record);
    one.Close();
    PipelineOptions o = Options("inception", true, 32);
    o.files = {dir_.Join("one")};
    EXPECT_ERROR_CONTAINS(Take(o, 1), dir_.Join("one") + " record 0: ",
                          messages[r].substr(messages[r].find(": ") + 2));
  }
}

}  // namespace
}  // namespace slimtorch
