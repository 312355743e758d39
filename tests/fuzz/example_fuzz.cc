// Fuzz target: tf.train.Example parsing, the bytes as one serialized
// Example: io/example.h's decoders (TF-Slim's five keys, build_imagenet_data's
// keys, the box lists) and the photo path's zero-copy reader
// (src/data/example_scan.h). Property: where DecodeImageExample and
// ScanExample both accept a record they agree on the image bytes, the label,
// the height and the width.
#include <cstdlib>
#include <iostream>

#include "data/example_scan.h"
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/example.h"

namespace {

void ExpectSame(bool same, const char* what) {
  if (same) return;
  std::cerr << "DecodeImageExample and ScanExample disagree on " << what
            << "\n";
  std::abort();
}

}  // namespace

SLIM_FUZZ_TARGET(example) {
  using namespace slimtorch;  // NOLINT
  fuzz::UseSmallLimits();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  bool decoded = false, scanned = false;
  ImageExample ex;
  internal::ExampleScan scan;
  try {
    ex = DecodeImageExample(bytes, "fuzz record");
    decoded = true;
  } catch (const Error&) {
  }
  try {
    internal::ScanExample(bytes, "fuzz record", &scan);
    scanned = true;
  } catch (const Error&) {
  }
  try {
    DecodeImageNetExample(bytes, "fuzz record");
  } catch (const Error&) {
  }
  try {
    DecodeBoundingBoxes(bytes, "fuzz record");
  } catch (const Error&) {
  }
  if (decoded && scanned) {
    ExpectSame(ex.encoded == scan.encoded, "image/encoded");
    ExpectSame(ex.label == scan.label, "image/class/label");
    ExpectSame(ex.height == scan.height, "image/height");
    ExpectSame(ex.width == scan.width, "image/width");
  }
  return 0;
}
