#include "slimtorch/io/jpeg_decoder.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {0};
  bool truncated = false;
  std::vector<uint8_t> row;  // one output row of the decoded columns
};

namespace {

JpegDecoder::State* StateOf(j_common_ptr cinfo) {
  return static_cast<JpegDecoder::State*>(cinfo->client_data);
}

void ErrorExit(j_common_ptr cinfo) {
  JpegDecoder::State* s = StateOf(cinfo);
  s->err.format_message(cinfo, s->message);
  longjmp(s->jump, 1);
}

// Warnings are ignored as TensorFlow does, except data that ends early.
void EmitMessage(j_common_ptr cinfo, int level) {
  JpegDecoder::State* s = StateOf(cinfo);
  if (level < 0 && s->err.msg_code == JWRN_JPEG_EOF) s->truncated = true;
}

// CMYK (Adobe files store inverted inks) → RGB or gray, as DecodeImage.
void CmykToOutput(const uint8_t* cmyk, int width, bool inverted, int channels,
                  uint8_t* out) {
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

}  // namespace

JpegDecoder::JpegDecoder() : state_(new State) {
  State* s = state_.get();
  s->cinfo.err = jpeg_std_error(&s->err);
  s->err.error_exit = ErrorExit;
  s->err.emit_message = EmitMessage;
  jpeg_create_decompress(&s->cinfo);
  s->cinfo.client_data = s;
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&state_->cinfo); }

bool JpegDecoder::IsJpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

JpegDecoder::Header JpegDecoder::ReadHeader(const uint8_t* data, size_t size,
                                            const std::string& context) {
  State* s = state_.get();
  jpeg_decompress_struct* cinfo = &s->cinfo;
  SLIM_CHECK(IsJpeg(data, size), context, ": not JPEG data (", size,
             " bytes)");
  Header h;
  if (setjmp(s->jump) == 0) {
    jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
    jpeg_read_header(cinfo, TRUE);
    h.height = static_cast<int>(cinfo->image_height);
    h.width = static_cast<int>(cinfo->image_width);
    h.components = cinfo->num_components;
    jpeg_abort_decompress(cinfo);
    return h;
  }
  jpeg_abort_decompress(cinfo);
  SLIM_FAIL(context, ": cannot read the JPEG header (", size,
            " bytes): ", s->message);
}

void JpegDecoder::DecodeWindow(const uint8_t* data, size_t size, int y, int x,
                               int height, int width, int channels,
                               uint8_t* out, const std::string& context) {
  State* s = state_.get();
  jpeg_decompress_struct* cinfo = &s->cinfo;
  SLIM_CHECK(channels == 1 || channels == 3, context,
             ": cannot decode JPEG to ", channels, " channels");
  SLIM_CHECK(IsJpeg(data, size), context, ": not JPEG data (", size,
             " bytes)");
  s->truncated = false;
  s->message[0] = '\0';
  bool window_ok = true;
  if (setjmp(s->jump) == 0) {
    jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
    jpeg_read_header(cinfo, TRUE);
    const int image_h = static_cast<int>(cinfo->image_height);
    const int image_w = static_cast<int>(cinfo->image_width);
    if (y < 0 || x < 0 || height <= 0 || width <= 0 || y + height > image_h ||
        x + width > image_w) {
      window_ok = false;
      std::snprintf(s->message, sizeof(s->message),
                    "window %dx%d at (%d, %d) outside the %dx%d image", height,
                    width, y, x, image_h, image_w);
      longjmp(s->jump, 1);
    }
    const bool four = cinfo->jpeg_color_space == JCS_CMYK ||
                      cinfo->jpeg_color_space == JCS_YCCK;
    cinfo->dct_method = JDCT_IFAST;
    cinfo->do_fancy_upsampling = TRUE;
    cinfo->out_color_space =
        four ? JCS_CMYK : (channels == 1 ? JCS_GRAYSCALE : JCS_RGB);
    jpeg_start_decompress(cinfo);
    // libjpeg-turbo crops at iMCU boundaries and upsamples the edge columns
    // of the crop as if they were the image's edges, so ask for one column
    // more on each side: the window's own pixels then match a full decode.
    const int x0 = std::max(0, x - 1);
    const int x1 = std::min(image_w, x + width + 1);
    JDIMENSION crop_x = static_cast<JDIMENSION>(x0);
    JDIMENSION crop_w = static_cast<JDIMENSION>(x1 - x0);
    if (x1 - x0 < image_w) {
      jpeg_crop_scanline(cinfo, &crop_x, &crop_w);
    } else {
      crop_x = 0;
    }
    const int out_comps = cinfo->output_components;
    const size_t row_bytes = static_cast<size_t>(cinfo->output_width) * out_comps;
    if (s->row.size() < row_bytes) s->row.resize(row_bytes);
    if (y > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y));
    const int skip = x - static_cast<int>(crop_x);
    const bool inverted = cinfo->saw_Adobe_marker;
    for (int r = 0; r < height; ++r) {
      JSAMPROW row = s->row.data();
      if (jpeg_read_scanlines(cinfo, &row, 1) != 1 || s->truncated) {
        s->truncated = true;
        break;
      }
      uint8_t* dst = out + static_cast<size_t>(r) * width * channels;
      const uint8_t* src = s->row.data() + static_cast<size_t>(skip) * out_comps;
      if (four) {
        CmykToOutput(src, width, inverted, channels, dst);
      } else {
        std::memcpy(dst, src, static_cast<size_t>(width) * channels);
      }
    }
    jpeg_abort_decompress(cinfo);
  } else {
    jpeg_abort_decompress(cinfo);
    SLIM_CHECK(window_ok, context, ": ", s->message);
    SLIM_FAIL(context, ": cannot decode JPEG (", size, " bytes): ", s->message);
  }
  SLIM_CHECK(!s->truncated, context, ": cannot decode JPEG (", size,
             " bytes): premature end of data (truncated file)");
}

}  // namespace slimtorch
