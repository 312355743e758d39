#pragma once
// A reusable JPEG decoder for the photo input path: reads the header alone,
// and decodes only a window of the image (libjpeg-turbo skips the rows above
// it and the iMCU columns beside it), with the pixels of a full
// tf.io.decode_jpeg(channels=C) cropped to that window — as TensorFlow's
// decode_and_crop_jpeg. Same settings as DecodeImage (io/image_codec.h): the
// fast integer IDCT, fancy upsampling, CMYK/YCCK converted to RGB as
// TensorFlow does, a truncated image inside the window is an error. The
// crop is widened where libjpeg-turbo would treat its edges as the image's
// (upsampling; block smoothing of a progressive image whose later scans are
// missing), so the pixels are the full decode's for any window.
//
// One decoder per thread (not thread-safe). The libjpeg state and the row
// buffers are kept between images, so steady-state decoding allocates
// nothing.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace slimtorch {

class JpegDecoder {
 public:
  struct Header {
    int height = 0;
    int width = 0;
    // Components as stored: 1 (gray), 3 (YCbCr/RGB) or 4 (CMYK/YCCK).
    int components = 0;
  };

  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Whether `data` starts with a JPEG SOI marker.
  static bool IsJpeg(const uint8_t* data, size_t size);

  // Parses the header. Throws slimtorch::Error naming `context` when the
  // data is not a readable JPEG header.
  Header ReadHeader(const uint8_t* data, size_t size,
                    const std::string& context);

  // Decodes rows [y, y + height) and columns [x, x + width) of the image to
  // `channels` (1 or 3) channels into `out`, which must hold
  // height * width * channels bytes (HWC, row-major). The window must lie in
  // the image. Throws naming `context` on corrupt or truncated data.
  void DecodeWindow(const uint8_t* data, size_t size, int y, int x, int height,
                    int width, int channels, uint8_t* out,
                    const std::string& context);

  // As DecodeWindow, into the decoder's own buffer (valid until the next
  // call; no copy per row): returns the window's first pixel, and in
  // *row_stride the bytes from one row to the next.
  const uint8_t* DecodeWindowInPlace(const uint8_t* data, size_t size, int y,
                                     int x, int height, int width,
                                     int channels, int64_t* row_stride,
                                     const std::string& context);

  // libjpeg state and buffers (defined in the .cc only).
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace slimtorch
