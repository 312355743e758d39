#include "slimtorch/io/bmp_gif_codec.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/test_bmp.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/image_codec.h"

namespace slimtorch {
namespace {

// One file and TensorFlow's answer for it (height -1: TF fails).
struct BmpGifGolden {
  const char* name;
  const char* data;  // hex
  int channels;
  int height;
  int width;
  int out_channels;  // TF's; 4 for 32-bit BMPs with channels = 0
  uint32_t crc;      // CRC-32 of TF's RGB channels
  const char* pixels;  // hex of TF's RGB pixels, "" when large
};

// TF's answer (channels = 0) for every prefix length in [from, to).
struct BmpGifRun {
  const char* name;
  const char* data;
  int from;
  int to;
  int height;
  int width;
  uint32_t crc;
};

// TF's answer (channels = 0) with byte `offset` set to `value`.
struct BmpGifCorruption {
  const char* name;
  const char* data;
  int offset;
  int value;
  int height;
  int width;
  uint32_t crc;
};

#include "golden/bmp_gif_goldens.inc"

std::string Unhex(const char* hex) {
  std::string out;
  const std::string h = hex;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

uint32_t Crc(const std::vector<uint8_t>& pixels) {
  return static_cast<uint32_t>(
      crc32(0, pixels.data(), static_cast<uInt>(pixels.size())));
}

// Decodes through DecodeImage (the dispatch every reader uses) and checks
// the result against TF's: same size, same RGB pixels (by CRC-32), or a
// failure naming the source where TF fails.
void ExpectLikeTensorFlow(const std::string& bytes, int channels, int height,
                          int width, uint32_t crc, const std::string& what) {
  if (height < 0) {
    EXPECT_ERROR_CONTAINS(DecodeImage(bytes, channels, what), what);
    return;
  }
  Image img;
  try {
    img = DecodeImage(bytes, channels, what);
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": TensorFlow decodes it, we fail: " << e.what();
    return;
  }
  ASSERT_EQ(img.height, height) << what;
  ASSERT_EQ(img.width, width) << what;
  std::vector<uint8_t> rgb = img.pixels;
  if (img.channels == 1) {  // TF's CRC is over its own channels: gray is 1
    EXPECT_EQ(Crc(rgb), crc) << what;
    return;
  }
  EXPECT_EQ(img.channels, 3) << what;
  EXPECT_EQ(Crc(rgb), crc) << what;
}

TEST(BmpGifCodecTest, DecodesLikeTensorFlow) {
  int decoded = 0, refused = 0;
  for (const BmpGifGolden& g : kBmpGifGoldens) {
    const std::string bytes = Unhex(g.data);
    const std::string what =
        std::string(g.name) + " channels=" + std::to_string(g.channels);
    ExpectLikeTensorFlow(bytes, g.channels, g.height, g.width, g.crc, what);
    if (g.height < 0) {
      ++refused;
      continue;
    }
    ++decoded;
    // Channels: TF's, except that a 32-bit BMP's alpha is dropped.
    const Image img = DecodeImage(bytes, g.channels, what);
    EXPECT_EQ(img.channels, std::min(g.out_channels, 3)) << what;
    const std::string pixels = Unhex(g.pixels);
    if (!pixels.empty() && g.out_channels != 4) {
      EXPECT_EQ(std::string(img.pixels.begin(), img.pixels.end()), pixels)
          << what;
    }
    // The direct entry points agree with the dispatch.
    std::vector<uint8_t> direct;
    const BmpGifAllocate alloc = [&](int h, int w, int c) {
      direct.assign(static_cast<size_t>(h) * w * c, 0);
      return direct.data();
    };
    if (IsBmp(bytes)) {
      DecodeBmpInto(bytes, g.channels, alloc, what);
    } else {
      ASSERT_TRUE(IsGif(bytes)) << what;
      DecodeGifInto(bytes, g.channels, alloc, what);
    }
    EXPECT_EQ(direct, img.pixels) << what;
    // Into a caller's buffer of the right size, and a clear error otherwise
    // (DecodeImageInto asks for a channel count: 3 here, 1 is refused).
    if (img.channels != 3) continue;
    std::vector<uint8_t> into(img.pixels.size());
    DecodeImageInto(bytes, img.height, img.width, img.channels, into.data(),
                    what);
    EXPECT_EQ(into, img.pixels) << what;
    EXPECT_ERROR_CONTAINS(DecodeImageInto(bytes, img.height + 1, img.width,
                                          img.channels, into.data(), what),
                          what);
  }
  // The goldens cover both outcomes in numbers (a guard against an empty or
  // one-sided table).
  EXPECT_GT(decoded, 80);
  EXPECT_GT(refused, 20);
}

TEST(BmpGifCodecTest, RefusesOneChannelAsTensorFlowDoes) {
  for (const BmpGifGolden& g : kBmpGifGoldens) {
    if (g.channels != 0 || g.height < 0) continue;
    const std::string bytes = Unhex(g.data);
    EXPECT_ERROR_CONTAINS(DecodeImage(bytes, 1, g.name), g.name,
                          "cannot be decoded to 1 channel");
  }
  const std::string bmp = Unhex(kBmpGifGoldens[0].data);
  EXPECT_ERROR_CONTAINS(
      DecodeBmpInto(bmp, 4, [](int, int, int) { return nullptr; }, "x.bmp"),
      "x.bmp", "not 4");
}

TEST(BmpGifCodecTest, EveryTruncationLikeTensorFlow) {
  int checked = 0;
  for (const BmpGifRun& r : kBmpGifTruncations) {
    const std::string bytes = Unhex(r.data);
    for (int n = r.from; n < r.to; ++n) {
      ExpectLikeTensorFlow(bytes.substr(0, n), 0, r.height, r.width, r.crc,
                           std::string(r.name) + " first " +
                               std::to_string(n) + " bytes");
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(BmpGifCodecTest, SingleByteCorruptionsLikeTensorFlow) {
  int checked = 0;
  for (const BmpGifCorruption& c : kBmpGifCorruptions) {
    std::string bytes = Unhex(c.data);
    ASSERT_LT(static_cast<size_t>(c.offset), bytes.size());
    bytes[c.offset] = static_cast<char>(c.value);
    ExpectLikeTensorFlow(bytes, 0, c.height, c.width, c.crc,
                         std::string(c.name) + " byte " +
                             std::to_string(c.offset) + " = " +
                             std::to_string(c.value));
    ++checked;
  }
  EXPECT_GT(checked, 900);
}

// A 3x2 8-bit BMP with `palette` (RGB triples).
std::string PaletteBmp(const std::vector<uint8_t>& palette_rgb,
                       const std::vector<uint8_t>& top_down_indices,
                       uint32_t colours_used) {
  return testing_io::TestBmp(3, 2, 8, top_down_indices, palette_rgb,
                             colours_used);
}

std::vector<uint8_t> DecodeBmp(const std::string& bytes, int channels,
                               BmpPalette palette, int* out_channels) {
  std::vector<uint8_t> out;
  DecodeBmpInto(
      bytes, channels,
      [&](int h, int w, int c) {
        *out_channels = c;
        out.assign(static_cast<size_t>(h) * w * c, 0);
        return out.data();
      },
      "p.bmp", palette);
  return out;
}

TEST(BmpGifCodecTest, PaletteColoursOnRequest) {
  const std::vector<uint8_t> colours = {255, 0, 0, 0, 128, 0, 10, 20, 30};
  const std::vector<uint8_t> indices = {0, 1, 2, 2, 1, 0};
  const std::string bmp = PaletteBmp(colours, indices, 3);
  int c = 0;
  // TensorFlow's reading: the indices, one channel.
  EXPECT_EQ(DecodeBmp(bmp, 0, BmpPalette::kIndices, &c), indices);
  EXPECT_EQ(c, 1);
  // The palette's colours.
  std::vector<uint8_t> want;
  for (uint8_t i : indices) {
    want.insert(want.end(), colours.begin() + 3 * i,
                colours.begin() + 3 * i + 3);
  }
  EXPECT_EQ(DecodeBmp(bmp, 0, BmpPalette::kColors, &c), want);
  EXPECT_EQ(c, 3);
  EXPECT_EQ(DecodeBmp(bmp, 3, BmpPalette::kColors, &c), want);

  // An all-gray palette stays one channel, with the palette's grays.
  const std::string gray =
      PaletteBmp({7, 7, 7, 99, 99, 99, 200, 200, 200}, indices, 0);
  // colours_used = 0 means 256 entries, more than this palette has: refused.
  EXPECT_ERROR_CONTAINS(DecodeBmp(gray, 0, BmpPalette::kColors, &c), "p.bmp",
                        "palette of 256 colours");
  const std::string gray3 =
      PaletteBmp({7, 7, 7, 99, 99, 99, 200, 200, 200}, indices, 3);
  EXPECT_EQ(DecodeBmp(gray3, 0, BmpPalette::kColors, &c),
            (std::vector<uint8_t>{7, 99, 200, 200, 99, 7}));
  EXPECT_EQ(c, 1);

  // An index past the palette is an error naming the pixel.
  const std::string past = PaletteBmp(colours, {0, 1, 2, 3, 1, 0}, 3);
  EXPECT_ERROR_CONTAINS(DecodeBmp(past, 0, BmpPalette::kColors, &c), "p.bmp",
                        "pixel (0, 1) has colour index 3",
                        "palette holds 3 colours");
}

}  // namespace
}  // namespace slimtorch
