#pragma once
// What the image fuzz targets (png, jpeg, bmp, gif) share. Input: a mode
// byte (channels 0, 1 or 3 by mode % 3), four bytes placing a window
// (JPEG), then the encoded image. Checks at the pixel level, where the
// decode succeeds: the buffer holds height * width * channels bytes;
// DecodeImageInto gives the same pixels; the pixels survive a PNG round
// trip; a JPEG window from JpegDecoder equals the same crop of the full
// decode (jpeg_decoder.h's contract); a BMP decodes with its palette too.
#include <array>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/bmp_gif_codec.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/jpeg_decoder.h"

namespace slimtorch {
namespace fuzz {

inline void Expect(bool ok, const char* what) {
  if (ok) return;
  std::cerr << "image fuzz: broken property: " << what << "\n";
  std::abort();
}

// The window [y, y+h) x [x, x+w) chosen by four bytes, inside the image.
inline void CheckJpegWindow(const std::string& bytes, const Image& full,
                            const std::array<uint8_t, 4>& place) {
  const int y = place[0] * (full.height - 1) / 255;
  const int x = place[1] * (full.width - 1) / 255;
  const int h = 1 + place[2] * (full.height - y - 1) / 255;
  const int w = 1 + place[3] * (full.width - x - 1) / 255;
  const int c = full.channels;
  std::vector<uint8_t> window(static_cast<size_t>(h) * w * c);
  JpegDecoder decoder;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  try {
    const JpegDecoder::Header header = decoder.ReadHeader(p, bytes.size(), "");
    Expect(header.height == full.height && header.width == full.width,
           "JPEG header size equals the decoded size");
    decoder.DecodeWindow(p, bytes.size(), y, x, h, w, c, window.data(), "");
  } catch (const Error& e) {
    std::cerr << "window " << h << "x" << w << " at (" << y << ", " << x
              << "): " << e.what() << "\n";
    Expect(false, "a JPEG that decodes whole decodes by window");
  }
  for (int r = 0; r < h; ++r) {
    Expect(std::memcmp(window.data() + static_cast<size_t>(r) * w * c,
                       full.pixels.data() +
                           (static_cast<size_t>(y + r) * full.width + x) * c,
                       static_cast<size_t>(w) * c) == 0,
           "a JPEG window equals the crop of the full decode");
  }
}

inline void CheckDecoded(const std::string& bytes, int channels,
                         const Image& img) {
  Expect(img.height > 0 && img.width > 0 &&
             (img.channels == 1 || img.channels == 3) &&
             (channels == 0 || img.channels == channels) &&
             img.pixels.size() == static_cast<size_t>(img.height) *
                                      img.width * img.channels,
         "the decoded buffer holds height * width * channels bytes");
  if (channels != 0) {
    std::vector<uint8_t> again(img.pixels.size());
    DecodeImageInto(bytes, img.height, img.width, channels, again.data(), "");
    Expect(again == img.pixels, "DecodeImageInto gives DecodeImage's pixels");
  }
  const std::string png =
      EncodePng(img.pixels.data(), img.height, img.width, img.channels);
  Expect(DecodeImage(png, img.channels, "").pixels == img.pixels,
         "the pixels survive a PNG round trip");
}

inline int FuzzImage(const uint8_t* data, size_t size) {
  UseSmallLimits();
  Input in(data, size);
  static constexpr int kChannels[3] = {0, 1, 3};
  const int channels = kChannels[in.Byte() % 3];
  std::array<uint8_t, 4> place;
  for (size_t i = 0; i < place.size(); ++i) place[i] = in.Byte();
  const std::string bytes = in.Rest();
  if (IsBmp(bytes)) {
    try {
      DecodeBmpInto(bytes, channels,
                    [](int h, int w, int c) {
                      static std::vector<uint8_t> out;
                      out.assign(static_cast<size_t>(h) * w * c, 0);
                      return out.data();
                    },
                    "", BmpPalette::kColors);
    } catch (const Error&) {
    }
  }
  Image img;
  try {
    img = DecodeImage(bytes, channels, "fuzz image");
  } catch (const Error&) {
    return 0;
  }
  CheckDecoded(bytes, channels, img);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (JpegDecoder::IsJpeg(p, bytes.size()) && channels != 0) {
    CheckJpegWindow(bytes, img, place);
  }
  return 0;
}

}  // namespace fuzz
}  // namespace slimtorch
