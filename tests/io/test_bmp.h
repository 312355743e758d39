#pragma once
// Test BMPs written byte by byte from the format (BITMAPFILEHEADER +
// 40-byte BITMAPINFOHEADER), independent of the decoder under test.

#include <cstdint>
#include <string>
#include <vector>

namespace slimtorch {
namespace testing_io {

// A width x height BMP, rows stored bottom-up and padded to 4 bytes.
// bpp 24: `pixels` are top-down RGB triples. bpp 8: `pixels` are top-down
// palette indices and `palette_rgb` the palette as RGB triples, with
// `colours_used` in the header (0 means 256).
inline std::string TestBmp(int width, int height, int bpp,
                           const std::vector<uint8_t>& pixels,
                           const std::vector<uint8_t>& palette_rgb = {},
                           uint32_t colours_used = 0) {
  auto u32 = [](std::string* s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
  };
  auto u16 = [](std::string* s, uint16_t v) {
    s->push_back(static_cast<char>(v & 0xFF));
    s->push_back(static_cast<char>(v >> 8));
  };
  const int bytes_per_pixel = bpp / 8;
  const uint32_t row = (bytes_per_pixel * width + 3) / 4 * 4;
  std::string palette;
  for (size_t i = 0; i + 2 < palette_rgb.size(); i += 3) {  // stored B, G, R, 0
    palette.push_back(static_cast<char>(palette_rgb[i + 2]));
    palette.push_back(static_cast<char>(palette_rgb[i + 1]));
    palette.push_back(static_cast<char>(palette_rgb[i]));
    palette.push_back(0);
  }
  const uint32_t offset = 14 + 40 + static_cast<uint32_t>(palette.size());
  std::string s = "BM";
  u32(&s, offset + row * height);
  u32(&s, 0);
  u32(&s, offset);
  u32(&s, 40);
  u32(&s, width);
  u32(&s, height);
  u16(&s, 1);
  u16(&s, static_cast<uint16_t>(bpp));
  u32(&s, 0);  // BI_RGB
  u32(&s, row * height);
  u32(&s, 2835);
  u32(&s, 2835);
  u32(&s, colours_used);
  u32(&s, 0);
  s += palette;
  for (int y = height - 1; y >= 0; --y) {
    const size_t start = s.size();
    for (int x = 0; x < width; ++x) {
      const uint8_t* p = pixels.data() + (static_cast<size_t>(y) * width + x) *
                                             bytes_per_pixel;
      if (bpp == 8) {
        s.push_back(static_cast<char>(p[0]));
      } else {  // RGB -> B, G, R
        s.push_back(static_cast<char>(p[2]));
        s.push_back(static_cast<char>(p[1]));
        s.push_back(static_cast<char>(p[0]));
      }
    }
    s.resize(start + row, '\0');
  }
  return s;
}

}  // namespace testing_io
}  // namespace slimtorch
