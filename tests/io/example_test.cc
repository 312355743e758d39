#include "slimtorch/io/example.h"

#include <gtest/gtest.h>

#include <string>

#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/proto/example.pb.h"

namespace slimtorch {
namespace {

using testing_io::GoldenPath;

// The Example in tests/golden/tf_example.pb (make_tf_goldens.py).
ImageExample GoldenImageExample() {
  ImageExample ex;
  ex.encoded = std::string("\x89PNG fake \x00\xff bytes", 18);
  ex.format = "png";
  ex.label = 7;
  ex.height = 28;
  ex.width = 32;
  return ex;
}

void ExpectSame(const ImageExample& a, const ImageExample& b) {
  EXPECT_EQ(a.encoded, b.encoded);
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
}

TEST(ExampleTest, EncodeMatchesTensorFlowDeterministicBytes) {
  const std::string golden = ReadFileToString(GoldenPath("tf_example.pb"));
  EXPECT_EQ(EncodeImageExample(GoldenImageExample()), golden);
}

TEST(ExampleTest, DecodesTensorFlowBytes) {
  const std::string golden = ReadFileToString(GoldenPath("tf_example.pb"));
  ExpectSame(DecodeImageExample(golden, "golden"), GoldenImageExample());
}

TEST(ExampleTest, RoundTripWithNegativeAndLargeValues) {
  ImageExample ex;
  ex.encoded = std::string(5000, '\x7f');
  ex.format = "raw";
  ex.label = -1;
  ex.height = int64_t(1) << 40;
  ex.width = 0;
  ExpectSame(DecodeImageExample(EncodeImageExample(ex), "rt"), ex);
}

// Builds an Example holding only the given features.
std::string Build(bool with_encoded, bool with_format, int n_labels,
                  bool label_as_float) {
  proto::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  if (with_encoded)
    f[example_keys::kEncoded].mutable_bytes_list()->add_value("x");
  if (with_format)
    f[example_keys::kFormat].mutable_bytes_list()->add_value("jpeg");
  if (label_as_float) {
    f[example_keys::kLabel].mutable_float_list()->add_value(1.0f);
  } else if (n_labels >= 0) {
    auto* l = f[example_keys::kLabel].mutable_int64_list();
    for (int i = 0; i < n_labels; ++i) l->add_value(i);
  }
  return e.SerializeAsString();
}

TEST(ExampleTest, FormatDefaultsAndHeightWidthOptional) {
  ImageExample ex =
      DecodeImageExample(Build(true, false, 1, false), "c", "raw");
  EXPECT_EQ(ex.format, "raw");
  EXPECT_EQ(ex.height, 0);
  EXPECT_EQ(ex.width, 0);
  EXPECT_EQ(DecodeImageExample(Build(true, true, 1, false), "c").format,
            "jpeg");
}

TEST(ExampleTest, MissingEncodedIsAnError) {
  EXPECT_ERROR_CONTAINS(
      DecodeImageExample(Build(false, true, 1, false), "f.tfrecord record 3"),
      "f.tfrecord record 3", "image/encoded");
}

TEST(ExampleTest, LabelMustBeOneInt64) {
  EXPECT_ERROR_CONTAINS(DecodeImageExample(Build(true, true, -1, false), "c"),
                        "c: ", "no 'image/class/label'");
  EXPECT_ERROR_CONTAINS(DecodeImageExample(Build(true, true, 0, false), "c"),
                        "image/class/label", "exactly one int64");
  EXPECT_ERROR_CONTAINS(DecodeImageExample(Build(true, true, 2, false), "c"),
                        "image/class/label", "exactly one int64");
  EXPECT_ERROR_CONTAINS(DecodeImageExample(Build(true, true, 0, true), "c"),
                        "image/class/label", "exactly one int64");
}

TEST(ExampleTest, GarbageBytesAreAnError) {
  EXPECT_ERROR_CONTAINS(DecodeImageExample("\xff\xff\xff\xff garbage", "g"),
                        "g: ", "not a valid tf.train.Example");
  // Valid protobuf wire data that lacks the features.
  EXPECT_ERROR_CONTAINS(DecodeImageExample("", "empty"),
                        "empty: ", "image/encoded");
}

}  // namespace
}  // namespace slimtorch
