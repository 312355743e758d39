#pragma once
// Private to the ImageNet converter: build_imagenet_data's _process_image,
// with the PNG and CMYK files found by their content instead of its
// hard-coded file lists. Not installed.

#include <string>

namespace slimtorch {
namespace internal {

// An image ready for its record.
struct CleanImage {
  std::string jpeg;  // the original bytes, or the re-encoded RGB JPEG
  int height = 0;
  int width = 0;
  // "" when kept as is; "PNG" or "CMYK" when re-encoded.
  std::string converted;
};

// PNG bytes (whatever the file's name) and CMYK/YCCK JPEGs are decoded to
// RGB and re-encoded as TF's encode_jpeg(format='rgb', quality=100) does;
// other JPEGs (RGB or gray) are kept byte for byte. The result is decoded
// with 3 channels, as upstream's decode_jpeg check, for its height and
// width. Throws naming `where` for an empty, corrupt, truncated or
// non-JPEG/PNG file.
CleanImage CleanImageNetImage(const std::string& bytes,
                              const std::string& where);

// Encodes HWC RGB uint8 pixels as a baseline JPEG with TF's encode_jpeg
// settings: 4:2:0 chroma, JFIF 300x300 dpi, standard Huffman tables.
std::string EncodeRgbJpeg(const uint8_t* pixels, int height, int width,
                          int quality);

// Components of a JPEG's frame header (1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK),
// 0 when the bytes are not a JPEG or have no frame header.
int JpegFrameComponents(const std::string& bytes);

}  // namespace internal
}  // namespace slimtorch
