#include "slimtorch/io/jpeg_decoder.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <vector>

#include "cmyk.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/jpeg_error.h"

namespace slimtorch {

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  JpegErrorJump err;
  // The decoded rows (libjpeg's output width, its components), and the
  // CMYK window converted to the caller's channels.
  std::vector<uint8_t> rows;
  std::vector<uint8_t> converted;
  std::vector<JSAMPROW> row_pointers;
};

namespace {

// False, with the reason in err->message, unless the window lies in the
// image whose header `cinfo` has read and the image is within the pixel
// limit (core/resource_limits.h).
bool WindowInImage(const jpeg_decompress_struct& cinfo, int y, int x,
                   int height, int width, JpegErrorJump* err) {
  const int image_h = static_cast<int>(cinfo.image_height);
  const int image_w = static_cast<int>(cinfo.image_width);
  // Before libjpeg allocates (a progressive image's coefficients).
  const uint64_t pixels = uint64_t{cinfo.image_height} * cinfo.image_width;
  const uint64_t limit = GetResourceLimits().max_image_pixels;
  if (pixels > limit) {
    std::snprintf(err->message, sizeof(err->message),
                  "JPEG image of %dx%d = %llu pixels is too large (%s)",
                  image_h, image_w, static_cast<unsigned long long>(pixels),
                  LimitHint(limit, "pixels", "SLIMTORCH_MAX_IMAGE_PIXELS")
                      .c_str());
    return false;
  }
  if (y < 0 || x < 0 || height <= 0 || width <= 0 || y + height > image_h ||
      x + width > image_w) {
    std::snprintf(err->message, sizeof(err->message),
                  "window %dx%d at (%d, %d) outside the %dx%d image", height,
                  width, y, x, image_h, image_w);
    return false;
  }
  return true;
}

// Starts decompressing with TensorFlow's settings (CMYK kept as such when
// `four`), cropped to columns [x, x + width) and a margin; returns the
// first column decoded.
JDIMENSION StartWindowDecompress(jpeg_decompress_struct* cinfo, int x,
                                 int width, int channels, bool four) {
  const int image_w = static_cast<int>(cinfo->image_width);
  cinfo->dct_method = JDCT_IFAST;
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->out_color_space =
      four ? JCS_CMYK : (channels == 1 ? JCS_GRAYSCALE : JCS_RGB);
  jpeg_start_decompress(cinfo);
  // libjpeg-turbo crops at iMCU boundaries and treats the crop's edges as
  // the image's, so widen the crop until the window's own pixels match a
  // full decode:
  // - Fancy upsampling of the crop's edge columns: one column more on each
  //   side (the window's pixels upsample from columns x - 1 to x + width).
  // - A crop whose chroma is under two samples wide: jpeg_crop_scanline
  //   re-chooses the upsampler, and box-upsamples it (jdsample.c: fancy
  //   needs more than two). So at least 2 * max_h_samp_factor columns.
  // - Block smoothing, for a progressive image whose scans left some of
  //   the first AC coefficients unknown (scans missing or cut short):
  //   jdcoefct.c (decompress_smooth_data) estimates them from the DC values
  //   of a 5x5 window of blocks, taking the blocks left of the crop to be
  //   copies of its first block, so the crop's first two block columns of
  //   each component differ from a full decode. Two iMCUs more (two blocks
  //   of every component) left of column x - 1 keep them out of the window
  //   and its upsampling; the right edge takes its neighbours from the whole
  //   image. Baseline images are never smoothed: one column.
  const int left =
      1 +
      (cinfo->progressive_mode ? 2 * DCTSIZE * cinfo->max_h_samp_factor : 0);
  const int x0 = std::max(0, x - left);
  const int x1 = std::min(
      image_w, std::max(x + width + 1, x0 + 2 * cinfo->max_h_samp_factor));
  JDIMENSION crop_x = static_cast<JDIMENSION>(x0);
  JDIMENSION crop_w = static_cast<JDIMENSION>(x1 - x0);
  if (x1 - x0 < image_w) {
    jpeg_crop_scanline(cinfo, &crop_x, &crop_w);
  } else {
    crop_x = 0;
  }
  return crop_x;
}

// Decodes rows [y, y + height) into s->rows (libjpeg's output width and
// components); sets s->err.truncated when the data ends early. Returns the
// bytes per row.
size_t ReadWindowRows(JpegDecoder::State* s, int y, int height) {
  jpeg_decompress_struct* cinfo = &s->cinfo;
  const size_t row_bytes =
      static_cast<size_t>(cinfo->output_width) * cinfo->output_components;
  const size_t need = row_bytes * height;
  if (s->rows.size() < need) s->rows.resize(need);
  s->row_pointers.resize(height);
  for (int r = 0; r < height; ++r) {
    s->row_pointers[r] = s->rows.data() + r * row_bytes;
  }
  if (y > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y));
  // Straight into the rows, as many per call as libjpeg gives.
  int done = 0;
  while (done < height && !s->err.truncated) {
    const JDIMENSION got =
        jpeg_read_scanlines(cinfo, s->row_pointers.data() + done,
                            static_cast<JDIMENSION>(height - done));
    if (got == 0) {
      s->err.truncated = true;
      break;
    }
    done += static_cast<int>(got);
  }
  return row_bytes;
}

