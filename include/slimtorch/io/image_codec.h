#pragma once
// Image encoding and decoding: PNG through libpng, JPEG through
// libjpeg-turbo, with the transforms of TensorFlow's tf.io.decode_png /
// decode_jpeg for uint8 output (tests/golden/codec_goldens.inc holds TF's
// pixels): 16-bit PNG samples keep their high byte, palettes and low-depth
// grays expand, JPEGs decode with TF's default fast integer IDCT and fancy
// upsampling, CMYK JPEGs convert to RGB, a truncated JPEG is an error. BMP
// and GIF (first frame) decode as tf.io.decode_bmp / decode_gif do
// (bmp_gif_codec.h; like TensorFlow they refuse channels = 1).
//
// Pixels are uint8, row-major HWC, channels in RGB order (grayscale: 1).
// Thread-safe: no shared state.

#include <cstdint>
#include <string>
#include <vector>

namespace slimtorch {

struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels bytes, HWC, RGB
};

// Encodes HWC uint8 pixels (1 or 3 channels, RGB) as PNG.
std::string EncodePng(const uint8_t* pixels, int height, int width,
                      int channels);

// Decodes PNG, JPEG, BMP or GIF bytes. `channels` = 1 or 3 converts to that
// many channels (as TensorFlow's decode_image(channels=N); BMP and GIF refuse
// 1, as there); 0 keeps gray as 1 channel and color as 3 (an alpha channel is
// dropped, where TensorFlow would keep 4; GIFs are always 3). EXIF
// orientation is ignored, as in TensorFlow. `context` names the source in
// errors.
Image DecodeImage(const std::string& bytes, int channels,
                  const std::string& context);

// Decodes into a caller-provided buffer that must hold exactly
// height*width*channels bytes; throws when the decoded size differs.
void DecodeImageInto(const std::string& bytes, int height, int width,
                     int channels, uint8_t* out, const std::string& context);

}  // namespace slimtorch
