#include "slimtorch/io/image_codec.h"

#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

cv::Mat DecodeMat(const std::string& bytes, int channels,
                  const std::string& context) {
  SLIM_CHECK(channels == 0 || channels == 1 || channels == 3, context,
             ": cannot decode to ", channels, " channels (expected 0, 1 or 3)");
  cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1,
              const_cast<char*>(bytes.data()));
  // TensorFlow's decoders ignore EXIF orientation; OpenCV applies it unless
  // told not to (IMREAD_UNCHANGED never applies it).
  int flags = channels == 1   ? cv::IMREAD_GRAYSCALE
              : channels == 3 ? cv::IMREAD_COLOR
                              : cv::IMREAD_UNCHANGED;
  if (channels != 0) flags |= cv::IMREAD_IGNORE_ORIENTATION;
  cv::Mat m;
  if (!bytes.empty()) m = cv::imdecode(buf, flags);
  SLIM_CHECK(!m.empty(), context, ": cannot decode image (", bytes.size(),
             " bytes; expected PNG, JPEG, BMP or GIF data)");
  SLIM_CHECK(m.depth() == CV_8U, context,
             ": only 8-bit images are supported, got depth ", m.depth());
  if (m.channels() == 4) {
    cv::cvtColor(m, m, cv::COLOR_BGRA2RGB);
  } else if (m.channels() == 3) {
    cv::cvtColor(m, m, cv::COLOR_BGR2RGB);
  }
  if (!m.isContinuous()) m = m.clone();
  return m;
}

}  // namespace

std::string EncodePng(const uint8_t* pixels, int height, int width,
                      int channels) {
  SLIM_CHECK(channels == 1 || channels == 3,
             "EncodePng: expected 1 or 3 channels, got ", channels);
  cv::Mat m(height, width, channels == 1 ? CV_8UC1 : CV_8UC3,
            const_cast<uint8_t*>(pixels));
  cv::Mat bgr;
  if (channels == 3) {
    cv::cvtColor(m, bgr, cv::COLOR_RGB2BGR);
  } else {
    bgr = m;
  }
  std::vector<uchar> out;
  SLIM_CHECK(cv::imencode(".png", bgr, out), "PNG encoding failed for ",
             height, "x", width, "x", channels, " image");
  return std::string(out.begin(), out.end());
}

Image DecodeImage(const std::string& bytes, int channels,
                  const std::string& context) {
  cv::Mat m = DecodeMat(bytes, channels, context);
  Image img;
  img.height = m.rows;
  img.width = m.cols;
  img.channels = m.channels();
  img.pixels.assign(m.data, m.data + m.total() * m.elemSize());
  return img;
}

void DecodeImageInto(const std::string& bytes, int height, int width,
                     int channels, uint8_t* out, const std::string& context) {
  cv::Mat m = DecodeMat(bytes, channels, context);
  SLIM_CHECK(m.rows == height && m.cols == width && m.channels() == channels,
             context, ": expected a ", height, "x", width, "x", channels,
             " image, got ", m.rows, "x", m.cols, "x", m.channels());
  std::memcpy(out, m.data, m.total() * m.elemSize());
}

}  // namespace slimtorch
