#include "slimtorch/io/jpeg_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/io/image_codec.h"
#include "io/io_test_util.h"
#include "io/test_jpeg.h"

namespace slimtorch {
namespace {

using testing_io::CodecGolden;

#include "golden/codec_goldens.inc"

const uint8_t* Bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// DecodeWindow equals DecodeImage cropped to the window (as TF's
// decode_and_crop_jpeg equals decode_jpeg + crop), for every window edge
// against iMCU boundaries: the decoder widens libjpeg-turbo's crop so that
// fancy upsampling sees the same neighbours as in a full decode.
int CountWindowMismatches(JpegDecoder* decoder, const std::string& jpeg,
                          int channels, int y, int x, int h, int w) {
  const Image full = DecodeImage(jpeg, channels, "full");
  std::vector<uint8_t> window(static_cast<size_t>(h) * w * channels);
  decoder->DecodeWindow(Bytes(jpeg), jpeg.size(), y, x, h, w, channels,
                        window.data(), "window");
  int mismatches = 0;
  for (int r = 0; r < h; ++r) {
    for (int q = 0; q < w * channels; ++q) {
      mismatches += window[(static_cast<size_t>(r) * w) * channels + q] !=
                    full.pixels[(static_cast<size_t>(y + r) * full.width + x) *
                                    channels + q];
    }
  }
  return mismatches;
}

TEST(JpegDecoderTest, WindowsEqualCroppedFullDecodes) {
  JpegDecoder decoder;  // one decoder reused for everything
  std::mt19937 gen(5);
  const int sampling[][3] = {{1, 1, 3}, {2, 1, 3}, {2, 2, 3}, {1, 2, 3}, {1, 1, 1}};
  int windows = 0;
  for (const auto& s : sampling) {
    for (int image = 0; image < 4; ++image) {
      const int height = 37 + gen() % 200, width = 41 + gen() % 200;
      const std::string jpeg = testing_io::TestJpeg(height, width, s[2], s[0], s[1], gen());
      const JpegDecoder::Header header =
          decoder.ReadHeader(Bytes(jpeg), jpeg.size(), "header");
      EXPECT_EQ(header.height, height);
      EXPECT_EQ(header.width, width);
      EXPECT_EQ(header.components, s[2]);
      for (int channels : {3, 1}) {
        for (int k = 0; k < 12; ++k) {
          const int h = 1 + gen() % height, w = 1 + gen() % width;
          const int y = gen() % (height - h + 1), x = gen() % (width - w + 1);
          EXPECT_EQ(CountWindowMismatches(&decoder, jpeg, channels, y, x, h, w), 0)
              << "sampling " << s[0] << "x" << s[1] << " image " << height << "x"
              << width << " window " << h << "x" << w << " at " << y << "," << x;
          ++windows;
        }
        // Windows on iMCU boundaries (multiples of 8 and 16) and the edges.
        for (int x : {0, 8, 15, 16, 17, 32}) {
          if (x + 17 > width) continue;
          EXPECT_EQ(CountWindowMismatches(&decoder, jpeg, channels, 16, x,
                                          height - 16, width - x - 1), 0);
          EXPECT_EQ(CountWindowMismatches(&decoder, jpeg, channels, 0, x, 8,
                                          16), 0);
        }
        EXPECT_EQ(CountWindowMismatches(&decoder, jpeg, channels, 0, 0, height,
                                        width), 0);
        // Narrow enough at the left edge for the crop's chroma to be one
        // sample wide.
        EXPECT_EQ(CountWindowMismatches(&decoder, jpeg, channels, 3, 0, 20, 1),
                  0);
      }
    }
  }
  EXPECT_GT(windows, 400);
}

// Progressive JPEGs whose later scans are missing (as the fuzz finding
// tests/fuzz/regressions/jpeg/progressive_dc_only_window_off_the_left_edge):
// libjpeg-turbo's block smoothing estimates the unknown AC coefficients
// from the neighbouring blocks' DC values, and in a crop takes the blocks
// left of it to be copies of its first block; the decoder widens the crop
// so that no window sees that. Every window column of a few rows, and
// windows whose chroma would be under two samples wide.
TEST(JpegDecoderTest, WindowsOfProgressiveJpegsMissingScans) {
  JpegDecoder decoder;
  std::mt19937 gen(11);
  const int sampling[][3] = {{1, 1, 1}, {1, 1, 3}, {2, 2, 3}, {2, 1, 3}};
  int windows = 0;
  for (const auto& s : sampling) {
    const int height = 21 + gen() % 30, width = 50 + gen() % 30;
    const std::string all =
        testing_io::TestJpeg(height, width, s[2], s[0], s[1], gen(), true);
    const int scans = testing_io::CountScans(all);
    ASSERT_GT(scans, 2);
    for (int kept : {1, 2, scans - 1, scans}) {
      const std::string jpeg = testing_io::FirstScans(all, kept);
      for (int channels : {1, 3}) {
        for (int x = 0; x < width; ++x) {
          for (int w : {1, 5, width - x}) {
            if (x + w > width) continue;
            const int y = gen() % (height - 8), h = 1 + gen() % 8;
            EXPECT_EQ(
                CountWindowMismatches(&decoder, jpeg, channels, y, x, h, w), 0)
                << "sampling " << s[0] << "x" << s[1] << "x" << s[2]
                << ", first " << kept << " of " << scans << " scans, "
                << channels << " channels, window " << h << "x" << w << " at "
                << y << "," << x;
            ++windows;
          }
        }
      }
    }
  }
  EXPECT_GT(windows, 2000);
}

// TensorFlow's own pixels (tests/golden/codec_goldens.inc), CMYK included,
// for every window of the 12x16 images with a side of at least 3.
TEST(JpegDecoderTest, WindowsOfTensorFlowGoldens) {
  JpegDecoder decoder;
  int checked = 0;
  for (const CodecGolden& g : kCodecGoldens) {
    const std::string name = g.name;
    if (name.rfind("jpeg", 0) != 0 || g.height < 0 || g.channels == 0) continue;
    for (int y = 0; y < g.height; y += 2) {
      for (int x = 0; x < g.width; x += 3) {
        const int h = g.height - y, w = g.width - x;
        std::vector<uint8_t> out(static_cast<size_t>(h) * w * g.channels);
        decoder.DecodeWindow(g.data, g.size, y, x, h, w, g.channels, out.data(),
                             name);
        int mismatches = 0;
        for (int r = 0; r < h; ++r) {
          for (int q = 0; q < w * g.channels; ++q) {
            mismatches += out[(r * w) * g.channels + q] !=
                          g.expected[((y + r) * g.width + x) * g.channels + q];
          }
        }
        EXPECT_EQ(mismatches, 0) << name << " channels " << g.channels
                                 << " window at " << y << "," << x;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(JpegDecoderTest, BadInputIsAClearErrorAndTheDecoderRecovers) {
  JpegDecoder decoder;
  const std::string jpeg = testing_io::TestJpeg(64, 80, 3, 2, 2, 1);
  std::vector<uint8_t> out(64 * 80 * 3);
  // Truncated inside the window.
  const std::string cut = jpeg.substr(0, jpeg.size() / 2);
  EXPECT_ERROR_CONTAINS(
      decoder.DecodeWindow(Bytes(cut), cut.size(), 0, 0, 64, 80, 3, out.data(),
                           "f.tfrecord record 3"),
      "f.tfrecord record 3: ", "truncated");
  EXPECT_ERROR_CONTAINS(
      decoder.DecodeWindow(Bytes(jpeg), jpeg.size(), 10, 0, 60, 80, 3,
                           out.data(), "rec"),
      "rec: ", "window 60x80 at (10, 0) outside the 64x80 image");
  const std::string png = "\x89PNG\r\n\x1a\n....";
  EXPECT_ERROR_CONTAINS(decoder.ReadHeader(Bytes(png), png.size(), "rec 7"),
                        "rec 7: not JPEG data");
  std::string garbage = jpeg.substr(0, 200);
  garbage[2] = '\xff';
  garbage[3] = '\x01';
  EXPECT_THROW(decoder.DecodeWindow(Bytes(garbage), garbage.size(), 0, 0, 8, 8,
                                    3, out.data(), "g"),
               Error);
  // The same decoder still decodes a good image.
  EXPECT_EQ(CountWindowMismatches(&decoder, jpeg, 3, 5, 7, 30, 40), 0);
}

}  // namespace
}  // namespace slimtorch
