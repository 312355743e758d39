#pragma once
// tf.train.Example records as TF-Slim writes and reads them.
//
// TF-Slim's image_to_tfexample() writes exactly five keys (persisted format,
// do not change): image/encoded (bytes), image/format (bytes),
// image/class/label (int64), image/height (int64), image/width (int64).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

// Builds a tf.train.Example feature by feature, for records with more keys
// than TF-Slim's five (build_imagenet_data's). Adding a key twice replaces
// it. Serialize() sorts the keys (protobuf's deterministic serialization,
// as TensorFlow's SerializeToString gives for the same features).
class ExampleBuilder {
 public:
  ExampleBuilder();
  ~ExampleBuilder();
  ExampleBuilder(const ExampleBuilder&) = delete;
  ExampleBuilder& operator=(const ExampleBuilder&) = delete;

  ExampleBuilder& AddBytes(const std::string& key, const std::string& value);
  ExampleBuilder& AddInt64(const std::string& key, int64_t value);
  // A list feature; an empty list is kept (an empty float_list / int64_list,
  // as TensorFlow writes for an image without boxes).
  ExampleBuilder& AddInt64List(const std::string& key,
                               const std::vector<int64_t>& values);
  ExampleBuilder& AddFloatList(const std::string& key,
                               const std::vector<float>& values);
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The keys build_imagenet_data.py writes beyond TF-Slim's five (persisted
// format, do not change).
namespace imagenet_keys {
inline constexpr const char* kColorspace = "image/colorspace";
inline constexpr const char* kChannels = "image/channels";
inline constexpr const char* kSynset = "image/class/synset";
inline constexpr const char* kText = "image/class/text";
inline constexpr const char* kFilename = "image/filename";
inline constexpr const char* kXmin = "image/object/bbox/xmin";
inline constexpr const char* kYmin = "image/object/bbox/ymin";
inline constexpr const char* kXmax = "image/object/bbox/xmax";
inline constexpr const char* kYmax = "image/object/bbox/ymax";
inline constexpr const char* kBoxLabel = "image/object/bbox/label";
}  // namespace imagenet_keys

// A box in coordinates relative to the image size, in [0, 1], in the order
// of TF's sample_distorted_bounding_box (and TF-Slim's BoundingBox handler).
struct BoundingBox {
  float ymin = 0;
  float xmin = 0;
  float ymax = 0;
  float xmax = 0;
  bool operator==(const BoundingBox& o) const {
    return ymin == o.ymin && xmin == o.xmin && ymax == o.ymax && xmax == o.xmax;
  }
};

// One record of build_imagenet_data.py: every key it writes.
struct ImageNetExample {
  std::string encoded;             // JPEG bytes of an RGB (or gray) image
  std::string format = "JPEG";     // image/format
  std::string colorspace = "RGB";  // image/colorspace
  int64_t channels = 3;            // image/channels
  int64_t label = 0;               // 1..1000 in synset-file order
  std::string synset;              // "n01440764"
  std::string text;                // human-readable class name
  std::string filename;            // basename, "n01440764_10026.JPEG"
  int64_t height = 0;
  int64_t width = 0;
  std::vector<BoundingBox> boxes;  // 0+ boxes, all of class `label`
};

// Serializes with the fifteen keys of build_imagenet_data's
// _convert_to_example (the box lists always present, maybe empty;
// image/object/bbox/label = `label` once per box).
std::string EncodeImageNetExample(const ImageNetExample& ex);

// Parses a record written by EncodeImageNetExample or by
// build_imagenet_data.py. image/encoded and image/class/label are required;
// other keys default to empty / 0 / no boxes. Throws naming `context` on
// malformed input (including box lists of different lengths).
ImageNetExample DecodeImageNetExample(const std::string& serialized,
                                      const std::string& context);

// The boxes of a serialized Example (image/object/bbox/{ymin,xmin,ymax,xmax}
// float lists; none when the keys are absent), as TF-Slim's
// tfexample_decoder.BoundingBox: box i takes element i of each list. Throws
// naming `context` when the lists differ in length or are not float lists.
std::vector<BoundingBox> DecodeBoundingBoxes(const std::string& serialized,
                                             const std::string& context);

}  // namespace slimtorch
