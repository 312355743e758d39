#include "imagenet_image.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <vector>

// jpeglib.h needs <cstdio> first.
#include <jpeglib.h>

#include "slimtorch/core/error.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/jpeg_error.h"

namespace slimtorch {
namespace internal {
namespace {

bool HasPngSignature(const std::string& b) {
  return b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

}  // namespace

int JpegFrameComponents(const std::string& bytes) {
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return 0;
  size_t pos = 2;
  while (pos + 4 <= n) {
    if (b[pos] != 0xFF) return 0;
    const uint8_t marker = b[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) ||
        marker == 0x01) {
      pos += 2;
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) return 0;  // EOI / SOS before SOF
    const size_t len = (size_t{b[pos + 2]} << 8) | b[pos + 3];
    const bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 &&
                     marker != 0xC8 && marker != 0xCC;
    if (sof) return pos + 9 < n ? b[pos + 9] : 0;
    pos += 2 + len;
  }
  return 0;
}

std::string EncodeRgbJpeg(const uint8_t* pixels, int height, int width,
                          int quality) {
  jpeg_compress_struct cinfo;
  JpegErrorJump err;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = JpegErrorExit;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(out);
    SLIM_FAIL("JPEG encoding of a ", height, "x", width, " image failed");
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &out, &out_size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  cinfo.density_unit = 1;  // dots per inch, TF's default
  cinfo.X_density = 300;
  cinfo.Y_density = 300;
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(
        pixels + static_cast<size_t>(cinfo.next_scanline) * width * 3);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string jpeg(reinterpret_cast<const char*>(out), out_size);
  jpeg_destroy_compress(&cinfo);
  std::free(out);
  return jpeg;
}

CleanImage CleanImageNetImage(const std::string& bytes,
                              const std::string& where) {
  SLIM_CHECK(!bytes.empty(), where, " is empty (0 bytes)");
  CleanImage out;
  const bool png = HasPngSignature(bytes);
  const int components = png ? 0 : JpegFrameComponents(bytes);
  SLIM_CHECK(png || components > 0, where,
             " is neither a JPEG nor a PNG image (or its JPEG header is "
             "corrupt)");
  if (png || components == 4) {
    Image rgb = DecodeImage(bytes, 3, where);
    out.jpeg = EncodeRgbJpeg(rgb.pixels.data(), rgb.height, rgb.width, 100);
    out.converted = png ? "PNG" : "CMYK";
  } else {
    out.jpeg = bytes;
  }
  // Upstream's check: the (re-encoded) JPEG decodes to 3 channels.
  Image check = DecodeImage(out.jpeg, 3, where);
  out.height = check.height;
  out.width = check.width;
  return out;
}

}  // namespace internal
}  // namespace slimtorch
