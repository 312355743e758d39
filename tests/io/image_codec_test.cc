#include "slimtorch/io/image_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

using testing_io::GoldenPath;

// Pixel values of tests/golden/tf_{rgb,gray}.png (pixel() in
// scripts/golden/make_tf_goldens.py); the gray image is channel 0.
uint8_t Pixel(int y, int x, int c) { return (y * 37 + x * 11 + c * 80) % 256; }
constexpr int kGoldenH = 5;
constexpr int kGoldenW = 7;

std::vector<uint8_t> GoldenPixels(int channels) {
  std::vector<uint8_t> out;
  for (int y = 0; y < kGoldenH; ++y) {
    for (int x = 0; x < kGoldenW; ++x) {
      for (int c = 0; c < channels; ++c) out.push_back(Pixel(y, x, c));
    }
  }
  return out;
}

TEST(ImageCodecTest, PngRoundTripOneAndThreeChannels) {
  for (int channels : {1, 3}) {
    const int h = 9, w = 13;
    std::vector<uint8_t> pixels(h * w * channels);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = (i * 29 + 5) % 256;
    const std::string png = EncodePng(pixels.data(), h, w, channels);
    ASSERT_EQ(png.substr(1, 3), "PNG");
    Image img = DecodeImage(png, 0, "rt");
    EXPECT_EQ(img.height, h);
    EXPECT_EQ(img.width, w);
    EXPECT_EQ(img.channels, channels);
    EXPECT_EQ(img.pixels, pixels) << channels << " channels";
    std::vector<uint8_t> into(pixels.size());
    DecodeImageInto(png, h, w, channels, into.data(), "rt");
    EXPECT_EQ(into, pixels);
  }
}

TEST(ImageCodecTest, DecodesTensorFlowPngs) {
  const std::string rgb = ReadFileToString(GoldenPath("tf_rgb.png"));
  Image img = DecodeImage(rgb, 0, "tf_rgb.png");
  EXPECT_EQ(img.height, kGoldenH);
  EXPECT_EQ(img.width, kGoldenW);
  EXPECT_EQ(img.channels, 3);
  EXPECT_EQ(img.pixels, GoldenPixels(3));
  EXPECT_EQ(DecodeImage(rgb, 3, "tf_rgb.png").pixels, GoldenPixels(3));

  const std::string gray = ReadFileToString(GoldenPath("tf_gray.png"));
  Image g = DecodeImage(gray, 0, "tf_gray.png");
  EXPECT_EQ(g.channels, 1);
  EXPECT_EQ(g.pixels, GoldenPixels(1));
  // channels=3 replicates gray into RGB, as tf.io.decode_png(channels=3).
  Image g3 = DecodeImage(gray, 3, "tf_gray.png");
  ASSERT_EQ(g3.channels, 3);
  for (size_t i = 0; i < g.pixels.size(); ++i) {
    EXPECT_EQ(g3.pixels[3 * i], g.pixels[i]);
    EXPECT_EQ(g3.pixels[3 * i + 1], g.pixels[i]);
    EXPECT_EQ(g3.pixels[3 * i + 2], g.pixels[i]);
  }
}

// TensorFlow's decoders ignore the EXIF orientation tag; so must we, or
// images change shape between TF-Slim and slimtorch.
TEST(ImageCodecTest, IgnoresExifOrientationLikeTensorFlow) {
  const std::string jpeg = ReadFileToString(GoldenPath("exif_orient6.jpg"));
  for (int channels : {0, 1, 3}) {
    Image img = DecodeImage(jpeg, channels, "exif");
    EXPECT_EQ(img.height, 2) << channels;
    EXPECT_EQ(img.width, 4) << channels;
    EXPECT_EQ(img.channels, channels == 0 ? 3 : channels);
    // Left half white, right half black (JPEG is lossy: loose bounds).
    const int c = img.channels;
    EXPECT_GT(img.pixels[0], 200) << channels;
    EXPECT_LT(img.pixels[3 * c], 60) << channels;
  }
}

