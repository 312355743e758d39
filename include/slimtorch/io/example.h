#pragma once
// tf.train.Example records as TF-Slim writes and reads them.
//
// TF-Slim's image_to_tfexample() writes exactly five keys (persisted format,
// do not change): image/encoded (bytes), image/format (bytes),
// image/class/label (int64), image/height (int64), image/width (int64).

#include <cstdint>
#include <string>

namespace slimtorch {

namespace example_keys {
inline constexpr const char* kEncoded = "image/encoded";
inline constexpr const char* kFormat = "image/format";
inline constexpr const char* kLabel = "image/class/label";
inline constexpr const char* kHeight = "image/height";
inline constexpr const char* kWidth = "image/width";
}  // namespace example_keys

struct ImageExample {
  std::string encoded;  // encoded image bytes (PNG/JPEG) or raw pixels
  std::string format;   // "png", "jpg", "jpeg" or "raw"
  int64_t label = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// Serializes a tf.train.Example with TF-Slim's five keys. Map keys are
// serialized in sorted order (protobuf's deterministic serialization).
std::string EncodeImageExample(const ImageExample& ex);

// Parses a serialized tf.train.Example. `context` (e.g. "file.tfrecord
// record 17") prefixes error messages. image/encoded and image/class/label
// are required; image/format defaults to `default_format`, height/width to 0
// when absent. Throws slimtorch::Error on malformed input.
ImageExample DecodeImageExample(const std::string& serialized,
                                const std::string& context,
                                const std::string& default_format = "png");

}  // namespace slimtorch
