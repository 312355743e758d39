#pragma once
// The CMYK → RGB conversion of both JPEG decoders (image_codec.cc,
// jpeg_decoder.cc), as TensorFlow's. Private to io/.

#include <cstdint>

namespace slimtorch {

// One row of `width` CMYK pixels (Adobe files store inverted inks) → RGB
// (`channels` 3) or gray (1) in `out`. Inline, so that each decoder keeps
// its pixel loop compiled in place.
inline void CmykToOutput(const uint8_t* cmyk, int width, bool inverted,
                         int channels, uint8_t* out) {
  for (int x = 0; x < width; ++x) {
    const uint8_t* p = cmyk + 4 * x;
    int rgb[3];
    for (int c = 0; c < 3; ++c) {
      rgb[c] = inverted ? p[c] * p[3] / 255 : (255 - p[c]) * (255 - p[3]) / 255;
    }
    if (channels == 1) {
      out[x] = static_cast<uint8_t>(
          (rgb[0] * 299 + rgb[1] * 587 + rgb[2] * 114 + 500) / 1000);
    } else {
      for (int c = 0; c < 3; ++c) out[3 * x + c] = static_cast<uint8_t>(rgb[c]);
    }
  }
}

}  // namespace slimtorch
