#pragma once
// A zero-copy reader of the tf.train.Example keys the photo input path needs
// (private to src/data): it walks the protobuf wire format of a serialized
// record and points into it, instead of building a proto::Example and
// copying the image bytes. Same rules and messages as DecodeImageExample
// (io/example.h) for the keys they share.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace slimtorch {
namespace internal {

struct ExampleScan {
  std::string_view encoded;  // image/encoded (required, exactly one value)
  std::string_view format;   // image/format; empty when absent
  int64_t label = 0;         // image/class/label (required, exactly one)
  int64_t height = 0;        // image/height, 0 when absent
  int64_t width = 0;         // image/width, 0 when absent
  // image/object/bbox/{ymin,xmin,ymax,xmax} as [ymin, xmin, ymax, xmax]
  // (ImageNet records); empty when absent. Kept between calls (its storage
  // is reused).
  std::vector<std::array<float, 4>> boxes;
};

// Scans `data` into *out (the views point into `data`). Throws
// slimtorch::Error prefixed by `context` on a malformed record, a missing
// image/encoded or label, or bbox lists of different lengths.
void ScanExample(std::string_view data, const std::string& context,
                 ExampleScan* out);

}  // namespace internal
}  // namespace slimtorch