// The CMYK window (from column `skip` of each decoded row) converted to
// `channels` in s->converted; its first row, its stride to *row_stride.
const uint8_t* ConvertCmykWindow(JpegDecoder::State* s, size_t row_bytes,
                                 size_t skip, int height, int width,
                                 int channels, int64_t* row_stride) {
  const bool inverted = s->cinfo.saw_Adobe_marker;
  const size_t out_row = static_cast<size_t>(width) * channels;
  if (s->converted.size() < out_row * height) {
    s->converted.resize(out_row * height);
  }
  for (int r = 0; r < height; ++r) {
    CmykToOutput(s->rows.data() + r * row_bytes + skip * 4, width, inverted,
                 channels, s->converted.data() + r * out_row);
  }
  *row_stride = static_cast<int64_t>(out_row);
  return s->converted.data();
}

}  // namespace

JpegDecoder::JpegDecoder() : state_(new State) {
  State* s = state_.get();
  s->cinfo.err = jpeg_std_error(&s->err.base);
  s->err.base.error_exit = JpegErrorExit;
  s->err.base.emit_message = JpegEmitMessage;
  jpeg_create_decompress(&s->cinfo);
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
  if (setjmp(s->err.jump) == 0) {
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
            " bytes): ", s->err.message);
}

const uint8_t* JpegDecoder::DecodeWindowInPlace(
    const uint8_t* data, size_t size, int y, int x, int height, int width,
    int channels, int64_t* row_stride, const std::string& context) {
  State* s = state_.get();
  jpeg_decompress_struct* cinfo = &s->cinfo;
  SLIM_CHECK(channels == 1 || channels == 3, context,
             ": cannot decode JPEG to ", channels, " channels");
  SLIM_CHECK(IsJpeg(data, size), context, ": not JPEG data (", size,
             " bytes)");
  s->err.truncated = false;
  s->err.message[0] = '\0';
  bool window_ok = true;
  const uint8_t* first = nullptr;
  if (setjmp(s->err.jump) == 0) {
    jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
    jpeg_read_header(cinfo, TRUE);
    if (!WindowInImage(*cinfo, y, x, height, width, &s->err)) {
      window_ok = false;
      longjmp(s->err.jump, 1);
    }
    const bool four = cinfo->jpeg_color_space == JCS_CMYK ||
                      cinfo->jpeg_color_space == JCS_YCCK;
    const JDIMENSION crop_x =
        StartWindowDecompress(cinfo, x, width, channels, four);
    const size_t row_bytes = ReadWindowRows(s, y, height);
    const size_t skip = static_cast<size_t>(x - static_cast<int>(crop_x));
    if (four && !s->err.truncated) {
      first = ConvertCmykWindow(s, row_bytes, skip, height, width, channels,
                                row_stride);
    } else {
      first = s->rows.data() + skip * cinfo->output_components;
      *row_stride = static_cast<int64_t>(row_bytes);
    }
    jpeg_abort_decompress(cinfo);
  } else {
    jpeg_abort_decompress(cinfo);
    SLIM_CHECK(window_ok, context, ": ", s->err.message);
    SLIM_FAIL(context, ": cannot decode JPEG (", size,
              " bytes): ", s->err.message);
  }
  SLIM_CHECK(!s->err.truncated, context, ": cannot decode JPEG (", size,
             " bytes): premature end of data (truncated file)");
  return first;
}

void JpegDecoder::DecodeWindow(const uint8_t* data, size_t size, int y, int x,
                               int height, int width, int channels,
                               uint8_t* out, const std::string& context) {
  int64_t stride = 0;
  const uint8_t* rows = DecodeWindowInPlace(data, size, y, x, height, width,
                                            channels, &stride, context);
  const size_t out_row = static_cast<size_t>(width) * channels;
  for (int r = 0; r < height; ++r) {
    std::memcpy(out + r * out_row, rows + r * stride, out_row);
  }
}

}  // namespace slimtorch
