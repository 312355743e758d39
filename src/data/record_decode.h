#pragma once
// Record → (label, image) decoding shared by the record pipeline and the
// in-memory one (private to src/data).

#include <cstdint>
#include <string>

#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"

namespace slimtorch {
namespace internal {

struct RecordFormat {
  // Channels to decode to (1 or 3).
  int decode_channels = 3;
  // image/format assumed when a record has none.
  std::string default_format = "png";
  // label - labels_offset must fall in [0, num_classes).
  int64_t num_classes = 0;
  int64_t labels_offset = 0;
};

// The format named by the fields of the same names in `o` (PipelineOptions,
// DecodeSplitOptions).
template <typename Options>
RecordFormat RecordFormatOf(const Options& o) {
  RecordFormat format;
  format.decode_channels = o.decode_channels;
  format.default_format = o.default_format;
  format.num_classes = o.num_classes;
  format.labels_offset = o.labels_offset;
  return format;
}

// Parses a serialized tf.train.Example and validates its label; *label gets
// label - labels_offset. `context` names the record in errors.
ImageExample ParseRecord(const std::string& data, const RecordFormat& format,
                         const std::string& context, int64_t* label);

// Decodes the example's image (PNG/JPEG, or "raw" bytes of image/height x
// image/width x decode_channels).
Image DecodeRecordImage(const ImageExample& ex, const RecordFormat& format,
                        const std::string& context);

// Decodes into `out`, which holds exactly height*width*decode_channels
// bytes; an image of another size is an error naming `context`.
void DecodeRecordImageInto(const ImageExample& ex, const RecordFormat& format,
                           int height, int width, uint8_t* out,
                           const std::string& context);

}  // namespace internal
}  // namespace slimtorch