using testing_io::CodecGolden;

#include "golden/codec_goldens.inc"

// Every golden decodes to TensorFlow's pixels exactly, or fails where
// TensorFlow fails. The documented differences: an alpha channel is dropped
// (TF keeps 4 channels for channels=0) and a CMYK JPEG decodes to gray (TF
// refuses channels=1 for it). BMP/GIF in depth: bmp_gif_codec_test.cc.
TEST(ImageCodecTest, DecodesLikeTensorFlow) {
  int compared = 0;
  for (const CodecGolden& g : kCodecGoldens) {
    const std::string bytes(reinterpret_cast<const char*>(g.data), g.size);
    const std::string what = std::string(g.name) + " channels=" +
                             std::to_string(g.channels);
    const std::string name = g.name;
    if (g.height < 0) {
      if (name == "jpeg_cmyk") continue;
      EXPECT_ERROR_CONTAINS(DecodeImage(bytes, g.channels, what), what,
                            name == "bmp" ? "1 channel" : "cannot decode image");
      continue;
    }
    Image img = DecodeImage(bytes, g.channels, what);
    const int c = std::min(g.out_channels, 3);
    ASSERT_EQ(img.height, g.height) << what;
    ASSERT_EQ(img.width, g.width) << what;
    ASSERT_EQ(img.channels, c) << what;
    int mismatches = 0;
    for (int i = 0; i < g.height * g.width; ++i) {
      for (int k = 0; k < c; ++k) {
        mismatches += img.pixels[i * c + k] != g.expected[i * g.out_channels + k];
      }
    }
    EXPECT_EQ(mismatches, 0) << what;
    ++compared;
  }
  EXPECT_EQ(compared, 22);
}

TEST(ImageCodecTest, TruncatedJpegIsAnError) {
  for (const CodecGolden& g : kCodecGoldens) {
    if (std::string(g.name) != "jpeg_truncated") continue;
    const std::string bytes(reinterpret_cast<const char*>(g.data), g.size);
    EXPECT_ERROR_CONTAINS(DecodeImage(bytes, 3, "rec 9"), "rec 9: ",
                          "cannot decode image", "JPEG: premature end");
  }
}

TEST(ImageCodecTest, GarbageIsAClearError) {
  EXPECT_ERROR_CONTAINS(DecodeImage("not an image at all", 0, "rec 5"),
                        "rec 5: ", "cannot decode image", "19 bytes");
  EXPECT_ERROR_CONTAINS(DecodeImage("", 3, "empty"),
                        "empty: ", "cannot decode image");
  const std::string rgb = ReadFileToString(GoldenPath("tf_rgb.png"));
  EXPECT_ERROR_CONTAINS(DecodeImage(rgb.substr(0, 30), 0, "cut"),
                        "cut: ", "cannot decode image");
  EXPECT_ERROR_CONTAINS(DecodeImage(rgb, 2, "c"), "2 channels");
  std::vector<uint8_t> px(12);
  EXPECT_ERROR_CONTAINS(EncodePng(px.data(), 2, 2, 4), "4");
}

TEST(ImageCodecTest, DecodeIntoChecksSize) {
  const std::string rgb = ReadFileToString(GoldenPath("tf_rgb.png"));
  std::vector<uint8_t> out(kGoldenH * kGoldenW * 3);
  DecodeImageInto(rgb, kGoldenH, kGoldenW, 3, out.data(), "ok");
  EXPECT_EQ(out, GoldenPixels(3));
  EXPECT_ERROR_CONTAINS(DecodeImageInto(rgb, 28, 28, 3, out.data(), "img 3"),
                        "img 3: ", "expected a 28x28x3 image, got 5x7x3");
  EXPECT_ERROR_CONTAINS(
      DecodeImageInto(rgb, kGoldenW, kGoldenH, 3, out.data(), "t"),
      "expected a 7x5x3 image, got 5x7x3");
}

}  // namespace
}  // namespace slimtorch
