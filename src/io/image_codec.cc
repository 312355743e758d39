#include "slimtorch/io/image_codec.h"

// PNG through libpng and JPEG through libjpeg(-turbo), the libraries
// TensorFlow's own decoders use, with the same transforms as
// tf.io.decode_png / tf.io.decode_jpeg for uint8 output; BMP and GIF through
// our own decoders (bmp_gif_codec.h).
#include <png.h>
#include <zlib.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

// jpeglib.h needs <cstdio> first.
#include <jpeglib.h>

#include "cmyk.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/bmp_gif_codec.h"
#include "slimtorch/io/jpeg_error.h"

namespace slimtorch {
namespace {

bool IsPng(const std::string& b) {
  return b.size() >= 8 && png_sig_cmp(reinterpret_cast<png_const_bytep>(b.data()),
                                      0, 8) == 0;
}
bool IsJpeg(const std::string& b) {
  return b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0xFF &&
         static_cast<uint8_t>(b[1]) == 0xD8 &&
         static_cast<uint8_t>(b[2]) == 0xFF;
}

// Sizes the output buffer once the header is known, returns where pixels go
// (height * width * channels bytes). Throws when the size is unacceptable.
using Allocate = std::function<uint8_t*(int height, int width, int channels)>;

// Runs `fn`, returning what it threw (null when nothing): no exception may
// cross libpng's and libjpeg's frames.
template <typename Fn>
std::exception_ptr CaptureError(Fn fn) {
  try {
    fn();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// ---------------------------------------------------------------- PNG

struct PngReadState {
  const std::string* bytes;
  size_t offset = 0;
  char message[200] = {0};
};

void PngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngReadState*>(png_get_io_ptr(png));
  if (s->bytes->size() - s->offset < n) {
    png_error(png, "truncated data");
  }
  std::memcpy(out, s->bytes->data() + s->offset, n);
  s->offset += n;
}

void PngError(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngReadState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof(s->message), "%s", msg);
  png_longjmp(png, 1);
}
void PngWarning(png_structp, png_const_charp) {}

// Sets TensorFlow's transforms for `channels` (0: as stored) on a PNG whose
// header `info` holds; returns the output channels.
int SetPngTransforms(png_structp png, png_infop info, int channels) {
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  const bool is_color = (color & PNG_COLOR_MASK_COLOR) != 0;
  const int out_channels = channels != 0 ? channels : (is_color ? 3 : 1);
  // As TensorFlow: 16-bit samples keep their high byte, palettes and
  // low-depth grays expand to 8 bits, alpha is dropped without
  // compositing, gray <-> RGB as asked (RGB -> gray with 0.299/0.587/0.114).
  if (depth == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (!is_color && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  if (out_channels == 3 && !is_color) png_set_gray_to_rgb(png);
  if (out_channels == 1 && is_color) {
    png_set_rgb_to_gray_fixed(png, 1, 29900, 58700);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return out_channels;
}

// Decodes into the buffer from `alloc`. Returns false with `error` set when
// libpng fails. No C++ object with a destructor may live across setjmp.
// The image size is checked against the pixel limit before libpng
// allocates its rows.
bool DecodePngInto(const std::string& bytes, int channels,
                   const Allocate& alloc, const std::string& context,
                   std::string* error) {
  PngReadState state;
  state.bytes = &bytes;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state,
                                           PngError, PngWarning);
  SLIM_CHECK(png != nullptr, "png_create_read_struct failed");
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep>* rows = new std::vector<png_bytep>();
  std::exception_ptr thrown;
  volatile bool ok = false;  // read after a longjmp
  if (info != nullptr && setjmp(png_jmpbuf(png)) == 0) {
    png_set_read_fn(png, &state, PngRead);
    png_read_info(png, info);
    const png_uint_32 height = png_get_image_height(png, info);
    const png_uint_32 width = png_get_image_width(png, info);
    uint8_t* out = nullptr;
    int out_channels = 0;
    try {
      CheckImagePixels(height, width, "PNG image", context);
      out_channels = SetPngTransforms(png, info, channels);
      out = alloc(static_cast<int>(height), static_cast<int>(width),
                  out_channels);
      SLIM_CHECK(png_get_rowbytes(png, info) ==
                     static_cast<size_t>(width) * out_channels,
                 "unexpected PNG row size ", png_get_rowbytes(png, info),
                 " for ", width, "x", out_channels);
      rows->resize(height);
    } catch (...) {
      thrown = std::current_exception();
    }
    if (!thrown) {
      for (png_uint_32 y = 0; y < height; ++y) {
        (*rows)[y] = out + static_cast<size_t>(y) * width * out_channels;
      }
      png_read_image(png, rows->data());
      ok = true;
    }
  }
  png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  delete rows;
  if (thrown) std::rethrow_exception(thrown);
  if (!ok) *error = StrCat("PNG: ", state.message);
  return ok;
}

struct PngWriteState {
  std::string out;
};
void PngWrite(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngWriteState*>(png_get_io_ptr(png))
      ->out.append(reinterpret_cast<const char*>(data), n);
}
void PngFlush(png_structp) {}

// ---------------------------------------------------------------- JPEG

// Sets TensorFlow's decoding of a JPEG whose header `cinfo` has read to
// `channels` (0: as stored); CMYK stays CMYK (`four`) for CmykToOutput.
// Returns the output channels.
int SetJpegOutput(jpeg_decompress_struct* cinfo, int channels, bool four) {
  const bool is_color = cinfo->num_components > 1;
  const int out_channels = channels != 0 ? channels : (is_color ? 3 : 1);
  // As tf.io.decode_jpeg with its default dct_method "": TensorFlow picks
  // the fast integer IDCT (JDCT_IFAST), and keeps fancy upsampling on.
  cinfo->dct_method = JDCT_IFAST;
  cinfo->do_fancy_upsampling = TRUE;
  if (four) {
    cinfo->out_color_space = JCS_CMYK;
  } else {
    cinfo->out_color_space = out_channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  }
  return out_channels;
}

// Reads the scanlines into `out` (output height x width x out_channels);
// CMYK ones (`four`) through the row buffer `cmyk`. Stops early when
// libjpeg gives no more.
void ReadJpegRows(jpeg_decompress_struct* cinfo, bool four, int out_channels,
                  uint8_t* out, std::vector<uint8_t>* cmyk) {
  const int width = static_cast<int>(cinfo->output_width);
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* row = out + static_cast<size_t>(cinfo->output_scanline) * width *
                             out_channels;
    JSAMPROW target = four ? cmyk->data() : row;
    if (jpeg_read_scanlines(cinfo, &target, 1) != 1) break;
    if (four) {
      // Adobe's files store inverted inks.
      CmykToOutput(cmyk->data(), width, cinfo->saw_Adobe_marker,
                   out_channels, row);
    }
  }
}

// Finishes a decode that read every row; false, with the message in `err`,
// for a truncated one.
bool FinishJpeg(jpeg_decompress_struct* cinfo, JpegErrorJump* err) {
  if (!err->truncated && cinfo->output_scanline == cinfo->output_height) {
    jpeg_finish_decompress(cinfo);
  }
  const bool ok =
      !err->truncated && cinfo->output_scanline == cinfo->output_height;
  if (!ok) {
    std::snprintf(err->message, sizeof(err->message),
                  "premature end of data (truncated file)");
  }
  return ok;
}

bool DecodeJpegInto(const std::string& bytes, int channels,
                    const Allocate& alloc, const std::string& context,
                    std::string* error) {
  jpeg_decompress_struct cinfo;
  JpegErrorJump err;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = JpegErrorExit;
  err.base.emit_message = JpegEmitMessage;
  std::vector<uint8_t>* cmyk = new std::vector<uint8_t>();
  std::exception_ptr thrown;
  volatile bool ok = false;  // read after a longjmp
  jpeg_create_decompress(&cinfo);
  if (setjmp(err.jump) == 0) {
    jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
                 static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&cinfo, TRUE);
    const bool four = cinfo.jpeg_color_space == JCS_CMYK ||
                      cinfo.jpeg_color_space == JCS_YCCK;
    const int out_channels = SetJpegOutput(&cinfo, channels, four);
    uint8_t* out = nullptr;
    // The size is checked before libjpeg allocates (a progressive image's
    // coefficients for the whole image).
    thrown = CaptureError([&] {
      CheckImagePixels(cinfo.image_height, cinfo.image_width, "JPEG image",
                       context);
    });
    if (!thrown) jpeg_start_decompress(&cinfo);
    if (!thrown) {
      thrown = CaptureError([&] {
        out = alloc(static_cast<int>(cinfo.output_height),
                    static_cast<int>(cinfo.output_width), out_channels);
        if (four) cmyk->resize(static_cast<size_t>(cinfo.output_width) * 4);
      });
    }
    if (!thrown) {
      ReadJpegRows(&cinfo, four, out_channels, out, cmyk);
      ok = FinishJpeg(&cinfo, &err);
    }
  }
  jpeg_destroy_decompress(&cinfo);
  delete cmyk;
  if (thrown) std::rethrow_exception(thrown);
  if (!ok) *error = StrCat("JPEG: ", err.message);
  return ok;
}

void Decode(const std::string& bytes, int channels, const Allocate& alloc,
            const std::string& context) {
  SLIM_CHECK(channels == 0 || channels == 1 || channels == 3, context,
             ": cannot decode to ", channels, " channels (expected 0, 1 or 3)");
  std::string error;
  bool ok = false;
  if (IsPng(bytes)) {
    ok = DecodePngInto(bytes, channels, alloc, context, &error);
  } else if (IsJpeg(bytes)) {
    ok = DecodeJpegInto(bytes, channels, alloc, context, &error);
  } else if (IsBmp(bytes)) {
    DecodeBmpInto(bytes, channels, alloc, context);
    return;
  } else if (IsGif(bytes)) {
    DecodeGifInto(bytes, channels, alloc, context);
    return;
  } else {
    SLIM_FAIL(context, ": cannot decode image (", bytes.size(),
              " bytes; expected PNG, JPEG, BMP or GIF data)");
  }
  SLIM_CHECK(ok, context, ": cannot decode image (", bytes.size(),
             " bytes): ", error);
}

}  // namespace

std::string EncodePng(const uint8_t* pixels, int height, int width,
                      int channels) {
  SLIM_CHECK(channels == 1 || channels == 3,
             "EncodePng: expected 1 or 3 channels, got ", channels);
  SLIM_CHECK(height > 0 && width > 0, "EncodePng: empty image ", height, "x",
             width);
  PngWriteState state;
  PngReadState err;  // only its message buffer is used
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err,
                                            PngError, PngWarning);
  SLIM_CHECK(png != nullptr, "png_create_write_struct failed");
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep>* rows = new std::vector<png_bytep>(height);
  volatile bool ok = false;  // read after a longjmp
  if (info != nullptr && setjmp(png_jmpbuf(png)) == 0) {
    png_set_write_fn(png, &state, PngWrite, PngFlush);
    // tf.io.encode_png's default: zlib's default compression level.
    png_set_compression_level(png, Z_DEFAULT_COMPRESSION);
    png_set_IHDR(png, info, width, height, 8,
                 channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; ++y) {
      (*rows)[y] = const_cast<png_bytep>(pixels) +
                   static_cast<size_t>(y) * width * channels;
    }
    png_write_image(png, rows->data());
    png_write_end(png, nullptr);
    ok = true;
  }
  png_destroy_write_struct(&png, info ? &info : nullptr);
  delete rows;
  SLIM_CHECK(ok, "PNG encoding failed for ", height, "x", width, "x",
             channels, " image: ", err.message);
  return std::move(state.out);
}

Image DecodeImage(const std::string& bytes, int channels,
                  const std::string& context) {
  Image img;
  Decode(bytes, channels,
         [&](int h, int w, int c) {
           img.height = h;
           img.width = w;
           img.channels = c;
           img.pixels.resize(static_cast<size_t>(h) * w * c);
           return img.pixels.data();
         },
         context);
  return img;
}

void DecodeImageInto(const std::string& bytes, int height, int width,
                     int channels, uint8_t* out, const std::string& context) {
  Decode(bytes, channels,
         [&](int h, int w, int c) {
           SLIM_CHECK(h == height && w == width && c == channels, context,
                      ": expected a ", height, "x", width, "x", channels,
                      " image, got ", h, "x", w, "x", c);
           return out;
         },
         context);
}

}  // namespace slimtorch
